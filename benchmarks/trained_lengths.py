"""Random weights doing a trained model's work, so the speech cascade's cost is measured on a GPU without weights.

Random weights decode to their budget or stop at once; a trained recogniser writes the words spoken in its audio,
and a trained translator about as many tokens as a translation has. `ReferenceTranscriber` runs the real Qwen3-ASR
decode for exactly the token count of the words spoken in its window and the real aligner on them, then returns
those words at their timeline times (so the stabiliser and the translator see a real talk's transcript);
`final_budget_ratio` sizes the translator's final drafts to a translation's length.

    python benchmarks/trained_lengths.py --minutes 2.2 --out .gpu/talk.wav   # a talk and its timeline (espeak-ng)
"""
from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from backends.asr.base import SAMPLE_RATE
from backends.asr.qwen3 import SILENCE_PEAK, asr_language_name
from common.stream import TimedWord
from common.synthetic_speech import SpokenSentence

# Tokens per English word of a trained Qwen tokenizer (the recogniser's): 1.24 with Qwen2.5's on the MCIF dev English
# side (same vocabulary family as Qwen3-ASR). The test checkpoints' tokenizers are trained on a few sentences and
# split words far finer, so their counts would overstate a trained model's work.
ASR_TOKENS_PER_WORD = 1.25
# Translation tokens per source word, en->X with Qwen2.5's tokenizer on MCIF dev (1.24 tokens per English word times
# 1.54 German, 1.56 Italian, 0.96 Chinese tokens per English token). Gemma-4's 262k vocabulary is not here; it splits
# German and Italian no finer, so these are upper estimates for it.
TARGET_TOKENS_PER_SOURCE_WORD = {"de": 1.91, "it": 1.93, "zh": 1.19}
DEFAULT_TARGET_TOKENS_PER_SOURCE_WORD = 1.9


def timeline_path(wav: Path) -> Path:
    """Where a talk's timeline is kept: beside the wav (talk.wav -> talk.timeline.json)."""
    return wav.with_suffix(".timeline.json")


def write_timeline(spoken: Sequence[SpokenSentence], path: Path) -> None:
    path.write_text(json.dumps([{"text": s.text, "offset": s.offset, "duration": s.duration} for s in spoken],
                               ensure_ascii=False, indent=0), encoding="utf-8")


def read_timeline(path: Path) -> list[SpokenSentence]:
    if not path.is_file():
        raise FileNotFoundError(f"no timeline {path} beside the talk: trained lengths need the words and their times "
                                f"(write both with: python benchmarks/trained_lengths.py --out TALK.wav)")
    return [SpokenSentence(item["text"], float(item["offset"]), float(item["duration"]))
            for item in json.loads(path.read_text(encoding="utf-8"))]


def reference_words(spoken: Sequence[SpokenSentence]) -> list[TimedWord]:
    """Every word of the talk with absolute times: each sentence's span shared among its words by their length
    (characters plus one for the gap)."""
    words = []
    for sentence in spoken:
        texts = sentence.text.split()
        weights = np.array([len(text) + 1 for text in texts], dtype=float)
        edges = sentence.offset + sentence.duration * np.concatenate([[0.0], np.cumsum(weights) / weights.sum()])
        words += [TimedWord(text, float(start), float(end)) for text, start, end in zip(texts, edges, edges[1:])]
    return words


def words_heard(words: Sequence[TimedWord], start: float, end: float) -> list[TimedWord]:
    """The words spoken wholly within [start, end] seconds, with times from `start` (what a trained recogniser
    transcribes from that window; a word still being spoken at its end is left out)."""
    tolerance = 1.0 / SAMPLE_RATE  # the cascade cuts its tail on whole samples
    return [TimedWord(w.text, max(0.0, w.start - start), min(end - start, w.end - start))
            for w in words if w.start >= start - tolerance and w.end <= end + tolerance]


def asr_tokens(words: Sequence[TimedWord]) -> int:
    """The tokens a trained recogniser decodes for `words`: their text and the end of the sequence."""
    return math.ceil(ASR_TOKENS_PER_WORD * len(words)) + 1


class ReferenceTranscriber:
    """A `SpeechRecognizer` over a random-weight `Qwen3Recognizer`: each call costs what a trained model's would
    (the ASR decodes exactly `asr_tokens` tokens, the aligner times the heard words) and returns the heard words at
    their timeline times. `now()` is the stream time at the end of the audio passed in (the cascade's `now`)."""

    def __init__(self, recognizer, words: Sequence[TimedWord], now: Callable[[], float]):
        self.recognizer = recognizer
        self.words = list(words)
        self.now = now
        self.decoded_tokens: list[int] = []  # per call: ASR tokens decoded

    forces_prefix = True

    def transcribe(self, audio: np.ndarray, language: str, context: str = "", prefix: str = "") -> list[TimedWord]:
        samples = np.asarray(audio, dtype=np.float32)
        if samples.size == 0 or float(np.max(np.abs(samples))) < SILENCE_PEAK:
            return []  # no model call, as the recogniser it stands in for
        end = self.now()
        heard = words_heard(self.words, end - samples.size / SAMPLE_RATE, end)
        language_name = asr_language_name(language)
        tokens = asr_tokens(heard[len(prefix.split()):])  # a forced prefix's words are not decoded
        self.recognizer._recognise(samples, language_name, exact_new_tokens=tokens,  # noqa: SLF001 (its cost)
                                   prefix=prefix.strip())
        self.decoded_tokens.append(tokens)
        if heard:
            self.recognizer._align(samples, " ".join(w.text for w in heard), language_name)  # noqa: SLF001
        return heard

    def __getattr__(self, name):
        return getattr(self.recognizer, name)


def final_budget_ratio(tokenizer, sentences: Sequence[str], target_lang: str) -> float:
    """The `final_budget_ratio` (target tokens per source token of `tokenizer`) that gives a final draft a trained
    translation's length: the translator counts source tokens with the checkpoint's own tokenizer."""
    words = sum(len(s.split()) for s in sentences)
    tokens = sum(len(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in sentences)
    per_word = TARGET_TOKENS_PER_SOURCE_WORD.get(target_lang, DEFAULT_TARGET_TOKENS_PER_SOURCE_WORD)
    return per_word * words / tokens


def main() -> None:
    from cascade_rtf import talk_sentences

    from common.synthetic_speech import synthesize_talk

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2.2)
    parser.add_argument("--out", type=Path, required=True, help="the talk's wav; its timeline goes beside it")
    args = parser.parse_args()
    spoken = synthesize_talk(talk_sentences(args.minutes), args.out)
    write_timeline(spoken, timeline_path(args.out))
    print(f"{args.out}: {len(spoken)} sentences, {spoken[-1].offset + spoken[-1].duration:.0f} s; "
          f"timeline {timeline_path(args.out)}")


if __name__ == "__main__":
    main()
