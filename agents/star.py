"""STAR streaming speech-to-text agents for every harness, each harness imported only when its agent is asked for:

    simuleval --agent-class agents.star.SpeechAgent --checkpoint runs/star/star --source ... --target ...
    simulstream --agent agents.star:Agent --checkpoint runs/star/star ...   (YAML `type: agents.star.Agent`)
    simuleval --agent agents/star.py ...   (SimulEval's file form: SpeechAgent)

Path (tests/test_call_paths.py): agents/harness/simulstream.py → agents/systems/star.py → backends/star/streaming.py
(which fires through policies/integrate_fire.py).
"""
from __future__ import annotations

from agents.lazy import lazy_agents


def simulstream_agents() -> dict[str, type]:
    """Every chunk goes to the streaming recogniser and each word is sent once the anchors its pieces needed exist.
    One stream is one utterance (the decoder stops at its end-of-sentence token)."""
    from agents.harness.simulstream import StreamingSpeechProcessor
    from agents.systems.star import StarConfig, StarTranslator, star_weights_load

    class Agent(StreamingSpeechProcessor):
        """Weights are loaded once per (checkpoint, device) and shared read-only; stream state is per processor."""

        config_class = StarConfig

        @classmethod
        def weight_loads(cls, config: StarConfig):
            return (star_weights_load(config),)

        @classmethod
        def build_translator(cls, config: StarConfig, shared) -> StarTranslator:
            (model, vocabulary, _), = shared
            return StarTranslator(model, vocabulary, config)

    return {"Agent": Agent}


def simuleval_agents() -> dict[str, type]:
    """SimulEval speech-to-text: audio segments are fed as they arrive and each word is written in the call in which
    the anchor it needed was yielded, so SimulEval's delays are the anchor times (rounded up to the end of the
    segment: use --source-segment-size 40, one encoder frame)."""
    from agents.harness.simuleval import StreamingSpeechAgent
    from agents.systems.star import StarConfig, StarTranslator

    class SpeechAgent(StreamingSpeechAgent):
        """Streaming STAR/CIF recognition (or translation), append-only, words as SimulEval's units."""

        config_class, translator_class = StarConfig, StarTranslator

    return {"SpeechAgent": SpeechAgent}


__getattr__, __dir__ = lazy_agents(__name__, {"Agent": simulstream_agents, "SpeechAgent": simuleval_agents},
                                   simuleval_agent="SpeechAgent")
