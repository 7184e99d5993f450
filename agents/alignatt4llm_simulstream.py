"""AlignAtt4LLM speech cascade for simulstream: `Agent` = recogniser with word times + AlignAtt over a decoder-only
LLM, one step per audio chunk. Import it as `agents.alignatt4llm.Agent` (YAML `type:`) or `agents.alignatt4llm:Agent`."""
from __future__ import annotations

from agents.harness.simulstream import StreamingSpeechProcessor
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig
from agents.systems.llm import AlignAttTranslator, resolve_heads
from backends.asr import load_recognizer
from backends.choice import load_lm


class Agent(StreamingSpeechProcessor):
    """The chunk-synchronous cascade of the paper (§3): ASR first, then one AlignAtt MT step, append-only."""

    __module__ = "agents.alignatt4llm"  # its public home: harnesses match classes by this name

    config_class = CascadeConfig

    @classmethod
    def check_config(cls, config: CascadeConfig) -> None:
        super().check_config(config)
        resolve_heads(config)  # a missing head set for the direction fails here, in milliseconds

    @classmethod
    def shared_key(cls, config: CascadeConfig) -> tuple:
        return (config.asr, config.asr_model, config.aligner_model, config.asr_device, config.asr_dtype,
                config.model, config.backend, *sorted(config.lm_options().items()))

    @classmethod
    def load_shared(cls, config: CascadeConfig):
        recognizer = load_recognizer(config.asr, config.asr_model, config.aligner_model, config.asr_device,
                                     config.asr_dtype)
        lm = load_lm(config.backend, config.model, capture_heads=resolve_heads(config).heads, **config.lm_options())
        return recognizer, lm

    @classmethod
    def build_translator(cls, config: CascadeConfig, shared) -> CascadeTranslator:
        recognizer, lm = shared
        check_language = getattr(recognizer, "check_language", None)
        if check_language is not None:
            check_language(config.source_lang)
        return CascadeTranslator(recognizer, AlignAttTranslator(lm, config, resolve_heads(config)), config)
