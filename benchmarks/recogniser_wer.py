"""Word error rate of the cascade's recogniser on a segmented test set: each segment (at most 30 s) transcribed
offline, the whole set scored against its transcripts. Says whether a direction's losses come from the ASR or the MT.

    python benchmarks/recogniser_wer.py --segments SET/segments.yaml --transcripts SET/source.cs --lang cs
        [--asr whisper] [--asr-model embedded] [--show 5]

WER = (substitutions + deletions + insertions) / reference words, over lower-cased words with punctuation removed.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import soundfile

from agents.synthetic_speech import SAMPLE_RATE, read_segments
from backends.asr import load_recognizer
from backends.star.evaluate import word_errors

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402


def normalise(text: str) -> list[str]:
    """Lower-cased words without punctuation (letters, digits and inner apostrophes or hyphens kept)."""
    return re.findall(r"\w+(?:['’-]\w+)*", text.lower())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", required=True, type=Path, help="audio-segments YAML ({wav, offset, duration})")
    parser.add_argument("--transcripts", required=True, type=Path, help="one reference transcript per segment")
    parser.add_argument("--lang", required=True, help="source language code, e.g. en or cs")
    parser.add_argument("--asr", default="whisper")
    parser.add_argument("--asr-model", default="embedded")
    parser.add_argument("--show", type=int, default=5, help="print this many segments side by side")
    args = parser.parse_args()

    segments = read_segments(args.segments)
    transcripts = args.transcripts.read_text(encoding="utf-8").splitlines()
    if len(segments) != len(transcripts):
        sys.exit(f"{args.segments} has {len(segments)} segments but {args.transcripts} {len(transcripts)} lines")
    print(cpu_summary())
    recognizer = load_recognizer(args.asr, args.asr_model)
    errors, reference_words, audio_seconds, began = 0, 0, 0.0, time.perf_counter()
    audio_cache: dict[Path, object] = {}
    for index, (segment, transcript) in enumerate(zip(segments, transcripts)):
        wav = (args.segments.parent / segment["wav"]).resolve()
        if wav not in audio_cache:
            audio_cache[wav], rate = soundfile.read(str(wav), dtype="float32")
            if rate != SAMPLE_RATE:
                sys.exit(f"{wav}: {rate} Hz; this benchmark reads 16 kHz test sets (simulagents eval writes them)")
        start = int(float(segment["offset"]) * SAMPLE_RATE)
        audio = audio_cache[wav][start:start + int(float(segment["duration"]) * SAMPLE_RATE)]
        words = [word.text for word in recognizer.transcribe(audio, args.lang)]
        reference, hypothesis = normalise(transcript), normalise(" ".join(words))
        errors += word_errors(hypothesis, reference)
        reference_words += len(reference)
        audio_seconds += len(audio) / SAMPLE_RATE
        if index < args.show:
            print(f"ref: {transcript}\nasr: {' '.join(words)}\n")
    print(f"{len(segments)} segments, {audio_seconds / 60:.1f} min of audio, {reference_words} reference words; "
          f"{time.perf_counter() - began:.0f} s")
    print(f"WER ({args.asr} {args.asr_model}, {args.lang}): {100 * errors / max(1, reference_words):.1f}%")


if __name__ == "__main__":
    main()
