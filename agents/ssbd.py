"""SSBD re-translation agents, one per harness; each harness is imported only when its agent is asked for:

    simulstream --agent agents.ssbd:Agent --config eval_configs/ssbd_cpu.yaml ...        (ASR -> SSBD, revisions)
    simuleval --agent-class agents.ssbd.TextAgent --config eval_configs/ssbd_text_cpu.yaml ...   (final text)
    simuleval --agent agents/ssbd.py ...   (SimulEval's file form: TextAgent)
"""
from __future__ import annotations

from agents.lazy import lazy_agents

AGENT_MODULES = {
    "Agent": "agents.ssbd_simulstream",
    "TextAgent": "agents.ssbd_simuleval",
}

__getattr__, __dir__ = lazy_agents(__name__, AGENT_MODULES, simuleval_agent="TextAgent")
