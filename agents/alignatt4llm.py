"""AlignAtt4LLM agents, one per harness; each harness is imported only when its agent is asked for:

    simulstream --agent agents.alignatt4llm:Agent --config eval_configs/alignatt4llm_cpu.yaml ...   (speech cascade)
    simuleval --agent-class agents.alignatt4llm.TextAgent --config eval_configs/alignatt4llm_text_cpu.yaml ...
    simuleval --agent agents/alignatt4llm.py ...   (SimulEval's file form: TextAgent; add --agent-class
        agents.alignatt4llm.WaitkTextAgent for the baseline)

with their peers on the same models: `WaitkTextAgent` (wait-k), `LocalAgreementTextAgent` and the speech
`LocalAgreementAgent` (LocalAgreement-2 ASR + LocalAgreement MT, the IWSLT 2026 baseline's rules) and `WaitkAgent`
(wait-k on the same cascade).
"""
from __future__ import annotations

from agents.lazy import lazy_agents

AGENT_MODULES = {
    "Agent": "agents.alignatt4llm_simulstream",
    "TextAgent": "agents.alignatt4llm_simuleval",
    "WaitkTextAgent": "agents.alignatt4llm_simuleval",
    "LocalAgreementAgent": "agents.alignatt4llm_simulstream",
    "LocalAgreementTextAgent": "agents.alignatt4llm_simuleval",
    "WaitkAgent": "agents.alignatt4llm_simulstream",
}

__getattr__, __dir__ = lazy_agents(__name__, AGENT_MODULES, simuleval_agent="TextAgent")
