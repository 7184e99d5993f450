"""How soon the speech cascade commits a sentence, and how well: one talk through the recogniser and the transcript
commit (`policies.transcript`) chunk by chunk, once per `commit_agreement` rule, the rules' streams advanced in turn.

    python benchmarks/transcript_commit.py --wav TALK.wav --transcripts TALK.txt --lang en
        [--chunk 1.0] [--agreements words sentence_end] [--retranscribe-seconds 0] [--minutes M]

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

from backends.asr import load_recognizer
from common.audio import decode_audio_16k
from common.wer import normalise_words, word_errors
from policies.transcript import COMMIT_AGREEMENTS, TranscriptStabilizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402

SAMPLE_RATE = 16_000


class Stream:
    """One rule's stream: its own tail, commit state and counts."""

    def __init__(self, agreement: str, max_tail_seconds: float, retranscribe_seconds: float):
        self.agreement = agreement
        self.stabilizer = TranscriptStabilizer(max_tail_seconds, retranscribe_seconds, agreement)
        self.tail = np.zeros(0, np.float32)
        self.committed: list[tuple[float, tuple]] = []  # (stream time at commit, sentence)
        self.tails: list[float] = []
        self.recognizer_seconds = 0.0

    def step(self, recognizer, chunk: np.ndarray, now: float, lang: str, final: bool = False) -> None:
        self.tail = np.concatenate([self.tail, chunk])
        if not len(self.tail):
            return
        started = time.perf_counter()
        hypothesis = recognizer.transcribe(self.tail, lang, self.stabilizer.context)
        self.recognizer_seconds += time.perf_counter() - started
        self.tails.append(len(self.tail) / SAMPLE_RATE)
        update = self.stabilizer.update(hypothesis, len(self.tail) / SAMPLE_RATE, final=final)
        self.tail = self.tail[round(update.cut_seconds * SAMPLE_RATE):]
        self.committed += [(None if final else now, sentence) for sentence in update.committed_sentences]


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
    parser.add_argument("--minutes", type=float, default=0.0, help="only the talk's first minutes (0: all); the "
                                                                   "WER then compares against the whole transcript")
    args = parser.parse_args()

    audio = decode_audio_16k(args.wav)
    if args.minutes:
        audio = audio[: int(args.minutes * 60 * SAMPLE_RATE)]
    reference = normalise_words(" ".join(args.transcripts.read_text(encoding="utf-8").splitlines()))
    recognizer = load_recognizer(args.asr, args.asr_model)
    streams = [Stream(agreement, args.max_tail_seconds, args.retranscribe_seconds) for agreement in args.agreements]
    print(f"talk: {args.wav.name}, {len(audio) / SAMPLE_RATE / 60:.1f} min; chunk {args.chunk} s; "
          f"retranscribe_seconds {args.retranscribe_seconds}")
    print(cpu_summary())
    step = round(args.chunk * SAMPLE_RATE)
    pending = np.zeros(0, np.float32)
    for start in range(0, len(audio), step):
        pending = np.concatenate([pending, audio[start:start + step]])
        now = min(start + step, len(audio)) / SAMPLE_RATE
        if now < args.min_start_seconds:
            continue
        for stream in streams:
            stream.step(recognizer, pending, now, args.lang)
        pending = np.zeros(0, np.float32)
    for stream in streams:
        stream.step(recognizer, pending, len(audio) / SAMPLE_RATE, args.lang, final=True)

    print(f"{'commit_agreement':>16} | {'WER':>6} | sentences | delay mean / median | mean tail | recogniser")
    for stream in streams:
        words = normalise_words(" ".join(w.text for _, sentence in stream.committed for w in sentence))
        delays = [at - sentence[-1].end_time for at, sentence in stream.committed if at is not None]
        wer = 100 * word_errors(words, reference) / max(1, len(reference))
        print(f"{stream.agreement:>16} | {wer:5.1f}% | {len(stream.committed):9d} | "
              f"{np.mean(delays):6.2f} s / {np.median(delays):5.2f} s | {np.mean(stream.tails):7.1f} s | "
              f"{stream.recognizer_seconds:8.1f} s")


if __name__ == "__main__":
    main()
