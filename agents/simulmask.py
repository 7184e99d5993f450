"""SimulMask wait-k agents (ALiBi LLMs fine-tuned with SimulMask); the harness is imported only when its agent is
asked for:

    simuleval --agent-class agents.simulmask.TextAgent --config eval_configs/simulmask_text_gpu.yaml ...
"""
from __future__ import annotations

import importlib

AGENT_MODULES = {
    "TextAgent": "agents.simulmask_simuleval",
}


def __getattr__(name: str):
    if name not in AGENT_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; agents: {', '.join(AGENT_MODULES)}")
    return getattr(importlib.import_module(AGENT_MODULES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *AGENT_MODULES])
