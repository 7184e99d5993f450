"""The recogniser contract: 16 kHz mono float32 audio in, words with start and end times (seconds from the start
of that audio) out. Recognisers hold only weights; every stream's state lives with its caller."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from common.stream import TimedWord

SAMPLE_RATE = 16_000
MIN_NEW_TOKENS_AFTER_PREFIX = 8  # room for the words after a forced prefix, whatever the prefix took


class RecognizerError(RuntimeError):
    """A recogniser cannot be built or run (missing weights, unsupported language): the message says the fix."""


class SpeechRecognizer(ABC):
    """Stateless across calls, so one loaded recogniser may serve several streams (threads) at once."""

    @abstractmethod
    def transcribe(self, audio: np.ndarray, language: str, context: str = "", prefix: str = "") -> list[TimedWord]:
        """Transcribe `audio` (1-D float32 at 16 kHz, at most ~30 s) in `language` (ISO 639-1 code, e.g. "en").

        Words come in order with non-decreasing times within [0, len(audio) / 16000]; empty for silence. `context`
        is what was said just before the audio (words the caller has already fixed); a recogniser that can condition
        on preceding text does, and none transcribes it again. `prefix` is how the transcript of this audio is known
        to start (words two hypotheses agreed on): a recogniser that can force its decoder's first tokens
        (`forces_prefix`) decodes only what follows them, and its words start with the prefix's (the last of them
        may be continued), timed again with the rest; one that cannot ignores it.
        """

    forces_prefix: bool = False  # whether `transcribe` decodes after a forced `prefix` (else it ignores it)


def new_tokens_after_prefix(budget: int, forced_tokens: int) -> int:
    """A recogniser's decoding budget once `forced_tokens` of the transcript are forced: the audio's `budget` covers
    the whole transcript, the prefix included, but leaves at least MIN_NEW_TOKENS_AFTER_PREFIX."""
    return max(MIN_NEW_TOKENS_AFTER_PREFIX, budget - forced_tokens)


def merge_word_pieces(pieces: list[tuple[str, float, float]]) -> list[TimedWord]:
    """Join recogniser pieces into whitespace-delimited words: a piece that does not start with a space continues
    the previous word (Whisper writes "3.5%" as " 3", ".5", "%"); the word ends when its last piece ends."""
    words: list[TimedWord] = []
    for text, start, end in pieces:
        continues = bool(words) and not text[:1].isspace()
        text = text.strip()
        if not text:
            continue
        if continues:
            previous = words[-1]
            words[-1] = TimedWord(previous.text + text, previous.start, max(previous.end, end))
        else:
            words.append(TimedWord(text, start, end))
    return words
