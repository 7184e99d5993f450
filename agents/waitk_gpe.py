"""Group-position-encoding wait-k agents, one per harness; each harness is imported only when its agent is asked for:

    simuleval --agent-class agents.waitk_gpe.TextAgent --config eval_configs/waitk_gpe_text_cpu.yaml ...
    simulstream --agent agents.waitk_gpe:Agent --config eval_configs/waitk_gpe_cpu.yaml ...   (speech cascade)
    simuleval --agent agents/waitk_gpe.py ...   (SimulEval's file form: TextAgent)
"""
from __future__ import annotations

from agents.lazy import lazy_agents

AGENT_MODULES = {
    "Agent": "agents.waitk_gpe_simulstream",
    "TextAgent": "agents.waitk_gpe_simuleval",
}

__getattr__, __dir__ = lazy_agents(__name__, AGENT_MODULES, simuleval_agent="TextAgent")
