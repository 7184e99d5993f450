"""Fake translators for exercising the SimulEval adapter protocol without a model (names say they are fakes)."""
from dataclasses import dataclass

from agents.core import Emission, SpeechStreamingTranslator, StreamingTranslator
from agents.harness.config import knob
from agents.harness.simuleval import StreamingSpeechAgent, StreamingTextAgent


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
