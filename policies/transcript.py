"""Which part of a live ASR transcript is stable: two consecutive hypotheses of the audio tail must agree, and the
agreed words are committed up to their last sentence end (or forcibly once a sentence runs on too long).

The recogniser re-transcribes only the uncommitted tail; committing cuts the tail, so each chunk's ASR cost stays
bounded however long the talk. Word times come back on the stream's absolute time base.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from common.stream import SourceWord, TimedWord
from policies.degenerate import loop_start
from policies.units import Unit, primary_language

# Closing quotes and brackets that may follow a sentence end: ASCII, English “…”, German „…“ and ‚…‘, French «…»
# and »…« (German), CJK 「…」 and （…）.
CLOSING = "'\"”’“‘»«)]」』）】"
# Sentence-final punctuation, possibly followed by closing quotes or brackets.
SENTENCE_END = re.compile(r"[.!?。！？][" + re.escape(CLOSING) + r"]*$")
# Words ending in "." that rarely end a sentence; initials ("U.S.", "J.") are recognised by shape.
ABBREVIATIONS = frozenset({
    "e.g.", "i.e.", "etc.", "vs.", "cf.", "al.", "approx.", "fig.", "figs.", "eq.", "no.", "nos.", "vol.", "pp.",
    "mr.", "mrs.", "ms.", "dr.", "prof.", "st.", "jr.", "sr.", "inc.", "ltd.", "co.", "corp.", "dept.", "ca.",
})
INITIALS = re.compile(r"(?:[^\W\d_]\.)+")
# Languages that write ordinals as a number and a full stop ("am 3. Mai", "3. května"): there "3." ends no sentence.
ORDINAL_DOT_LANGUAGES = frozenset({"de", "cs", "sk", "pl", "da", "no", "nb", "fi", "hu", "sl", "hr", "sr", "tr"})
ORDINAL = re.compile(r"\d+\.")
# Capitalised words that open an English sentence. After a word ending in a lower-case letter they mark a sentence
# end the recogniser did not write: Whisper at times drops its full stops for a minute at a time ("… still remains
# understudied In this paper we define …", each later hypothesis conditioned on the last), and a sentence that never
# ends holds a stream's output back until `max_sentence_seconds` (45 s of silence in one MCIF talk: docs/
# docs/journal/alignatt4llm-quality.md, "A sentence end the recogniser did not write"). Not "A" or "I" (a letter, a pronoun).
SENTENCE_OPENERS = frozenset("""An And As But First For However If In It Its Let's Next Now Our So Since That The
Then There These They This Today We What When You""".split())
COMMIT_AGREEMENTS = ("words", "sentence_end")  # see TranscriptStabilizer
SENTENCE_END_TOLERANCE = 0.5  # seconds between two hypotheses' end times of what is one sentence end
# Seconds of silence the tail audio may be cut in when words are frozen (`retranscribe_seconds`): a cut in running
# speech clips the next word's onset, which the recogniser then mishears ("my name is | Yusun" -> "you, You can").
# Calibration talk 1, R = 4 (docs/cpu_low_latency.md): committed WER 26.9 / 22.5 / 21.4 / 19.1% and mean tail
# 4.9 / 5.7 / 5.7 / 6.8 s for 0 / 0.15 / 0.3 / 0.5 s (19.9% and 7.4 s without freezing).
FREEZE_MIN_PAUSE = 0.3
# A sentence running on past `pause_commit_seconds` without an end (a recogniser that stopped punctuating, or writes
# no punctuation at all) is committed at the next pause of at least PAUSE_COMMIT_MIN_PAUSE seconds the speaker makes:
# one after an agreed word that ended at most PAUSE_COMMIT_RECENT seconds before the last agreed word, so the cut
# falls about where the translator has read to, not at an older pause it has translated past (the next segment would
# translate those words again). Speakers pause where sentences end, whether or not the recogniser writes it. See
# `pause_commit_count` and docs/journal/alignatt4llm-quality.md, "A sentence the recogniser never ends".
PAUSE_COMMIT_MIN_PAUSE = 0.5
PAUSE_COMMIT_RECENT = 2.0


def first_loop_start(units: Sequence[str], unit: Unit) -> int | None:
    """`loop_start` of the shortest prefix of `units` that ends in a loop (a recogniser's loop need not run to the
    end of its hypothesis), or None."""
    for end in range(2, len(units) + 1):
        start = loop_start(units[:end], unit)
        if start is not None:
            return start
    return None


def ends_sentence(word: str, lang: str | None = None) -> bool:
    """True if `word` closes a sentence: sentence-final punctuation that is not an abbreviation, initials or an
    ellipsis (recognisers write "..." for a word cut off at the end of the audio); in a language of
    ORDINAL_DOT_LANGUAGES (`lang`, a code such as "de") a number with a full stop is an ordinal, not an end."""
    if not SENTENCE_END.search(word):
        return False
    bare = word.rstrip(CLOSING)
    if bare.endswith("..") or bare.endswith("…"):
        return False
    if lang is not None and primary_language(lang) in ORDINAL_DOT_LANGUAGES and ORDINAL.fullmatch(bare):
        return False
    lowered = bare.lower()
    return lowered not in ABBREVIATIONS and not INITIALS.fullmatch(lowered)


def closes_sentence(words: Sequence[str], index: int) -> bool:
    """True if `words[index]` ends a sentence of a transcript: as written (`ends_sentence`), or unwritten: a word
    ending in a lower-case letter that a capitalised SENTENCE_OPENERS word follows ("understudied" "In")."""
    word = words[index]
    if ends_sentence(word):
        return True
    return index + 1 < len(words) and word[-1:].islower() and words[index + 1] in SENTENCE_OPENERS


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


def agreed_sentence_end(previous: Sequence[TimedWord], current: Sequence[TimedWord], tolerance: float) -> int:
    """How many leading words of `current` end at its latest sentence end that `previous` also has and that a word
    of `current` follows: a word of both that closes a sentence (`closes_sentence`), ending within `tolerance`
    seconds of each other (same time base). 0 if there is none. The words before it need not agree: the recogniser
    may still reword them, the boundary stands."""
    previous_texts = [word.text for word in previous]
    previous_ends = [word.end for index, word in enumerate(previous) if closes_sentence(previous_texts, index)]
    texts = [word.text for word in current]
    for index in range(len(current) - 2, -1, -1):
        if closes_sentence(texts, index) and any(abs(end - current[index].end) <= tolerance for end in previous_ends):
            return index + 1
    return 0


def frozen_word_count(words: Sequence[TimedWord], agreed: int, until: float, min_pause: float) -> int:
    """How many leading `words` (a hypothesis of the tail, times relative to it) may be frozen: only among the
    first `agreed` (which two hypotheses agree on), only words that ended by `until`, and only up to a word followed
    by at least `min_pause` seconds of silence before the next one, so the cut falls in a pause. 0 if there is none."""
    pauses = following_pauses(words)  # None after the last word: never frozen (it may be cut off)
    return max((index + 1 for index in range(min(agreed, len(words)))
                if words[index].end <= until and pauses[index] is not None and pauses[index] >= min_pause), default=0)


def pause_commit_count(words: Sequence[SourceWord], pauses: Sequence[float | None], agreed: int, min_pause: float,
                       recent: float) -> int:
    """How many leading `words` to commit at a pause: up to the last of the first `agreed` words whose following
    silence (`pauses[i]`, seconds before word i + 1 starts; None where unknown) is at least `min_pause` and that
    ended at most `recent` seconds before the last agreed word did. 0 if there is none (yet: the next pause near
    the agreed words ends the sentence)."""
    agreed = min(agreed, len(words), len(pauses))
    if agreed == 0:
        return 0
    newest = words[agreed - 1].end_time
    return max((index + 1 for index in range(agreed) if pauses[index] is not None and pauses[index] >= min_pause
                and newest - words[index].end_time <= recent), default=0)


def following_pauses(words: Sequence[TimedWord]) -> list[float | None]:
    """The silence after each word before the next one starts (seconds; None after the last word)."""
    return [*(max(0.0, after.start - word.end) for word, after in zip(words, words[1:])), *([None] if words else [])]


def split_sentences(words: Sequence[SourceWord]) -> list[list[SourceWord]]:
    """Split words after each sentence end (`closes_sentence`); a trailing unfinished sentence is the last part."""
    texts = [word.text for word in words]
    sentences: list[list[SourceWord]] = [[]]
    for index, word in enumerate(words):
        sentences[-1].append(word)
        if closes_sentence(texts, index):
            sentences.append([])
    return [sentence for sentence in sentences if sentence]


@dataclass(frozen=True)
class TranscriptUpdate:
    """What one hypothesis changed: newly committed sentences (stable, in order), the live words after them, and
    how many seconds to cut from the front of the tail audio (the committed part)."""

    committed_sentences: tuple[tuple[SourceWord, ...], ...]
    live_words: tuple[SourceWord, ...]
    cut_seconds: float
    agreed_live_words: int = 0  # leading live words this hypothesis and the previous one agree on (LocalAgreement-2)

    @property
    def agreed_live_sentence(self) -> tuple[SourceWord, ...]:
        """The live sentence's words that two consecutive hypotheses agree on (whisper_streaming's LocalAgreement-2
        output), as `live_sentence` writes them."""
        return self.live_sentence[: self.agreed_live_words]

    @property
    def live_sentence(self) -> tuple[SourceWord, ...]:
        """The sentence being spoken: the live words up to the first sentence end that more speech follows.

        A sentence end on the hypothesis' last word is unconfirmed (recognisers close whatever audio they get with
        a full stop, and write "..." for a word cut off), so it is removed: the translation must not close the
        sentence before the speaker does.
        """
        texts = [word.text for word in self.live_words]
        for index in range(len(self.live_words) - 1):
            if closes_sentence(texts, index):
                return self.live_words[: index + 1]
        if not self.live_words:
            return ()
        last = self.live_words[-1]
        return (*self.live_words[:-1], SourceWord(strip_unconfirmed_end(last.text), last.end_time))


class TranscriptStabilizer:
    """Per-stream commit state: where the tail starts on the absolute time base, the previous hypothesis, and the
    frozen words of the live sentence.

    With `retranscribe_seconds` R > 0, a tail longer than R is shortened before its sentence ends: the words two
    hypotheses agree on that ended more than R / 2 before the tail's end are frozen, up to the last of them that a
    pause of FREEZE_MIN_PAUSE seconds follows (`frozen_word_count`). They stay live words of the
    sentence being spoken (the translator still reads them; they are committed with their sentence), but their audio
    is cut, so the recogniser re-transcribes at most about R seconds at each chunk and gets the frozen words as
    `context` instead (whisper_streaming's prompt of committed text). R = 0 freezes nothing.

    The tail's audio stays under `max_tail_seconds`: past it, while no sentence end can be committed, the words that
    ended before its last half are frozen the same way, agreed or not, so a long sentence stays one translation
    segment (committing its first part would end that segment where the translator had already read ten seconds
    further, and the next segment would translate those words again). A sentence that runs on past
    `pause_commit_seconds` without an end is committed at the next pause of PAUSE_COMMIT_MIN_PAUSE seconds near its
    agreed words (`pause_commit_count`: where the speaker likely ended a sentence the recogniser did not write); one
    that runs on past `max_sentence_seconds` is committed without one at the words two hypotheses agree on, about as
    far as the translator has read.

    `commit_agreement` says what two hypotheses must agree on before a sentence is committed: "words" (every word up
    to its end, as written: LocalAgreement-2) or "sentence_end" (that, or just the sentence end: a sentence end in
    both at the same time, within SENTENCE_END_TOLERANCE seconds; the latest hypothesis' words up to it are
    committed). Whisper keeps rewording words seconds after they were spoken ("oral models" / "neural models"), so
    with "words" a long sentence often waits for several chunks after its end.
    """

    def __init__(self, max_tail_seconds: float = 20.0, retranscribe_seconds: float = 0.0,
                 commit_agreement: str = "words", max_sentence_seconds: float = 60.0,
                 pause_commit_seconds: float = 0.0):
        if commit_agreement not in COMMIT_AGREEMENTS:
            raise ValueError(f"commit_agreement must be one of {', '.join(COMMIT_AGREEMENTS)}, got {commit_agreement!r}")
        if not max_tail_seconds > 0 or not max_sentence_seconds > 0:
            raise ValueError(f"max_tail_seconds and max_sentence_seconds must be > 0, got {max_tail_seconds} and "
                             f"{max_sentence_seconds}")
        if retranscribe_seconds < 0:
            raise ValueError(f"retranscribe_seconds must be >= 0 (0: off), got {retranscribe_seconds}")
        if pause_commit_seconds < 0:
            raise ValueError(f"pause_commit_seconds must be >= 0 (0: off), got {pause_commit_seconds}")
        self.max_tail_seconds = max_tail_seconds
        self.max_sentence_seconds = max_sentence_seconds
        self.retranscribe_seconds = retranscribe_seconds
        self.pause_commit_seconds = pause_commit_seconds
        self.commit_agreement = commit_agreement
        self.reset()

    def reset(self) -> None:
        self.tail_start = 0.0
        self.previous: list[TimedWord] = []  # the last hypothesis after the frozen words, on the tail's time base
        self.previous_agreed = 0  # its leading words the hypothesis before it agreed on (still in the tail audio)
        self.frozen: list[SourceWord] = []  # agreed live words whose audio is cut (absolute end times)
        self.live_start = 0.0  # where the uncommitted speech begins (== tail_start while nothing is frozen)

    @property
    def context(self) -> str:
        """What was said just before the tail audio and is not re-transcribed: the frozen words, as text."""
        return " ".join(word.text for word in self.frozen)

    def forced_prefix(self, rollback_words: int) -> str:
        """How the next hypothesis of the tail may be forced to start (`SpeechRecognizer.transcribe`'s `prefix`):
        the tail's words the last two hypotheses agree on, less the last `rollback_words` of them, which the
        recogniser may still revise (Qwen3-ASR's own streaming forces its previous output less 5 tokens; these
        words are agreed ones only, so forcing them never turns a word into an agreed one)."""
        if rollback_words < 0:
            raise ValueError(f"rollback_words must be >= 0, got {rollback_words}")
        forced = self.previous[: max(0, self.previous_agreed - rollback_words)]
        return " ".join(word.text for word in forced)

    def update(self, hypothesis: Sequence[TimedWord], tail_seconds: float, final: bool = False) -> TranscriptUpdate:
        """Take the hypothesis of the current tail (times relative to the tail, `tail_seconds` long) and commit.

        Committed: every sentence the previous and current hypotheses agree on (frozen words count as agreed), up
        to its end, once a next word follows it; with `final`, all words (the previous hypothesis' when this one is
        empty). When nothing could be committed: a live sentence spanning more than `pause_commit_seconds` is
        committed up to a recent agreed word that a pause follows, and one spanning more than
        `max_sentence_seconds` up to its agreed words; a tail longer than `max_tail_seconds` has the words ending
        before its last half frozen (committed, when no word follows them: the speaker stopped), and when there are
        none the audio before the first word (at most up to that point) is cut, so the tail cannot grow forever,
        whether or not anything is said. Then, with `retranscribe_seconds`, agreed words are frozen as described above.

        A hypothesis that loops (a phrase repeated as `policies.degenerate.loop_start` defines it: recognisers
        repeat the last phrase when their budget outlasts the speech) is cut before the second copy.
        """
        hypothesis = list(hypothesis)
        loop = first_loop_start([word.text for word in hypothesis], "word")
        if loop is not None:
            hypothesis = hypothesis[:loop]
        if final and not hypothesis:
            # The last re-transcription heard nothing (a short or quiet last chunk): the live words still stand.
            hypothesis = list(self.previous)
        frozen = len(self.frozen)
        words = [*self.frozen, *(self._absolute(word) for word in hypothesis)]
        cut = 0.0
        forced_freeze = 0  # tail words frozen because the tail is too long
        if final:
            commit = len(words)
            agreed_words = len(hypothesis)
        else:
            # A sentence is committed once both hypotheses agree on it and the next word has begun, so the cut lies
            # in the pause between them: a recogniser's end time for the last word it heard is often early, and a
            # cut there leaves a piece of that word ("2027" -> "27") to be transcribed again.
            agreed_words = agreed_prefix_length(self.previous, hypothesis)
            agreed = min(frozen + agreed_words, len(words) - 1)
            texts = [word.text for word in words]
            commit = max((i + 1 for i in range(agreed) if closes_sentence(texts, i)), default=0)
            if self.commit_agreement == "sentence_end":
                boundary = agreed_sentence_end(self.previous, hypothesis, SENTENCE_END_TOLERANCE)
                commit = max(commit, frozen + boundary if boundary else 0)
            sentence_seconds = self.tail_start + tail_seconds - self.live_start
            if commit == 0 and self.pause_commit_seconds and sentence_seconds > self.pause_commit_seconds:
                pauses = [None] * frozen + following_pauses(hypothesis)  # a frozen word's audio is cut: no pause
                commit = pause_commit_count(words, pauses, agreed, PAUSE_COMMIT_MIN_PAUSE, PAUSE_COMMIT_RECENT)
            if commit == 0 and sentence_seconds > self.max_sentence_seconds:
                commit = agreed  # the translator has read about this far: its next segment starts after it
            if commit == 0 and tail_seconds > self.max_tail_seconds:
                keep_from = tail_seconds - self.max_tail_seconds / 2  # on the tail's time base
                early = sum(1 for word in hypothesis if word.end <= keep_from)
                if early == 0:
                    # Nothing was said in the first part of the tail (applause, music, silence): drop that audio up
                    # to the first word heard, so the tail stays bounded even when no word is ever committed.
                    cut = max(0.0, min([keep_from] + [word.start for word in hypothesis[:1]]))
                    if cut <= 0 and hypothesis:  # a first "word" spanning the whole first part: take it anyway
                        early = 1
                if early and early == len(hypothesis):
                    commit = len(words)  # the speaker stopped: the translator has read them all, end the sentence
                else:
                    forced_freeze = early  # speech goes on: the sentence stays one translation segment
        committed = words[:commit]
        committed_in_tail = max(0, commit - frozen)  # committed words whose audio is still in the tail
        if committed_in_tail:
            cut = self._cut_point(hypothesis, committed_in_tail)
        rest = hypothesis[committed_in_tail:]
        agreed_rest = max(0, agreed_words - committed_in_tail)
        self.frozen = self.frozen[commit:]
        if commit:
            self.live_start = self.tail_start + cut if committed_in_tail else committed[-1].end_time
        elif cut:
            self.live_start = self.tail_start + cut
        freeze = forced_freeze
        if not freeze and not final and self.retranscribe_seconds and tail_seconds - cut > self.retranscribe_seconds:
            freeze_until = tail_seconds - self.retranscribe_seconds / 2
            # Never the hypothesis' last word (it may be cut off), and the cut in a pause.
            freeze = frozen_word_count(rest, agreed_rest, freeze_until, FREEZE_MIN_PAUSE)
        if freeze:
            self.frozen += [self._absolute(word) for word in rest[:freeze]]
            cut = self._cut_point(rest, freeze)
            rest, agreed_rest = rest[freeze:], max(0, agreed_rest - freeze)
        self.previous = [TimedWord(w.text, w.start - cut, w.end - cut) for w in rest]
        self.previous_agreed = 0 if final else agreed_rest
        self.tail_start += cut
        live = (*self.frozen, *(self._absolute(word) for word in self.previous))
        sentences = tuple(tuple(sentence) for sentence in split_sentences(committed))
        return TranscriptUpdate(sentences, live, cut, len(self.frozen) + agreed_rest)

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
