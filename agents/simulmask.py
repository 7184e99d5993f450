"""SimulMask wait-k agents (ALiBi LLMs fine-tuned with SimulMask); the harness is imported only when its agent is
asked for:

    simuleval --agent-class agents.simulmask.TextAgent --config eval_configs/simulmask_text_gpu.yaml ...
    simuleval --agent agents/simulmask.py ...   (SimulEval's file form: TextAgent)

Path (tests/test_call_paths.py): agents/harness/simuleval.py → agents/systems/simulmask.py →
agents/systems/word_waitk.py → policies/waitk.py or backends/simulmask/.
"""
from __future__ import annotations

from agents.lazy import lazy_agents


def simuleval_agents() -> dict[str, type]:
    """SimulEval text-to-text: the gold source arrives one word per read, one target word is written per step of
    the schedule over the spliced KV cache."""
    from agents.harness.simuleval import StreamingTextAgent
    from agents.systems.simulmask import SimulMaskTranslator
    from agents.systems.simulmask_config import SimulMaskConfig

    class TextAgent(StreamingTextAgent):
        """Word-level wait-k over a SimulMask ALiBi LLM, with prompt and prediction KV caches and no
        recomputation."""

        config_class, translator_class = SimulMaskConfig, SimulMaskTranslator

    return {"TextAgent": TextAgent}


__getattr__, __dir__ = lazy_agents(__name__, {"TextAgent": simuleval_agents}, simuleval_agent="TextAgent")
