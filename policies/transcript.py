"""Which part of a live ASR transcript is stable: two consecutive hypotheses of the audio tail must agree, and the
agreed words are committed up to their last sentence end (or forcibly once the tail grows too long).

The recogniser re-transcribes only the uncommitted tail; committing cuts the tail, so each chunk's ASR cost stays
bounded however long the talk. Word times come back on the stream's absolute time base.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agents.core import SourceWord
from backends.asr.base import TimedWord

# Sentence-final punctuation, possibly followed by closing quotes or brackets.
SENTENCE_END = re.compile(r"[.!?。！？]['\"”’»)\]]*$")
# Words ending in "." that rarely end a sentence; initials ("U.S.", "J.") are recognised by shape.
ABBREVIATIONS = frozenset({
    "e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "approx.", "fig.", "figs.", "eq.", "no.", "nos.", "vol.", "pp.",
    "mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "inc.", "ltd.", "co.", "corp.", "dept.", "ca.",
})
INITIALS = re.compile(r"(?:[^\W\d_]\.)+")
CLOSING = "'\"”’»)]"


def ends_sentence(word: str) -> bool:
    """True if `word` closes a sentence: sentence-final punctuation that is not an abbreviation, initials or an
    ellipsis (recognisers write "..." for a word cut off at the end of the audio)."""
    if not SENTENCE_END.search(word):
        return False
    bare = word.rstrip(CLOSING)
    if bare.endswith("..") or bare.endswith("…"):
        return False
    lowered = bare.lower()
    return lowered not in ABBREVIATIONS and not INITIALS.fullmatch(lowered)


def strip_unconfirmed_end(word: str) -> str:
    """`word` without a sentence end or ellipsis that closes it ("rose." -> "rose", "mod..." -> "mod"); an
    abbreviation or initials keep their dots. A word that is only punctuation is kept."""
    bare = word.rstrip(CLOSING)
    if not (ends_sentence(word) or bare.endswith("..") or bare.endswith("…")):
        return word
    stripped = bare.rstrip(".!?。！？…")
    return stripped if stripped else word


def agreed_prefix_length(previous: Sequence[TimedWord], current: Sequence[TimedWord]) -> int:
    """Length of the longest common prefix of two hypotheses, comparing the words as written."""
    length = 0
    for before, now in zip(previous, current):
        if before.text != now.text:
            break
        length += 1
    return length


def split_sentences(words: Sequence[SourceWord]) -> list[list[SourceWord]]:
    """Split words after each sentence end; a trailing unfinished sentence is kept as the last part."""
    sentences: list[list[SourceWord]] = [[]]
    for word in words:
        sentences[-1].append(word)
        if ends_sentence(word.text):
            sentences.append([])
    return [sentence for sentence in sentences if sentence]


@dataclass(frozen=True)
class TranscriptUpdate:
    """What one hypothesis changed: newly committed sentences (stable, in order), the live words after them, and
    how many seconds to cut from the front of the tail audio (the committed part)."""

    committed_sentences: tuple[tuple[SourceWord, ...], ...]
    live_words: tuple[SourceWord, ...]
    cut_seconds: float

    @property
    def live_sentence(self) -> tuple[SourceWord, ...]:
        """The sentence being spoken: the live words up to the first sentence end that more speech follows.

        A sentence end on the hypothesis' last word is unconfirmed (recognisers close whatever audio they get with
        a full stop, and write "..." for a word cut off), so it is removed: the translation must not close the
        sentence before the speaker does.
        """
        for index, word in enumerate(self.live_words[:-1]):
            if ends_sentence(word.text):
                return self.live_words[: index + 1]
        if not self.live_words:
            return ()
        last = self.live_words[-1]
        return (*self.live_words[:-1], SourceWord(strip_unconfirmed_end(last.text), last.end_time))


class TranscriptStabilizer:
    """Per-stream commit state: where the tail starts on the absolute time base and the previous hypothesis."""

    def __init__(self, max_tail_seconds: float = 20.0):
        if not max_tail_seconds > 0:
            raise ValueError(f"max_tail_seconds must be > 0, got {max_tail_seconds}")
        self.max_tail_seconds = max_tail_seconds
        self.reset()

    def reset(self) -> None:
        self.tail_start = 0.0
        self.previous: list[TimedWord] = []

    def update(self, hypothesis: Sequence[TimedWord], tail_seconds: float, final: bool = False) -> TranscriptUpdate:
        """Take the hypothesis of the current tail (times relative to the tail, `tail_seconds` long) and commit.

        Committed: every sentence the previous and current hypotheses agree on, up to its end, once a next word
        follows it; with `final`, all words. When the tail is longer than `max_tail_seconds` and nothing could be committed, the words ending
        before the last half of that span are committed without a sentence end, so the tail cannot grow forever.
        """
        hypothesis = list(hypothesis)
        if final:
            commit = len(hypothesis)
        else:
            # A sentence is committed once both hypotheses agree on it and the next word has begun, so the cut lies
            # in the pause between them: a recogniser's end time for the last word it heard is often early, and a
            # cut there leaves a piece of that word ("2027" -> "27") to be transcribed again.
            agreed = min(agreed_prefix_length(self.previous, hypothesis), len(hypothesis) - 1)
            commit = max((i + 1 for i in range(agreed) if ends_sentence(hypothesis[i].text)), default=0)
            if commit == 0 and tail_seconds > self.max_tail_seconds:
                keep_from = tail_seconds - self.max_tail_seconds / 2
                commit = sum(1 for word in hypothesis if word.end <= keep_from)
        committed = [self._absolute(word) for word in hypothesis[:commit]]
        cut = self._cut_point(hypothesis, commit)
        self.previous = [TimedWord(w.text, w.start - cut, w.end - cut) for w in hypothesis[commit:]]
        self.tail_start += cut
        live = tuple(self._absolute(word) for word in self.previous)
        sentences = tuple(tuple(sentence) for sentence in split_sentences(committed))
        return TranscriptUpdate(sentences, live, cut)

    def _absolute(self, word: TimedWord) -> SourceWord:
        return SourceWord(word.text, self.tail_start + word.end)

    @staticmethod
    def _cut_point(hypothesis: Sequence[TimedWord], commit: int) -> float:
        """Where to cut the tail after `commit` words: midway through the pause before the next word, so a slightly
        late or early end time neither leaves a piece of the committed word nor clips the next one."""
        if commit == 0:
            return 0.0
        end = hypothesis[commit - 1].end
        if commit < len(hypothesis) and hypothesis[commit].start > end:
            return (end + hypothesis[commit].start) / 2
        return end
