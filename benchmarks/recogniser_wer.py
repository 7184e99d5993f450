"""Word error rate of the cascade's recogniser on a segmented test set: each segment (at most 30 s) transcribed
offline, the whole set scored against its transcripts. Says whether a direction's losses come from the ASR or the MT.

    python benchmarks/recogniser_wer.py --segments SET/segments.yaml --transcripts SET/source.cs --lang cs
        [--asr whisper] [--asr-model embedded] [--windows fitted padded] [--show 5]

WER = (substitutions + deletions + insertions) / reference words, over lower-cased words with punctuation removed.
With several Whisper `--windows`, each segment goes through every one in turn (side by side in one run): WER, time
per segment, and how far the word end times of one window move against the first's where both wrote the same words.
Each WER is given twice: as the recogniser wrote it, and once a looping hypothesis is cut before its second copy
(`policies.transcript.first_loop_start`, as the cascade's transcript commit does).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from backends.asr import WHISPER_WINDOWS, load_recognizer
from common.synthetic_speech import SAMPLE_RATE, read_segments, segment_audio
from common.wer import normalise_words, word_errors
from policies.transcript import first_loop_start

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", required=True, type=Path, help="audio-segments YAML ({wav, offset, duration})")
    parser.add_argument("--transcripts", required=True, type=Path, help="one reference transcript per segment")
    parser.add_argument("--lang", required=True, help="source language code, e.g. en or cs")
    parser.add_argument("--asr", default="whisper")
    parser.add_argument("--asr-model", default="embedded")
    parser.add_argument("--windows", nargs="+", default=["fitted"], choices=WHISPER_WINDOWS,
                        help="Whisper encoder windows to compare (whisper only)")
    parser.add_argument("--show", type=int, default=5, help="print this many segments side by side")
    args = parser.parse_args()

    segments = read_segments(args.segments)
    transcripts = args.transcripts.read_text(encoding="utf-8").splitlines()
    if len(segments) != len(transcripts):
        sys.exit(f"{args.segments} has {len(segments)} segments but {args.transcripts} {len(transcripts)} lines")
    print(cpu_summary())
    windows = args.windows if args.asr == "whisper" else ["fitted"]
    recognizers = {window: load_recognizer(args.asr, args.asr_model, window=window) for window in windows}
    errors = dict.fromkeys(windows, 0)
    loop_cut_errors = dict.fromkeys(windows, 0)  # after the cascade's loop cut (policies.transcript)
    seconds = dict.fromkeys(windows, 0.0)
    end_shifts: dict[str, list[float]] = {window: [] for window in windows[1:]}
    reference_words, audio_seconds = 0, 0.0
    for index, ((_, audio), transcript) in enumerate(zip(segment_audio(args.segments), transcripts)):
        reference = normalise_words(transcript)
        reference_words += len(reference)
        audio_seconds += len(audio) / SAMPLE_RATE
        hypotheses = {}
        for window, recognizer in recognizers.items():
            began = time.perf_counter()
            hypotheses[window] = recognizer.transcribe(audio, args.lang)
            seconds[window] += time.perf_counter() - began
            words = [word.text for word in hypotheses[window]]
            errors[window] += word_errors(normalise_words(" ".join(words)), reference)
            loop = first_loop_start(words, "word")
            loop_cut_errors[window] += word_errors(normalise_words(" ".join(words[:loop])), reference)
        first = hypotheses[windows[0]]
        for window in windows[1:]:
            if [word.text for word in hypotheses[window]] == [word.text for word in first]:
                end_shifts[window] += [abs(a.end - b.end) for a, b in zip(hypotheses[window], first)]
        if index < args.show:
            print(f"ref: {transcript}")
            for window in windows:
                print(f"{window}: {' '.join(word.text for word in hypotheses[window])}")
            print()
    print(f"{len(segments)} segments, {audio_seconds / 60:.1f} min of audio, {reference_words} reference words")
    for window in windows:
        label = f"{args.asr} {args.asr_model}" + (f" window={window}" if args.asr == "whisper" else "")
        print(f"WER ({label}, {args.lang}): {100 * errors[window] / max(1, reference_words):.1f}%  "
              f"{1000 * seconds[window] / len(segments):.0f} ms per segment "
              f"(RTF {seconds[window] / audio_seconds:.3f}); "
              f"{100 * loop_cut_errors[window] / max(1, reference_words):.1f}% once loops are cut as the cascade does")
    for window, shifts in end_shifts.items():
        if shifts:
            print(f"word ends, {window} against {windows[0]}, on {len(shifts)} words of segments both wrote alike: "
                  f"mean |shift| {np.mean(shifts):.3f} s, 95th percentile {np.percentile(shifts, 95):.3f} s")


if __name__ == "__main__":
    main()
