"""AlignAtt4LLM speech cascade for simulstream: `Agent` = recogniser with word times + AlignAtt over a decoder-only
LLM, one step per audio chunk, and its LocalAgreement and wait-k peers on the same models. Import them as
`agents.alignatt4llm.Agent` (YAML `type:`) or `agents.alignatt4llm:Agent` (`:LocalAgreementAgent`, `:WaitkAgent`)."""
from __future__ import annotations

from agents.harness.simulstream import StreamingSpeechProcessor
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig, LocalAgreementCascadeConfig, WaitkCascadeConfig
from agents.systems.llm import (AlignAttTranslator, LLMTranslator, LocalAgreementTranslator, WaitkTranslator,
                                resolve_heads)
from backends.asr import load_recognizer
from backends.choice import load_lm


class Agent(StreamingSpeechProcessor):
    """The chunk-synchronous cascade of the paper (§3): ASR first, then one AlignAtt MT step, append-only."""

    __module__ = "agents.alignatt4llm"  # its public home: harnesses match classes by this name

    config_class = CascadeConfig
    default_preset = "alignatt4llm_cpu"  # eval_configs/alignatt4llm_cpu.yaml: what runs when no --config is given

    @classmethod
    def check_config(cls, config: CascadeConfig) -> None:
        super().check_config(config)
        cls.capture_heads(config)  # a missing head set for the direction fails here, in milliseconds

    @classmethod
    def capture_heads(cls, config: CascadeConfig):
        """The attention heads the LLM must capture for this agent's policy (None: no capture)."""
        return resolve_heads(config).heads

    @classmethod
    def segment_translator(cls, config: CascadeConfig, lm) -> LLMTranslator:
        """The MT policy the cascade runs on each source segment."""
        return AlignAttTranslator(lm, config, resolve_heads(config))

    @classmethod
    def shared_key(cls, config: CascadeConfig) -> tuple:
        return (*sorted(config.recognizer_options().items()),
                config.model, config.backend, *sorted(config.lm_options().items()))

    @classmethod
    def load_shared(cls, config: CascadeConfig):
        recognizer = load_recognizer(**config.recognizer_options())
        lm = load_lm(config.backend, config.model, capture_heads=cls.capture_heads(config), **config.lm_options())
        return recognizer, lm

    @classmethod
    def build_translator(cls, config: CascadeConfig, shared) -> CascadeTranslator:
        recognizer, lm = shared
        check_language = getattr(recognizer, "check_language", None)
        if check_language is not None:
            check_language(config.source_lang)
        return CascadeTranslator(recognizer, cls.segment_translator(config, lm), config)


class PeerAgent(Agent):
    """A peer policy on the same cascade (recogniser, transcript commit, LLM and prompt): no attention capture; each
    segment is translated by `translator_class(lm, config)`."""

    translator_class: type[LLMTranslator]

    @classmethod
    def capture_heads(cls, config):
        return None

    @classmethod
    def segment_translator(cls, config, lm) -> LLMTranslator:
        return cls.translator_class(lm, config)


class LocalAgreementAgent(PeerAgent):
    """The peer on the same recogniser and LLM: whisper_streaming's LocalAgreement-2 commit on the recogniser's
    words (`source_frontier: agreement`) feeding LocalAgreement over greedy re-translation (the IWSLT 2026
    baseline's MT rule), chunk-synchronous, append-only."""

    __module__ = "agents.alignatt4llm"

    config_class = LocalAgreementCascadeConfig
    default_preset = "local_agreement_cpu"  # eval_configs/local_agreement_cpu.yaml: what runs when no --config is given
    translator_class = LocalAgreementTranslator


class WaitkAgent(PeerAgent):
    """The wait-k peer on the same recogniser, transcript commit and LLM: after k accessible source words, one
    target word per accessible word (the naive schedule every simultaneous system is compared with)."""

    __module__ = "agents.alignatt4llm"

    config_class = WaitkCascadeConfig
    default_preset = "waitk_cpu"  # eval_configs/waitk_cpu.yaml: what runs when no --config is given
    translator_class = WaitkTranslator
