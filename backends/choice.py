"""Which runtime serves a translator's LLM: `backend: hf` (transformers, in this process) or `backend: vllm` (a
vLLM engine with run-time q/k capture). Both give the same `session(heads).draft(...)` interface to the agents."""
from __future__ import annotations

from typing import Sequence

BACKENDS = ("hf", "vllm")


def load_lm(backend: str, model: str, *, dtype: str = "float32", device: str = "cpu",
            capture_heads: Sequence[tuple[int, int]] | None = None):
    """Load `model` on `backend`. vLLM installs q/k capture when it builds the engine, so a capturing translator
    passes its `capture_heads` here (the transformers backend captures whatever heads a session asks for)."""
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
    raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
