"""Fixtures of the vLLM tests. They run in the vLLM environment (`make vllm-env`); elsewhere every vLLM test module
skips itself (pytest.importorskip), and nothing here imports vLLM."""
from __future__ import annotations

import pytest
from tiny_checkpoints import build_tiny_vllm_checkpoint


@pytest.fixture(scope="session")
def tiny_vllm_checkpoint(tmp_path_factory):
    """Factory: tiny_vllm_checkpoint("qwen3") -> a saved HF directory vLLM can serve, built once per session."""
    built = {}

    def checkpoint(arch: str):
        if arch not in built:
            built[arch] = build_tiny_vllm_checkpoint(arch, tmp_path_factory.mktemp(f"tiny-vllm-{arch}"))
        return built[arch]

    return checkpoint


@pytest.fixture
def tiny_engine(tiny_vllm_checkpoint):
    """Factory: tiny_engine(arch, heads, **engine_args) -> (transformers model, tokenizer, capturing vLLM engine)
    for one test; its engines are closed when the test ends."""
    from backends.models import load_causal_lm
    from backends.vllm.lm import VLLMCausalLM

    engines = []

    def build(arch: str, heads, **engine_args):
        path = str(tiny_vllm_checkpoint(arch))
        model, tokenizer = load_causal_lm(path)
        engines.append(VLLMCausalLM.load(path, max_model_len=512, capture_heads=heads, **engine_args))
        return model, tokenizer, engines[-1]

    yield build
    for engine in engines:
        engine.close()
