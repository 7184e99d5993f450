"""The transformers decode step compiled once (a CUDA graph on a GPU): one single-token forward shared by every
session, each session decoding into its own static KV cache whose layers all keep absolute positions.

Every layer is a full-length `StaticLayer`, sliding-window ones too: the window is the mask's job (as with the
`DynamicCache` the eager path uses), so a key sits at its own position and a cache cropped back to any length keeps
what it needs, which a ring buffer would have overwritten.
"""
from __future__ import annotations

import threading

import torch
from transformers.cache_utils import Cache, StaticLayer

# Positions of a compiled session's cache: a prompt and its draft up to this many tokens decode compiled; a longer one
# decodes eagerly. Every step attends over all of them (masked), nothing on a GPU, but on a CPU it made the narrow
# Gemma-4's compiled step slower than eager decoding (README, "Compiled draft step").
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
    a compiled step first called from a new thread (simulstream's HTTP server: one per request) compiled again."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


class CompiledStep:
    """`model`'s forward of one token into a static cache, compiled without graph breaks and with fixed shapes, so
    that one graph serves every session and prompt length. Steps are serialised (a CUDA graph is one buffer set)."""

    def __init__(self, model):
        self.device = next(model.parameters()).device
        mode = "reduce-overhead" if self.device.type == "cuda" else None  # CUDA graphs where launches cost
        self._forward = torch.compile(model.forward, fullgraph=True, dynamic=False, mode=mode)
        self._lock = threading.Lock()
        self.cpu_threads = torch.get_num_threads()  # the loading thread's, where the step is compiled

    @torch.inference_mode()
    def warm_up(self, model, steps: int = 3) -> None:
        """Compile now (on a GPU also record the graph, which takes a few calls), so that no stream waits for it."""
        cache = static_cache(model, COMPILED_CACHE_TOKENS)
        model(input_ids=torch.zeros((1, 2), dtype=torch.long, device=self.device), past_key_values=cache,
              use_cache=True, logits_to_keep=1)
        for _ in range(steps):
            self(0, cache)

    def __call__(self, token: int, cache: Cache) -> torch.Tensor:
        """Logits [vocab] after feeding `token` at the cache's next position (a copy: a graph's outputs are reused)."""
        input_ids = torch.tensor([[token]], dtype=torch.long, device=self.device)
        with self._lock:
            pin_cpu_threads(self.cpu_threads)
            output = self._forward(input_ids=input_ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            return output.logits[0, -1].clone()
