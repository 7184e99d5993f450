"""A clear error before a PyTorch runtime loads where torch is not installed: the CPU container image serves the
llama.cpp presets (Whisper on CTranslate2, the LLM on llama.cpp) without torch."""
from __future__ import annotations

import importlib.util


def require_torch(what: str) -> None:
    """ImportError naming `what` and the fix, unless torch can be imported."""
    if importlib.util.find_spec("torch") is None:
        raise ImportError(f"{what} runs on PyTorch, which is not installed here (the CPU container image serves the "
                          "llama.cpp presets without it): install torch, or run a preset with backend: llama_cpp "
                          "and asr: whisper (eval_configs/alignatt4llm_cpu.yaml)")
