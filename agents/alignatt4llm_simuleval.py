"""AlignAtt4LLM for SimulEval text-to-text: `TextAgent` (gold source word by word, every read word accessible) and
its peers on the same LLM backend and prompt, `WaitkTextAgent` (wait-k) and `LocalAgreementTextAgent`
(LocalAgreement over re-translation). Import them as `agents.alignatt4llm.TextAgent` etc."""
from __future__ import annotations

from agents.harness.simuleval import StreamingTextAgent
from agents.systems.config import AlignAttConfig, LocalAgreementConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator, LocalAgreementTranslator, WaitkTranslator


class TextAgent(StreamingTextAgent):
    """AlignAtt policy over a decoder-only LLM (paper §4) for SimulEval text-to-text."""

    __module__ = "agents.alignatt4llm"  # its public home: harnesses match classes by this name

    config_class = AlignAttConfig

    @classmethod
    def build_translator(cls, config: AlignAttConfig) -> AlignAttTranslator:
        return AlignAttTranslator.from_config(config)


class WaitkTextAgent(StreamingTextAgent):
    """Wait-k on the same LLM backend and prompt, for comparison."""

    __module__ = "agents.alignatt4llm"  # its public home: harnesses match classes by this name

    config_class = WaitkConfig

    @classmethod
    def build_translator(cls, config: WaitkConfig) -> WaitkTranslator:
        return WaitkTranslator.from_config(config)


class LocalAgreementTextAgent(StreamingTextAgent):
    """LocalAgreement-n over greedy re-translation (the IWSLT 2026 baseline's MT rule) on the same LLM backend and
    prompt, for comparison."""

    __module__ = "agents.alignatt4llm"

    config_class = LocalAgreementConfig

    @classmethod
    def build_translator(cls, config: LocalAgreementConfig) -> LocalAgreementTranslator:
        return LocalAgreementTranslator.from_config(config)
