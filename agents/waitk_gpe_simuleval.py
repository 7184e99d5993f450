"""GPE wait-k for SimulEval text-to-text: the gold source arrives one word per read, one target word is written per
step of the schedule. Import it as `agents.waitk_gpe.TextAgent`."""
from __future__ import annotations

from agents.harness.simuleval import StreamingTextAgent
from agents.systems.gpe import GPETranslator
from agents.systems.gpe_config import GPEConfig


class TextAgent(StreamingTextAgent):
    """Word-level wait-k over a group-position-encoding LLM, decoding without re-encoding."""

    __module__ = "agents.waitk_gpe"  # its public home: harnesses match classes by this name

    config_class = GPEConfig
    default_preset = "waitk_gpe_text_cpu"  # what runs when no --config is given

    @classmethod
    def build_translator(cls, config: GPEConfig) -> GPETranslator:
        return GPETranslator.from_config(config)
