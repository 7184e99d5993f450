"""SimulMask wait-k agents (ALiBi LLMs fine-tuned with SimulMask); the harness is imported only when its agent is
asked for:

    simuleval --agent-class agents.simulmask.TextAgent --config eval_configs/simulmask_text_gpu.yaml ...
    simuleval --agent agents/simulmask.py ...   (SimulEval's file form: TextAgent)
"""
from __future__ import annotations

from agents.lazy import lazy_agents

AGENT_MODULES = {
    "TextAgent": "agents.simulmask_simuleval",
}

__getattr__, __dir__ = lazy_agents(__name__, AGENT_MODULES, simuleval_agent="TextAgent")
