"""The speech cascade (AlignAtt4LLM paper §3): each chunk first re-transcribes the live audio tail and commits stable
sentences, then runs one step of a segment translator (AlignAtt, wait-k, LocalAgreement, SSBD, GPE wait-k) on the
sentence being spoken, where only words that ended at least `hold_back` seconds before now are accessible.
"""
from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from agents.core import SegmentTranslator, SpeechStreamingTranslator
from agents.systems.config import SpeechCascadeKnobs
from backends.asr import SpeechRecognizer, load_recognizer
from common.audio import as_float32_pcm
from common.stream import Emission, SourceWord
from policies.transcript import TranscriptStabilizer

MAX_KEPT_SENTENCES = 512  # committed source sentences kept per stream for diagnostics: a long talk keeps the latest


class CascadeTranslator(SpeechStreamingTranslator):
    """ASR with word times -> transcript commit -> a text translator (AlignAtt: append-only; SSBD: retracts within
    the live sentence), chunk-synchronous."""

    def __init__(self, recognizer: SpeechRecognizer, translator: SegmentTranslator, config: SpeechCascadeKnobs,
                 clock: Callable[[], float] = time.monotonic):
        """`clock` (seconds) measures how far behind the audio a live stream is (`max_lag_seconds`)."""
        super().__init__(translator.target_unit)
        self.recognizer = recognizer
        self.clock = clock
        self.translator = translator
        self.config = config
        self.stabilizer = TranscriptStabilizer(config.max_tail_seconds, config.retranscribe_seconds,
                                               config.commit_agreement, config.max_sentence_seconds,
                                               config.pause_commit_seconds)
        self.append_only = translator.append_only  # a re-translating text translator makes the cascade retract
        self.reset()

    @classmethod
    def from_config(cls, config: SpeechCascadeKnobs, translator: SegmentTranslator,
                    recognizer: SpeechRecognizer | None = None) -> "CascadeTranslator":
        return cls.checked(recognizer or load_recognizer(**config.recognizer_options()), translator, config)

    @classmethod
    def checked(cls, recognizer: SpeechRecognizer, translator: SegmentTranslator,
                config: SpeechCascadeKnobs) -> "CascadeTranslator":
        """The cascade, once the recogniser has accepted the source language (a recogniser that cannot transcribe
        it says so here, before any audio)."""
        check_language = getattr(recognizer, "check_language", None)
        if check_language is not None:
            check_language(config.source_lang)
        return cls(recognizer, translator, config)

    def reset(self) -> None:
        super().reset()
        self.translator.reset()
        self.stabilizer.reset()
        self.tail = np.zeros(0, dtype=np.float32)  # audio not yet committed, starting at stabilizer.tail_start
        self.samples_received = 0
        # The latest committed sentences (diagnostics; the translator has already finished them) and how many in all.
        self.committed_sentences: deque[tuple[SourceWord, ...]] = deque(maxlen=MAX_KEPT_SENTENCES)
        self.sentences_committed = 0
        self.live_words: tuple[SourceWord, ...] = ()
        self.wall_origin: float | None = None  # clock() minus the audio received, at the stream's first chunk
        self.chunks_buffered = 0  # chunks only buffered because the stream was behind (`max_lag_seconds`)

    @property
    def now(self) -> float:
        """Seconds of audio received on this stream: the absolute time base of every word time."""
        return self.samples_received / self.SAMPLE_RATE

    @property
    def transcript(self) -> str:
        """The kept committed sentences (the latest MAX_KEPT_SENTENCES) and the live hypothesis, as text."""
        words = [w for sentence in self.committed_sentences for w in sentence] + list(self.live_words)
        return " ".join(w.text for w in words)

    def feed_audio(self, samples) -> Emission:
        samples = as_float32_pcm(samples)
        self.tail = np.concatenate([self.tail, samples])
        self.samples_received += len(samples)
        if self.wall_origin is None:
            self.wall_origin = self.clock() - self.now
        if self.now < self.config.min_start_seconds or len(samples) == 0 or self._catching_up():
            return Emission()
        return self._emit(self._advance(final=False))

    def lag_seconds(self) -> float:
        """How far behind the audio this stream is now: wall-clock time since its first chunk arrived minus the audio
        that arrived since (0 in a live stream that keeps up, and before the first chunk; it grows by RTF - 1 per
        second of audio when steps cost more than their chunks last)."""
        return 0.0 if self.wall_origin is None else self.clock() - self.wall_origin - self.now

    def _catching_up(self) -> bool:
        """Whether to only buffer this chunk: the stream is more than `max_lag_seconds` behind, and the tail still
        leaves room for it below `max_tail_seconds` (the recogniser's bound)."""
        if not self.config.max_lag_seconds:
            return False
        tail_seconds = len(self.tail) / self.SAMPLE_RATE
        if self.lag_seconds() > self.config.max_lag_seconds and tail_seconds < self.config.max_tail_seconds:
            self.chunks_buffered += 1
            return True
        return False

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        if words:
            raise TypeError(f"{type(self).__name__} reads audio: feed it with feed_audio, then flush()")
        return self._emit(self._advance(final=True))

    def _advance(self, final: bool) -> Emission:
        hypothesis = []
        if len(self.tail):
            prefix = ""
            if self.config.asr_forced_prefix:
                prefix = self.stabilizer.forced_prefix(self.config.asr_prefix_rollback)
            hypothesis = self.recognizer.transcribe(self.tail, self.config.source_lang, self.stabilizer.context,
                                                    prefix=prefix)
        update = self.stabilizer.update(hypothesis, len(self.tail) / self.SAMPLE_RATE, final=final)
        self.tail = self.tail[int(round(update.cut_seconds * self.SAMPLE_RATE)):]
        self.live_words = update.live_words
        emission = Emission()
        for sentence in update.committed_sentences:
            self.committed_sentences.append(sentence)
            self.sentences_committed += 1
            emission = emission.then(self.translator.finish_segment(sentence))
        if final:
            return emission
        if self.config.source_frontier == "agreement":
            # LocalAgreement-2 on the recogniser: the translator reads only the words two hypotheses agree on.
            if update.agreed_live_sentence:
                emission = emission.then(self.translator.revise(update.agreed_live_sentence))
        elif update.live_sentence:
            emission = emission.then(self.translator.revise(update.live_sentence, now=self.now,
                                                            hold_back=self.config.hold_back))
        return emission
