"""SimulEval 1.1.4 adapters: drive a `StreamingTranslator` through SimulEval's text-to-text agent protocol.

One policy call per source segment; when the source is finished everything is flushed in that same call and the
write is marked finished, so SimulEval resets the states (and we reset the translator) before the next instance.
"""
from __future__ import annotations

import argparse
from typing import Type

try:
    from simuleval.agents import TextToTextAgent
    from simuleval.agents.actions import ReadAction, WriteAction
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "SimulEval is not installed: `pip install 'simulagents[simuleval]'` then `pip install --no-deps simuleval==1.1.4` "
        "(its pins on tqdm and bitarray conflict with transformers; `make install` does this)"
    ) from error

from agents.core import SourceWord, StreamingTranslator, join_units
from agents.harness.config import add_config_args, config_from_namespace


class StreamingTextAgent(TextToTextAgent):
    """Base SimulEval text agent; subclasses set `config_class` and implement `build_translator(config)`."""

    config_class: Type = None

    def __init__(self, args: argparse.Namespace | None = None, translator: StreamingTranslator | None = None):
        self.translator = None
        super().__init__(args)  # calls reset()
        self.config = config_from_namespace(self.config_class, args if args is not None else argparse.Namespace())
        self.translator = translator if translator is not None else self.build_translator(self.config)
        self.reset()

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        add_config_args(parser, cls.config_class)

    @classmethod
    def build_translator(cls, config) -> StreamingTranslator:
        raise NotImplementedError

    def reset(self) -> None:
        super().reset()
        self.words_fed = 0
        if self.translator is not None:
            self.translator.reset()

    def policy(self, states=None):
        states = states or self.states
        new_words = [SourceWord(word) for word in states.source[self.words_fed:]]
        self.words_fed = len(states.source)
        if states.source_finished:
            final = self.translator.flush(new_words)
            return WriteAction(join_units(final.new_units, self.translator.target_unit), finished=True)
        emission = self.translator.feed(new_words)
        if emission.new_units:
            return WriteAction(join_units(emission.new_units, self.translator.target_unit), finished=False)
        return ReadAction()
