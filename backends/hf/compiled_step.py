"""The transformers decode step compiled once (a CUDA graph on a GPU): one single-token forward shared by every
session, each session decoding into its own static KV cache whose layers all keep absolute positions.

Every layer is a full-length `StaticLayer`, sliding-window ones too: the window is the mask's job (as with the
`DynamicCache` the eager path uses), so a key sits at its own position and a cache cropped back to any length keeps
what it needs, which a ring buffer would have overwritten.

Every call of a compiled step runs on the step's own thread (`StepThread`), whichever thread asks.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

import torch
from transformers.cache_utils import Cache, StaticLayer

from backends.hf.cache_keyword import cache_keyword, cache_kwargs

T = TypeVar("T")

# Positions of a compiled session's cache: a prompt and its draft up to this many tokens decode compiled; a longer one
# decodes eagerly. Every step attends over all of them (masked), nothing on a GPU, but on a CPU it made the narrow
# Gemma-4's compiled step slower than eager decoding (docs/gpu_check.md, "Compiled draft step").
COMPILED_CACHE_TOKENS = 2048


def static_cache(model, positions: int) -> Cache:
    """A static cache of `positions` per layer for `model` (tensors allocated on the first write, on its device)."""
    if not getattr(StaticLayer, "is_croppable", False):
        import transformers

        raise RuntimeError(f"model_compile needs a transformers whose static cache can be cropped (5.24 can; this is "
                           f"{transformers.__version__}): pip install 'transformers>=5.24,<5.40'")
    # Built outside inference mode wherever it is asked for: the compiled graph is guarded on how its position
    # counters were made, so every cache must make them alike or the step compiles again.
    with torch.inference_mode(False):
        return Cache(layers=[StaticLayer(positions) for _ in range(model.config.get_text_config().num_hidden_layers)])


def pin_cpu_threads(threads: int) -> None:
    """Run the calling thread's CPU ops on `threads` intra-op threads, the count a graph was compiled under.

    With OpenMP the count is per thread: a new thread starts from OMP_NUM_THREADS (or all cores) whatever the loading
    thread was set to (CTranslate2's Whisper sets it to its `cpu_threads` there), and torch.compile guards on it, so
    a step compiled under one count and called under another compiles again."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


class StepThread:
    """One long-lived thread that runs every call of a compiled step, whichever thread makes it.

    torch.compile keeps the CUDA graphs of its "reduce-overhead" mode per thread: cudagraph trees find their tree
    manager (graphs and memory pool) in thread-local storage (`torch._inductor.cudagraph_trees.get_container`), so a
    step called from a new thread warms up and records its graphs again there, with a new memory pool; simulstream's
    HTTP server calls from a new thread per request. On this thread the graphs recorded at load are replayed. Calls
    are serialised (one static cache, one graph's buffers), run under the caller's grad and inference mode (both
    thread-local), with the CPU thread count of the thread that made the step (`pin_cpu_threads`); a call made on
    the step's thread itself runs at once."""

    def __init__(self, name: str):
        self.cpu_threads = torch.get_num_threads()  # the creating (loading) thread's
        self._ident: int | None = None  # the step's thread, once started
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name, initializer=self._started)

    def _started(self) -> None:
        self._ident = threading.get_ident()

    def run(self, function: Callable[..., T], *args, **kwargs) -> T:
        if threading.get_ident() == self._ident:
            return function(*args, **kwargs)
        inference, grad = torch.is_inference_mode_enabled(), torch.is_grad_enabled()

        def call() -> T:
            pin_cpu_threads(self.cpu_threads)
            with torch.inference_mode(inference), torch.set_grad_enabled(grad):
                return function(*args, **kwargs)

        return self._executor.submit(call).result()

    def cuda_graphs(self) -> int | None:
        """How many CUDA graphs torch.compile has recorded on this thread (`make gpu-check` reports it: one per
        compiled shape is the design; more means graphs were recorded again)."""
        return self.run(cuda_graphs_recorded)


def cuda_graphs_recorded() -> int | None:
    """CUDA graphs the calling thread's cudagraph trees hold, on every GPU (0 without CUDA; None if this torch keeps
    them otherwise). Reads torch internals: a diagnostic, never a decision."""
    try:
        from torch._inductor import cudagraph_trees

        count = 0
        for index in range(torch.cuda.device_count()):
            manager = cudagraph_trees.get_manager(index, create_if_none_exists=False)
            nodes = [node for roots in (manager.roots.values() if manager else ()) for node in roots]
            while nodes:
                node = nodes.pop()
                count += 1
                nodes.extend(child for children in node.children.values() for child in children)
        return count
    except (ImportError, AttributeError):
        return None


def cuda_graph_report(step_thread: StepThread) -> str:
    """One line for benchmarks: graphs recorded on the step's thread and calls torch ran without a graph."""
    from torch._dynamo.utils import counters

    return (f"{step_thread.cuda_graphs()} CUDA graphs recorded on its thread, "
            f"{counters['inductor']['cudagraph_skips']} cudagraph skips in the process")


class CompiledStep:
    """`model`'s forward of one token into a static cache, compiled without graph breaks and with fixed shapes, so
    that one graph serves every session and prompt length. Steps run on one thread (`StepThread`), one at a time."""

    def __init__(self, model):
        self.device = next(model.parameters()).device
        mode = "reduce-overhead" if self.device.type == "cuda" else None  # CUDA graphs where launches cost
        self._forward = torch.compile(model.forward, fullgraph=True, dynamic=False, mode=mode)
        self.cache_keyword = cache_keyword(model)
        self.thread = StepThread("compiled-step")

    @property
    def cpu_threads(self) -> int:
        """The CPU thread count every step runs with (the loading thread's, where the step was made)."""
        return self.thread.cpu_threads

    @torch.inference_mode()
    def warm_up(self, model, steps: int = 3) -> None:
        """Compile now (on a GPU also record the graph, which takes a few calls), so that no stream waits for it."""
        cache = static_cache(model, COMPILED_CACHE_TOKENS)
        model(input_ids=torch.zeros((1, 2), dtype=torch.long, device=self.device), **cache_kwargs(model, cache),
              use_cache=True, logits_to_keep=1)
        for _ in range(steps):
            self(0, cache)

    def __call__(self, token: int, cache: Cache) -> torch.Tensor:
        """Logits [vocab] after feeding `token` at the cache's next position (a copy: a graph's outputs are reused)."""
        return self.thread.run(self._step, token, cache)

    def _step(self, token: int, cache: Cache) -> torch.Tensor:
        input_ids = torch.tensor([[token]], dtype=torch.long, device=self.device)
        output = self._forward(input_ids=input_ids, **{self.cache_keyword: cache}, use_cache=True, logits_to_keep=1)
        return output.logits[0, -1].clone()
