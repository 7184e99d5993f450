"""STAR streaming speech-to-text agents, one per harness; each harness is imported only when its agent is asked for:

    simuleval --agent-class agents.star.SpeechAgent --checkpoint runs/star/star --source ... --target ...
    simulstream --agent agents.star:Agent --checkpoint runs/star/star ...   (YAML `type: agents.star.Agent`)
    simuleval --agent agents/star.py ...   (SimulEval's file form: SpeechAgent)
"""
from __future__ import annotations

from agents.lazy import lazy_agents

AGENT_MODULES = {
    "Agent": "agents.star_simulstream",
    "SpeechAgent": "agents.star_simuleval",
}

__getattr__, __dir__ = lazy_agents(__name__, AGENT_MODULES, simuleval_agent="SpeechAgent")
