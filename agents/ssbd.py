"""SSBD re-translation agents, one per harness; each harness is imported only when its agent is asked for:

    simulstream --agent agents.ssbd:Agent --config eval_configs/ssbd_cpu.yaml ...        (ASR -> SSBD, revisions)
    simuleval --agent-class agents.ssbd.TextAgent --config eval_configs/ssbd_text_cpu.yaml ...   (final text)
"""
from __future__ import annotations

import importlib

AGENT_MODULES = {
    "Agent": "agents.ssbd_simulstream",
    "TextAgent": "agents.ssbd_simuleval",
}


def __getattr__(name: str):
    if name not in AGENT_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; agents: {', '.join(AGENT_MODULES)}")
    return getattr(importlib.import_module(AGENT_MODULES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *AGENT_MODULES])
