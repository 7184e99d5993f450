"""AlignAtt4LLM agents, one per harness; each harness is imported only when its agent is asked for:

    simulstream --agent agents.alignatt4llm:Agent --config eval_configs/alignatt4llm_cpu.yaml ...   (speech cascade)
    simuleval --agent-class agents.alignatt4llm.TextAgent --config eval_configs/alignatt4llm_text_cpu.yaml ...
"""
from __future__ import annotations

import importlib

AGENT_MODULES = {
    "Agent": "agents.alignatt4llm_simulstream",
    "TextAgent": "agents.alignatt4llm_simuleval",
    "WaitkTextAgent": "agents.alignatt4llm_simuleval",
}


def __getattr__(name: str):
    if name not in AGENT_MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}; agents: {', '.join(AGENT_MODULES)}")
    return getattr(importlib.import_module(AGENT_MODULES[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *AGENT_MODULES])
