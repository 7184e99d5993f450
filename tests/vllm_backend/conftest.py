"""Fixtures of the vLLM tests. They run in the vLLM environment (`make vllm-env`); elsewhere every vLLM test module
skips itself (pytest.importorskip), and nothing here imports vLLM."""
from __future__ import annotations

import pytest

from backends.tiny import build_tiny_vllm_checkpoint


@pytest.fixture(scope="session")
def tiny_vllm_checkpoint(tmp_path_factory):
    """Factory: tiny_vllm_checkpoint("qwen3") -> a saved HF directory vLLM can serve, built once per session."""
    built = {}

    def checkpoint(arch: str):
        if arch not in built:
            built[arch] = build_tiny_vllm_checkpoint(arch, tmp_path_factory.mktemp(f"tiny-vllm-{arch}"))
        return built[arch]

    return checkpoint
