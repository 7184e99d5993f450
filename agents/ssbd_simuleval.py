"""SSBD re-translation for SimulEval text-to-text. Import it as `agents.ssbd.TextAgent`.

SimulEval text output is append-only, so the agent reads the source word by word, re-translates every `step_words`
words (the paper's fixed lag w = 3; revisions and their statistics stay inside the translator) and writes the final
re-translation once the source is complete. SimulEval therefore scores the quality of re-translation's final text;
its latency is that of an offline system by construction (re-translation's latency and flicker are measured by NE
and the speed measures of `benchmarks/ssbd.py`, and by simulstream for the speech agent, which retracts)."""
from __future__ import annotations

from simuleval.agents.actions import ReadAction, WriteAction

from agents.core import SourceWord
from agents.harness.simuleval import StreamingTextAgent
from agents.systems.ssbd import SSBDTranslator
from agents.systems.ssbd_config import SSBDConfig


class TextAgent(StreamingTextAgent):
    """Self-speculative biased decoding re-translation; the final translation is SimulEval's output."""

    __module__ = "agents.ssbd"  # its public home: harnesses match classes by this name

    config_class = SSBDConfig
    default_preset = "ssbd_text_cpu"  # what runs when no --config is given

    @classmethod
    def build_translator(cls, config: SSBDConfig) -> SSBDTranslator:
        return SSBDTranslator.from_config(config)

    def policy(self, states=None):
        states = states or self.states
        new_words = [SourceWord(word) for word in states.source[self.words_fed:]]
        self.words_fed = len(states.source)
        if not states.source_finished:
            self.translator.feed(new_words)  # re-translates every step_words words; nothing reaches SimulEval yet
            return ReadAction()
        self.translator.flush(new_words)
        return WriteAction(self.translator.target_text, finished=True)
