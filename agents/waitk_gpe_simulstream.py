"""GPE wait-k speech cascade for simulstream: `Agent` = the project's recogniser with word times and transcript
commit (agents.systems.cascade) feeding the GPE streaming decoder. Import it as `agents.waitk_gpe:Agent`."""
from __future__ import annotations

from agents.harness.simulstream import StreamingSpeechProcessor
from agents.systems.cascade import CascadeTranslator
from agents.systems.gpe import GPETranslator
from agents.systems.gpe_config import GPECascadeConfig
from backends.asr import load_recognizer


class Agent(StreamingSpeechProcessor):
    """ASR words (accessible once ended `hold_back` seconds ago) are read into the GPE cache; committed sentences
    are finished segments."""

    __module__ = "agents.waitk_gpe"  # its public home: harnesses match classes by this name

    config_class = GPECascadeConfig
    default_preset = "waitk_gpe_cpu"  # eval_configs/waitk_gpe_cpu.yaml: what runs when no --config is given

    @classmethod
    def shared_key(cls, config) -> tuple:
        return (*sorted(config.recognizer_options().items()),
                config.model, config.adapter, config.model_dtype, config.model_device)

    @classmethod
    def load_shared(cls, config):
        from backends.streaming_masks.loading import load_streaming_lm

        recognizer = load_recognizer(**config.recognizer_options())
        lm = load_streaming_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                               device=config.model_device, adapter=config.adapter)
        return recognizer, lm

    @classmethod
    def build_translator(cls, config, shared) -> CascadeTranslator:
        recognizer, lm = shared
        check_language = getattr(recognizer, "check_language", None)
        if check_language is not None:
            check_language(config.source_lang)
        return CascadeTranslator(recognizer, GPETranslator(lm, config), config)
