"""SimulMask wait-k for SimulEval text-to-text: the gold source arrives one word per read, one target word is
written per step of the schedule over the spliced KV cache. Import it as `agents.simulmask.TextAgent`."""
from __future__ import annotations

from agents.harness.simuleval import StreamingTextAgent
from agents.systems.simulmask import SimulMaskTranslator
from agents.systems.simulmask_config import SimulMaskConfig


class TextAgent(StreamingTextAgent):
    """Word-level wait-k over a SimulMask ALiBi LLM, with prompt and prediction KV caches and no recomputation."""

    __module__ = "agents.simulmask"  # its public home: harnesses match classes by this name

    config_class = SimulMaskConfig

    @classmethod
    def build_translator(cls, config: SimulMaskConfig) -> SimulMaskTranslator:
        return SimulMaskTranslator.from_config(config)
