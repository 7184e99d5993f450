"""Which runtime serves a translator's LLM: `backend: hf` (transformers, in this process), `backend: vllm` (a vLLM
engine with run-time q/k capture) or `backend: llama_cpp` (llama-cpp-python, q/k through its eval callback). All give
the same `session(heads).draft(...)` interface to the agents."""
from __future__ import annotations

from typing import Sequence

from common.weights import WeightLoad


def _load_hf(model: str, dtype: str, device: str, compiled: bool):
    from backends.torch_runtime import require_torch

    require_torch("backend: hf (transformers)")
    from backends.hf.lm import CausalLM

    return CausalLM.load(model, dtype=dtype, device=device, compiled=compiled)


def _load_vllm(model: str, dtype: str, device: str, capture_heads: Sequence[tuple[int, int]] | None):
    """vLLM installs q/k capture when it builds the engine: the heads are part of what is loaded."""
    try:
        from backends.vllm.lm import VLLMCausalLM
    except ImportError as error:
        raise ImportError(f"backend: vllm needs vLLM ({error}); create its environment with `make vllm-env` and "
                          f"run from .venv-vllm (docs/vllm.md)") from error
    return VLLMCausalLM.load(model, dtype=dtype, device=device, capture_heads=capture_heads)


def _load_llama_cpp(model: str, gguf_weights: str, n_threads: int, n_ctx: int):
    from backends.llama_cpp.lm import LlamaCppCausalLM

    return LlamaCppCausalLM.load(model, n_ctx=n_ctx, n_threads=n_threads, weight_type=gguf_weights)


# Each runtime's loader; it takes exactly the options that change what it loads.
RUNTIMES = {"hf": _load_hf, "vllm": _load_vllm, "llama_cpp": _load_llama_cpp}
BACKENDS = tuple(RUNTIMES)
# Other names users write for a runtime; the package itself uses only the names of RUNTIMES.
RUNTIME_ALIASES = {"transformers": "hf"}


def runtime_name(name: str) -> str:
    """The runtime's one name (`transformers` is `hf`); a ValueError naming the choices for an unknown one."""
    name = RUNTIME_ALIASES.get(name, name)
    if name not in RUNTIMES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return name


def lm_weights(backend: str, model: str, *, dtype: str = "float32", device: str = "cpu",
            capture_heads: Sequence[tuple[int, int]] | None = None, gguf_weights: str = "", n_threads: int = 0,
            n_ctx: int = 2048, compiled: bool = False) -> WeightLoad:
    """The load of `model` on `backend` with only the options that runtime takes, so that the load's key (what
    streams share) holds exactly them: a transformers model serves every head set, a vLLM engine only the
    `capture_heads` it was built with (the transformers and llama.cpp backends capture whatever heads a session asks
    for). `gguf_weights`, `n_threads` and `n_ctx` are llama.cpp's, `compiled` transformers' (a compiled decode step;
    `agents.systems.config.DraftBackendKnob`)."""
    return WeightLoad.taking(RUNTIMES[runtime_name(backend)], model, dtype=dtype, device=device,
                             capture_heads=tuple(capture_heads) if capture_heads else None,
                             gguf_weights=gguf_weights, n_threads=n_threads, n_ctx=n_ctx, compiled=compiled)
