"""How soon the speech cascade commits a sentence, and how well: one talk through the speech cascade
(`CascadeTranslator`: recogniser and transcript commit) with no MT, once per `commit_agreement` rule and
forced-prefix setting (`asr_forced_prefix` off, or on with each `asr_prefix_rollback` given), advanced in turn.

    python benchmarks/transcript_commit.py --wav TALK.wav --transcripts TALK.txt --lang en
        [--chunk 1.0] [--agreements words sentence_end] [--retranscribe-seconds 0] [--minutes M]
        [--prefix-rollbacks off 0 2]

Per rule: the WER of the committed transcript against the talk's transcript (all lines joined; lower-cased words,
punctuation removed), the commit delay (when a sentence was committed, minus the end time of its last word: its
translation's last words wait for it), the mean audio tail re-transcribed and the recogniser's time. No MT runs:
`simulagents eval` measures what the delay does to the translation's latency and quality.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig
from backends.asr import load_recognizer
from common.audio import decode_audio_16k
from common.stream import Emission
from common.wer import normalise_words, word_errors
from policies.transcript import COMMIT_AGREEMENTS

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402

SAMPLE_RATE = CascadeTranslator.SAMPLE_RATE


class TimedRecognizer:
    """The recogniser, timed: seconds spent and the length of every tail it was given."""

    def __init__(self, recognizer):
        self.recognizer = recognizer
        self.seconds = 0.0
        self.tails: list[float] = []

    def transcribe(self, audio: np.ndarray, language: str, context: str = "", prefix: str = ""):
        started = time.perf_counter()
        words = self.recognizer.transcribe(audio, language, context, prefix)
        self.seconds += time.perf_counter() - started
        self.tails.append(len(audio) / SAMPLE_RATE)
        return words


class NoTranslation:
    """A segment translator that writes nothing: only the cascade's recogniser and transcript commit run."""

    target_unit = "word"
    append_only = True

    def reset(self) -> None:
        pass

    def revise(self, words, now=None, hold_back=0.0) -> Emission:
        return Emission()

    def finish_segment(self, words) -> Emission:
        return Emission()


class Stream:
    """One rule's stream: the production cascade (`CascadeTranslator`) with its own commit state, and when each
    sentence was committed (stream time; None for the sentences the final flush commits)."""

    def __init__(self, recognizer, config: CascadeConfig):
        self.agreement = config.commit_agreement
        self.prefix = f"rollback {config.asr_prefix_rollback}" if config.asr_forced_prefix else "off"
        self.recognizer = TimedRecognizer(recognizer)
        self.cascade = CascadeTranslator(self.recognizer, NoTranslation(), config)
        self.committed: list[tuple[float | None, tuple]] = []

    def feed(self, chunk: np.ndarray | None) -> None:
        """Feed one chunk of audio; None ends the stream."""
        before = self.cascade.sentences_committed
        if chunk is None:
            self.cascade.flush()
        else:
            self.cascade.feed_audio(chunk)
        new = self.cascade.sentences_committed - before
        if new:
            at = None if chunk is None else self.cascade.now
            self.committed += [(at, sentence) for sentence in list(self.cascade.committed_sentences)[-new:]]


def prefix_setting(value: str) -> int | None:
    """`--prefix-rollbacks` item: "off" (None) or a rollback in words."""
    if value == "off":
        return None
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected off or a word count >= 0, got {value!r}")
    return int(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wav", required=True, type=Path, help="the talk, 16 kHz mono")
    parser.add_argument("--transcripts", required=True, type=Path, help="the talk's transcript (lines are joined)")
    parser.add_argument("--lang", required=True, help="source language code, e.g. en")
    parser.add_argument("--asr", default="whisper")
    parser.add_argument("--asr-model", default="embedded")
    parser.add_argument("--chunk", type=float, default=1.0, help="seconds of audio per step")
    parser.add_argument("--agreements", nargs="+", default=list(COMMIT_AGREEMENTS), choices=COMMIT_AGREEMENTS)
    parser.add_argument("--retranscribe-seconds", type=float, default=0.0)
    parser.add_argument("--max-tail-seconds", type=float, default=20.0)
    parser.add_argument("--min-start-seconds", type=float, default=2.0)
    parser.add_argument("--prefix-rollbacks", nargs="+", default=["off"], type=prefix_setting,
                        help="off (the recogniser decodes the whole tail) and/or asr_prefix_rollback values with "
                             "asr_forced_prefix on")
    parser.add_argument("--minutes", type=float, default=0.0, help="only the talk's first minutes (0: all); the "
                                                                   "WER then compares against the whole transcript")
    args = parser.parse_args()

    audio = decode_audio_16k(args.wav)
    if args.minutes:
        audio = audio[: int(args.minutes * 60 * SAMPLE_RATE)]
    reference = normalise_words(" ".join(args.transcripts.read_text(encoding="utf-8").splitlines()))
    recognizer = load_recognizer(args.asr, args.asr_model)
    streams = []
    for agreement in args.agreements:
        for rollback in args.prefix_rollbacks:
            config = CascadeConfig(model="unused", source_lang=args.lang, min_start_seconds=args.min_start_seconds,
                                   max_tail_seconds=args.max_tail_seconds, commit_agreement=agreement,
                                   retranscribe_seconds=args.retranscribe_seconds,
                                   asr_forced_prefix=rollback is not None, asr_prefix_rollback=rollback or 0)
            config.validate_speech()
            streams.append(Stream(recognizer, config))
    print(f"talk: {args.wav.name}, {len(audio) / SAMPLE_RATE / 60:.1f} min; chunk {args.chunk} s; "
          f"retranscribe_seconds {args.retranscribe_seconds}")
    print(cpu_summary())
    step = round(args.chunk * SAMPLE_RATE)
    for start in [*range(0, len(audio), step), None]:
        for stream in streams:
            stream.feed(None if start is None else audio[start:start + step])

    print(f"{'commit_agreement':>16} | {'forced prefix':>13} | {'WER':>6} | sentences | delay mean / median | "
          f"mean tail | recogniser")
    for stream in streams:
        words = normalise_words(" ".join(w.text for _, sentence in stream.committed for w in sentence))
        delays = [at - sentence[-1].end_time for at, sentence in stream.committed if at is not None]
        wer = 100 * word_errors(words, reference) / max(1, len(reference))
        print(f"{stream.agreement:>16} | {stream.prefix:>13} | {wer:5.1f}% | {len(stream.committed):9d} | "
              f"{np.mean(delays):6.2f} s / {np.median(delays):5.2f} s | {np.mean(stream.recognizer.tails):7.1f} s | "
              f"{stream.recognizer.seconds:8.1f} s")


if __name__ == "__main__":
    main()
