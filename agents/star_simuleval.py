"""STAR for SimulEval speech-to-text: audio segments are fed as they arrive and each word is written in the call in
which the anchor it needed was yielded, so SimulEval's delays are the anchor times (rounded up to the end of the
segment: use --source-segment-size 40, one encoder frame). Import it as `agents.star.SpeechAgent`."""
from __future__ import annotations

from agents.harness.simuleval import StreamingSpeechAgent
from agents.systems.star import StarConfig, StarTranslator


class SpeechAgent(StreamingSpeechAgent):
    """Streaming STAR/CIF recognition (or translation), append-only, words as SimulEval's units."""

    __module__ = "agents.star"  # its public home: harnesses match classes by this name

    config_class = StarConfig

    @classmethod
    def build_translator(cls, config: StarConfig) -> StarTranslator:
        return StarTranslator.from_config(config)
