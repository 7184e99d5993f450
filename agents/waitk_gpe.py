"""Group-position-encoding wait-k agents, one per harness; each harness is imported only when its agent is asked for:

    simuleval --agent-class agents.waitk_gpe.TextAgent --config eval_configs/waitk_gpe_text_cpu.yaml ...
    simulstream --agent agents.waitk_gpe:Agent --config eval_configs/waitk_gpe_cpu.yaml ...   (speech cascade)
"""
from __future__ import annotations

import importlib

AGENT_MODULES = {
    "Agent": "agents.waitk_gpe_simulstream",
    "TextAgent": "agents.waitk_gpe_simuleval",
}


def __getattr__(name: str):
    if name not in AGENT_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; agents: {', '.join(AGENT_MODULES)}")
    return getattr(importlib.import_module(AGENT_MODULES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *AGENT_MODULES])
