"""Which runtime serves a translator's LLM: `backend: hf` (transformers, in this process), `backend: vllm` (a vLLM
engine with run-time q/k capture) or `backend: llama_cpp` (llama-cpp-python, q/k through its eval callback). All give
the same `session(heads).draft(...)` interface to the agents."""
from __future__ import annotations

from typing import Sequence

BACKENDS = ("hf", "vllm", "llama_cpp")


def load_lm(backend: str, model: str, *, dtype: str = "float32", device: str = "cpu",
            capture_heads: Sequence[tuple[int, int]] | None = None, gguf_weights: str = "", n_threads: int = 0,
            n_ctx: int = 2048):
    """Load `model` on `backend`. vLLM installs q/k capture when it builds the engine, so a capturing translator
    passes its `capture_heads` here (the transformers and llama.cpp backends capture whatever heads a session asks
    for). `gguf_weights`, `n_threads` and `n_ctx` are llama.cpp's (`agents.systems.config.DraftBackendKnob`)."""
    if backend == "hf":
        from backends.hf.lm import CausalLM

        return CausalLM.load(model, dtype=dtype, device=device)
    if backend == "vllm":
        try:
            from backends.vllm.lm import VLLMCausalLM
        except ImportError as error:
            raise ImportError(f"backend: vllm needs vLLM ({error}); create its environment with `make vllm-env` and "
                              f"run from .venv-vllm (docs/vllm.md)") from error
        return VLLMCausalLM.load(model, dtype=dtype, device=device, capture_heads=capture_heads)
    if backend == "llama_cpp":
        from backends.llama_cpp.lm import LlamaCppCausalLM

        return LlamaCppCausalLM.load(model, n_ctx=n_ctx, n_threads=n_threads, weight_type=gguf_weights)
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
