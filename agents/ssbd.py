"""SSBD re-translation agents for every harness, each harness imported only when its agent is asked for:

    simulstream --agent agents.ssbd:Agent --config eval_configs/ssbd_cpu.yaml ...        (ASR -> SSBD, revisions)
    simuleval --agent-class agents.ssbd.TextAgent --config eval_configs/ssbd_text_cpu.yaml ...   (final text)
    simuleval --agent agents/ssbd.py ...   (SimulEval's file form: TextAgent)

Path (tests/test_call_paths.py): agents/harness/simulstream.py → agents/systems/cascade.py →
agents/systems/ssbd.py → backends/speculative.py → policies/ssbd.py or backends/llama_cpp/ (backends/hf/).
"""
from __future__ import annotations

from agents.lazy import lazy_agents


def simulstream_agents() -> dict[str, type]:
    """The speech cascade with SSBD re-translation of the live sentence at every chunk; revisions reach simulstream
    as deleted tokens (always an exact suffix of what was sent) followed by the new tokens."""
    from agents.harness.simulstream import CascadeSpeechProcessor
    from agents.systems.ssbd import SSBDTranslator, ssbd_model_load
    from agents.systems.ssbd_config import SSBDCascadeConfig

    class Agent(CascadeSpeechProcessor):
        """The speech cascade with SSBD re-translation as its text translator (display-only mask-k on by
        default)."""

        config_class = SSBDCascadeConfig
        default_preset = "ssbd_cpu"  # eval_configs/ssbd_cpu.yaml: what runs when no --config is given

        @classmethod
        def segment_model_load(cls, config: SSBDCascadeConfig):
            return ssbd_model_load(config)

        @classmethod
        def segment_translator(cls, config: SSBDCascadeConfig, model) -> SSBDTranslator:
            return SSBDTranslator(model, config)

    return {"Agent": Agent}


def simuleval_agents() -> dict[str, type]:
    """SimulEval text output is append-only, so the agent reads the source word by word, re-translates every
    `step_words` words (the paper's fixed lag w = 3; revisions and their statistics stay inside the translator) and
    writes the final re-translation once the source is complete. SimulEval therefore scores the quality of
    re-translation's final text; its latency is that of an offline system by construction (re-translation's latency
    and flicker are measured by NE and `benchmarks/ssbd.py`, and by simulstream for the speech agent)."""
    from simuleval.agents.actions import ReadAction, WriteAction

    from agents.harness.simuleval import StreamingTextAgent
    from agents.systems.ssbd import SSBDTranslator
    from agents.systems.ssbd_config import SSBDConfig
    from common.stream import SourceWord

    class TextAgent(StreamingTextAgent):
        """Self-speculative biased decoding re-translation; the final translation is SimulEval's output."""

        config_class, translator_class = SSBDConfig, SSBDTranslator
        default_preset = "ssbd_text_cpu"  # what runs when no --config is given

        def policy(self, states=None):
            states = states or self.states
            new_words = [SourceWord(word) for word in states.source[self.words_fed:]]
            self.words_fed = len(states.source)
            if not states.source_finished:
                self.translator.feed(new_words)  # re-translates every step_words words; nothing reaches SimulEval
                return ReadAction()
            self.translator.flush(new_words)
            return WriteAction(self.translator.target_text, finished=True)

    return {"TextAgent": TextAgent}


__getattr__, __dir__ = lazy_agents(__name__, {"Agent": simulstream_agents, "TextAgent": simuleval_agents},
                                   simuleval_agent="TextAgent")
