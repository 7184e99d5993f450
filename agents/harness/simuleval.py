"""SimulEval 1.1.4 adapters: drive a `StreamingTranslator` through SimulEval's text-to-text and speech-to-text
agent protocols.

One policy call per source segment; when the source is finished everything is flushed in that same call and the
write is marked finished, so SimulEval resets the states (and we reset the translator) before the next instance.
"""
from __future__ import annotations

import argparse
from typing import Sequence, Type

try:
    from simuleval.agents import SpeechToTextAgent, TextToTextAgent
    from simuleval.agents.actions import ReadAction, WriteAction
    from simuleval.evaluator.scorers.quality_scorer import QualityScorer, register_quality_scorer
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "SimulEval is not installed: `pip install 'simulagents[simuleval]'` then `pip install --no-deps simuleval==1.1.4` "
        "(its pins on tqdm and bitarray conflict with transformers; `make install` does this)"
    ) from error

import eval_configs
from common.stream import Emission, SourceWord
from agents.core import SpeechStreamingTranslator, StreamingTranslator, join_units
from common.audio import StreamResampler
from common.config import add_config_args, config_from_namespace


@register_quality_scorer("CHRF")
class ChrFScorer(QualityScorer):
    """chrF (sacrebleu defaults) for `--quality-metrics CHRF`: SimulEval 1.1.4 ships only BLEU. SimulEval checks
    metric names before it imports the agent, so the CLI needs `--user-dir agents/simuleval_plugins`."""

    def __call__(self, instances) -> float:
        from sacrebleu.metrics import CHRF

        predictions = [instance.prediction for instance in instances.values()]
        references = [instance.reference.strip() for instance in instances.values()]
        return CHRF().corpus_score(predictions, [references]).score

    @staticmethod
    def add_args(parser) -> None:
        pass

    @classmethod
    def from_args(cls, args) -> "ChrFScorer":
        return cls()


class _TranslatorAgent:
    """Configuration and translator ownership shared by the text and speech agents."""

    config_class: Type = None
    translator_class: Type = None  # built by its `from_config(config)` unless `build_translator` says otherwise
    default_preset: str | None = None  # the shipped eval_configs/ preset used when no --config is given

    def _setup(self, args, translator) -> None:
        default = eval_configs.path(self.default_preset) if self.default_preset else None
        self.config = config_from_namespace(self.config_class, args if args is not None else argparse.Namespace(),
                                            default)
        self.translator = translator if translator is not None else self.build_translator(self.config)
        self.reset()

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        add_config_args(parser, cls.config_class)

    @classmethod
    def build_translator(cls, config) -> StreamingTranslator:
        return cls.translator_class.from_config(config)

    def _write(self, emission: Emission, finished: bool):
        # SimulEval appends whole words: a unit that goes on inside the last one (`Emission.joins_last_unit`) is
        # written as a word of its own, as it was before joins existed.
        if emission.new_units or finished:
            return WriteAction(join_units(emission.new_units, self.translator.target_unit), finished=finished)
        return ReadAction()


class StreamingTextAgent(_TranslatorAgent, TextToTextAgent):
    """Base SimulEval text agent; subclasses set `config_class` and `translator_class` (or `build_translator`)."""

    def __init__(self, args: argparse.Namespace | None = None, translator: StreamingTranslator | None = None):
        self.translator = None
        TextToTextAgent.__init__(self, args)  # calls reset()
        self._setup(args, translator)

    def reset(self) -> None:
        TextToTextAgent.reset(self)
        self.words_fed = 0
        if self.translator is not None:
            self.translator.reset()

    def policy(self, states=None):
        states = states or self.states
        new_words = [SourceWord(word) for word in states.source[self.words_fed:]]
        self.words_fed = len(states.source)
        if states.source_finished:
            return self._write(self.translator.flush(new_words), finished=True)
        return self._write(self.translator.feed(new_words), finished=False)


class StreamingSpeechAgent(_TranslatorAgent, SpeechToTextAgent):
    """Base SimulEval speech agent: audio arrives at the file's native rate as lists; it is resampled to 16 kHz as
    one stream and fed to a `SpeechStreamingTranslator`. SimulEval makes exactly one call after the last segment,
    so everything is flushed there."""

    def __init__(self, args: argparse.Namespace | None = None, translator: SpeechStreamingTranslator | None = None):
        self.translator = None
        self.resampler = StreamResampler()
        SpeechToTextAgent.__init__(self, args)
        self._setup(args, translator)

    def reset(self) -> None:
        SpeechToTextAgent.reset(self)
        self.samples_fed = 0
        self.resampler.reset()
        if self.translator is not None:
            self.translator.reset()

    def policy(self, states=None):
        states = states or self.states
        new_samples = states.source[self.samples_fed:]
        self.samples_fed = len(states.source)
        audio = self.resampler.push(new_samples, states.source_sample_rate, last=states.source_finished)
        emission = self.translator.feed_audio(audio) if len(audio) else Emission()
        if states.source_finished:
            final = self.translator.flush()
            return self._write(emission.then(final), finished=True)
        return self._write(emission, finished=False)


def run_simuleval_cli(arguments: Sequence[str]) -> list[dict]:
    """Run SimulEval's own command line in this process, as `simuleval ARGUMENTS`, and return the instances it
    logged to `--output DIR` (one dict per source line)."""
    import json
    import sys
    from pathlib import Path

    from simuleval import cli
    from simuleval.utils.agent import EVALUATION_SYSTEM_LIST

    arguments = list(arguments)
    EVALUATION_SYSTEM_LIST.clear()  # SimulEval's registry of agents (module-global): empty, as in a fresh process
    if "--output" not in arguments:
        raise ValueError("run_simuleval_cli needs --output DIR to read the instances back")
    previous, sys.argv = sys.argv, ["simuleval", *arguments]
    try:
        cli.main()
    finally:
        sys.argv = previous
    log = Path(arguments[arguments.index("--output") + 1]) / "instances.log"
    return [json.loads(line) for line in log.read_text().splitlines()]
