"""SSBD speech cascade for simulstream: `Agent` = recogniser with word times + SSBD re-translation of the live
sentence at every chunk; revisions reach simulstream as deleted tokens (always an exact suffix of what was sent)
followed by the new tokens. Import it as `agents.ssbd.Agent` (YAML `type:`) or `agents.ssbd:Agent`."""
from __future__ import annotations

from agents.harness.simulstream import StreamingSpeechProcessor
from agents.systems.cascade import CascadeTranslator
from agents.systems.ssbd import SSBDTranslator, load_ssbd_model
from agents.systems.ssbd_config import SSBDCascadeConfig
from backends.asr import load_recognizer


class Agent(StreamingSpeechProcessor):
    """The speech cascade with SSBD re-translation as its text translator (display-only mask-k on by default)."""

    __module__ = "agents.ssbd"  # its public home: harnesses match classes by this name

    config_class = SSBDCascadeConfig
    default_preset = "ssbd_cpu"  # eval_configs/ssbd_cpu.yaml: what runs when no --config is given

    @classmethod
    def shared_key(cls, config: SSBDCascadeConfig) -> tuple:
        return (*sorted(config.recognizer_options().items()),
                config.backend, config.model, config.model_dtype, config.model_device, config.n_ctx,
                config.n_threads)

    @classmethod
    def load_shared(cls, config: SSBDCascadeConfig):
        recognizer = load_recognizer(**config.recognizer_options())
        return recognizer, load_ssbd_model(config)

    @classmethod
    def build_translator(cls, config: SSBDCascadeConfig, shared) -> CascadeTranslator:
        recognizer, model = shared
        check_language = getattr(recognizer, "check_language", None)
        if check_language is not None:
            check_language(config.source_lang)
        return CascadeTranslator(recognizer, SSBDTranslator(model, config), config)
