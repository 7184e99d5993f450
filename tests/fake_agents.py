"""Fake translators and agents for exercising the SimulEval and simulstream protocols without a model (names say
they are fakes)."""
import time
from dataclasses import dataclass

import numpy as np

from agents.core import SpeechStreamingTranslator, StreamingTranslator
from agents.harness.simuleval import StreamingSpeechAgent, StreamingTextAgent
from agents.harness.simulstream import StreamingSpeechProcessor
from backends.asr.base import SpeechRecognizer
from common.config import knob
from common.stream import Emission, TimedWord


@dataclass(frozen=True)
class FakeConfig:
    lag: int = knob(1, "words to wait before echoing")
    target_lang: str = knob("de", "target language")


class FakeUppercaseTranslator(StreamingTranslator):
    """Echoes each source word upper-cased, `lag` words behind; records every feed for protocol checks."""

    def __init__(self, config: FakeConfig):
        super().__init__("char" if config.target_lang == "zh" else "word")
        self.config = config
        self.calls: list[tuple[str, tuple[str, ...]]] = []
        self.source: list[str] = []

    def reset(self):
        super().reset()
        self.source = []

    def feed(self, words, now=None):
        self.source.extend(w.text for w in words)
        self.calls.append(("feed", tuple(w.text for w in words)))
        ready = max(0, len(self.source) - self.config.lag)
        return self._emit(Emission(new_units=tuple(w.upper() for w in self.source[len(self.emitted_units):ready])))

    def flush(self, words=()):
        self.source.extend(w.text for w in words)
        self.calls.append(("flush", tuple(w.text for w in words)))
        return self._emit(Emission(new_units=tuple(w.upper() for w in self.source[len(self.emitted_units):])))


class FakeUppercaseTextAgent(StreamingTextAgent):
    config_class = FakeConfig
    instances: list = []  # every agent built, so a test can inspect the translator SimulEval drove

    @classmethod
    def build_translator(cls, config):
        translator = FakeUppercaseTranslator(config)
        cls.instances.append(translator)
        return translator


class FakeSecondCounterTranslator(SpeechStreamingTranslator):
    """Writes "1s", "2s", ... as each full second of 16 kHz audio arrives; records the audio it was fed."""

    def __init__(self):
        super().__init__("word")
        self.samples_seen = 0
        self.chunks: list = []
        self.stream_lengths: list[int] = []  # samples per finished stream, recorded at reset

    def reset(self):
        super().reset()
        if self.samples_seen:
            self.stream_lengths.append(self.samples_seen)
        self.samples_seen = 0

    def feed_audio(self, samples):
        self.chunks.append(samples)
        self.samples_seen += len(samples)
        seconds = self.samples_seen // self.SAMPLE_RATE
        return self._emit(Emission(new_units=tuple(f"{i}s" for i in range(len(self.emitted_units) + 1, seconds + 1))))

    def flush(self, words=()):
        return self._emit(Emission(new_units=("end",)))


class FakeSecondCounterSpeechAgent(StreamingSpeechAgent):
    config_class = FakeConfig
    instances: list = []

    @classmethod
    def build_translator(cls, config):
        translator = FakeSecondCounterTranslator()
        cls.instances.append(translator)
        return translator


@dataclass(frozen=True)
class FakeSlowConfig:
    source_lang: str = knob("en", "source language")
    target_lang: str = knob("de", "target language")
    seconds_per_chunk: float = knob(0.0, "computation time to simulate for every chunk (sleep)")
    silent: bool = knob(False, "never emit anything")
    fail_above: float = knob(0.0, "raise on a chunk whose peak is above this (0: never): a model step that fails on "
                                  "one stream's input")
    tag_language: bool = knob(False, "write each word as LANG:wN (the target language), so a test sees the direction")

    def validate(self):
        pass


class FakeSlowTranslator(SpeechStreamingTranslator):
    """Writes one word ("w1", "w2", ...) per audio chunk after sleeping `seconds_per_chunk`: a stand-in for a system
    of known speed."""

    def __init__(self, config: FakeSlowConfig):
        super().__init__("word")
        self.config = config

    def feed_audio(self, samples):
        time.sleep(self.config.seconds_per_chunk)
        if self.config.fail_above and len(samples) and float(abs(samples).max()) > self.config.fail_above:
            raise RuntimeError(f"fake model step failure on a chunk above {self.config.fail_above}")
        if self.config.silent:
            return Emission()
        word = f"w{len(self.emitted_units) + 1}"
        if self.config.tag_language:
            word = f"{self.config.target_lang}:{word}"
        return self._emit(Emission(new_units=(word,)))

    def flush(self, words=()):
        return Emission()


def fake_speech_processor(config_class, build):
    """A simulstream processor class with no weights whose translator is `build(config)` (a fake)."""

    class FakeSpeechProcessor(StreamingSpeechProcessor):
        @classmethod
        def weight_loads(cls, config):
            return ()

        @classmethod
        def build_translator(cls, config, shared):
            return build(config)

    FakeSpeechProcessor.config_class = config_class
    return FakeSpeechProcessor


class FakeSlowSpeechProcessor(fake_speech_processor(FakeSlowConfig, FakeSlowTranslator)):
    """A simulstream processor over FakeSlowTranslator (no model, so its speed is exactly what it is told)."""


# -- a scripted recogniser for the speech cascade ---------------------------------------------------------------

RATE = 16_000
SCALE = float(2 ** 24)  # the fake audio's samples encode their absolute index exactly in float32

# (word, absolute start, absolute end) in seconds: two sentences with a pause between them.
TIMELINE = [("the", 0.2, 0.5), ("committee", 0.5, 1.0), ("approved", 1.0, 1.6), ("the", 1.6, 1.8),
            ("budget.", 1.8, 2.4), ("schools", 3.0, 3.5), ("and", 3.5, 3.7), ("hospitals", 3.7, 4.3),
            ("waited.", 4.3, 4.9)]


def timeline_audio(seconds: float) -> np.ndarray:
    return (np.arange(int(seconds * RATE), dtype=np.float64) / SCALE).astype(np.float32)


class TimelineRecognizer(SpeechRecognizer):
    """A fake recogniser: reads the absolute position from the samples and returns the scripted words that lie
    wholly inside the audio, relative to its start (a real recogniser's contract, without a model)."""

    def __init__(self, timeline=TIMELINE, period_seconds: float | None = None):
        """With `period_seconds`, the timeline repeats every period (a talk longer than float32 samples can index:
        the samples then encode their position within one period, see the soak test)."""
        self.timeline = timeline
        self.period_seconds = period_seconds
        self.calls = 0
        self.contexts: list[str] = []  # every non-empty `context` it was given
        self.prefixes: list[str] = []  # every `prefix` it was given, empty ones too

    def transcribe(self, audio, language, context="", prefix=""):
        self.calls += 1
        if context:
            self.contexts.append(context)
        self.prefixes.append(prefix)
        if len(audio) == 0:
            return []
        start = round(float(audio[0]) * SCALE) / RATE
        end = start + len(audio) / RATE
        words, offset = [], 0.0
        while offset < end:
            words += [TimedWord(text, s + offset - start, e + offset - start) for text, s, e in self.timeline
                      if s + offset >= start - 1e-9 and e + offset <= end + 1e-9]
            if self.period_seconds is None:
                break
            offset += self.period_seconds
        return words
