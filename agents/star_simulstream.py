"""STAR for simulstream: `Agent` feeds every chunk to the streaming recogniser and sends each word once the anchors
its pieces needed exist. One stream is one utterance (the decoder stops at its end-of-sentence token). Import it as
`agents.star:Agent` (YAML `type: agents.star.Agent`)."""
from __future__ import annotations

from agents.harness.simulstream import StreamingSpeechProcessor
from agents.systems.star import StarConfig, StarTranslator, load_star_weights


class Agent(StreamingSpeechProcessor):
    """Weights are loaded once per (checkpoint, device) and shared read-only; stream state is per processor."""

    __module__ = "agents.star"  # its public home: harnesses match classes by this name

    config_class = StarConfig

    @classmethod
    def shared_key(cls, config: StarConfig) -> tuple:
        return (config.checkpoint, config.device)

    @classmethod
    def load_shared(cls, config: StarConfig):
        model, vocabulary, _ = load_star_weights(config)
        return model, vocabulary

    @classmethod
    def build_translator(cls, config: StarConfig, shared) -> StarTranslator:
        model, vocabulary = shared
        return StarTranslator(model, vocabulary, config)
