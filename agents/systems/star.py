"""STAR/CIF as a streaming speech translator: audio in, words out (append-only), each word written as soon as the
anchors its pieces needed exist (wait-k over anchors). The knobs and the translator; agents adapt it to harnesses."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from agents.core import SpeechStreamingTranslator
from common.audio import as_float32_pcm
from common.config import ConfigError, knob, with_default
from common.knobs import CheckpointKnob, LanguagePairKnobs
from common.stream import Emission
from common.weights import WeightLoad


@dataclass(frozen=True)
class StarConfig(LanguagePairKnobs, CheckpointKnob):
    wait_k: int = knob(-1, "anchors read ahead of each target piece (0: decode after the whole stream; -1: the "
                           "checkpoint's training value)")
    max_tokens: int = knob(128, "at most this many target pieces per stream (stops a decoder that never ends)")
    threshold: float = knob(1.0, "beta: accumulated segmenter score that yields an anchor")
    target_lang: str = with_default(LanguagePairKnobs, "target_lang", "en")  # the checkpoint's; en with en: ASR
    device: str = knob("cpu", "torch device")

    def validate(self) -> None:
        if not self.checkpoint:
            raise ConfigError("checkpoint is required: a directory written by `python -m backends.star.train`")
        if self.wait_k < -1 or self.max_tokens < 1 or self.threshold <= 0:
            raise ConfigError("need wait_k >= -1, max_tokens >= 1 and threshold > 0")
        from backends.star.checkpoint import read_star_metadata

        try:
            metadata = read_star_metadata(self.checkpoint)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        trained = metadata["training"].get("config", {})
        pair = (trained.get("source_lang", "en"), trained.get("target_lang", "en"))
        if (self.source_lang, self.target_lang) != pair:
            raise ConfigError(f"checkpoint {self.checkpoint} was trained for {pair[0]}->{pair[1]}, not "
                              f"{self.source_lang}->{self.target_lang}")


class StarTranslator(SpeechStreamingTranslator):
    """One stream at a time over shared read-only weights; `word_delays_ms` keeps when each word could be written."""

    def __init__(self, model, vocabulary, config: StarConfig):
        from backends.star.streaming import StreamingRecognizer
        from backends.star.words import WordAssembler

        super().__init__("word")
        wait_k = model.config.wait_k if config.wait_k < 0 else config.wait_k
        self.recognizer = StreamingRecognizer(model, vocabulary.eos_id, vocabulary.bos_id, wait_k,
                                              config.max_tokens, config.threshold)
        self.words = WordAssembler(vocabulary)
        self.word_delays_ms: list[float] = []

    @classmethod
    def from_config(cls, config: StarConfig) -> "StarTranslator":
        return cls(*star_weights_load(config).load()[:2], config)

    def reset(self) -> None:
        super().reset()
        self.recognizer.reset()
        self.words.reset()
        self.word_delays_ms = []

    def feed_audio(self, samples) -> Emission:
        return self._words(self.recognizer.feed_audio(as_float32_pcm(np.asarray(samples))))

    def flush(self, words=()) -> Emission:
        emission = self._words(self.recognizer.finish())
        # the pieces left (decoding stopped by max_tokens, not by </s>) are complete now
        return emission.then(self._complete(self.words.finish(self.recognizer.samples_fed / 16)))

    def _words(self, tokens) -> Emission:
        return self._complete([word for token in tokens for word in self.words.push(token)])

    def _complete(self, words: list[tuple[str, float]]) -> Emission:
        self.word_delays_ms += [delay for _, delay in words]
        return self._emit(Emission(new_units=tuple(word for word, _ in words)))


def star_weights_load(config: StarConfig) -> WeightLoad:
    """The load of (model, vocabulary, model config) for StarTranslator; the weights may be shared by many
    translators."""
    from backends.star.checkpoint import load_star

    return WeightLoad.of(load_star, config.checkpoint, config.device)
