"""Where the speech cascade ends its translation segments when the recogniser writes no sentence end: MCIF talks
(espeak-ng on their own timeline) through the production cascade with no MT, per `pause_commit_seconds`.

    python benchmarks/sentence_boundaries.py --split calibration [--max-talks N] [--skip-talks N] [--chunk 2.0]
        [--pause-commit-seconds 0 20] [--unpunctuated] [--asr-threads 1]

`--unpunctuated` lower-cases the recogniser's words and strips their punctuation (a recogniser that writes neither,
as Whisper does for a minute at a time: docs/journal/alignatt4llm-quality.md, "A sentence end the recogniser did not
write"), so only pauses, `max_sentence_seconds` and the speaker stopping can end a segment. Per setting: how the
segments were ended (at a written or unwritten sentence end, or without one), how many of those without one were
cut in a pause where a reference line ends (where the speaker did end a sentence), and how long a segment's first
word waits for its segment to be committed (the longest a translation can be held back behind a sentence end the
translator wrote and the cascade did not: `withhold_sentence_end`). No MT runs. `--min-pause` sets
PAUSE_COMMIT_MIN_PAUSE for the run, to choose it.
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import numpy as np

from evaluation.data import mcif_speech_set
from agents.systems.config import CascadeConfig
from backends.asr import load_recognizer
from common.audio import decode_audio_16k, wav_list_paths
from common.stream import TimedWord
import policies.transcript
from policies.transcript import closes_sentence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402
from transcript_commit import SAMPLE_RATE, Stream  # noqa: E402

BOUNDARY_TOLERANCE = 0.3  # seconds a reference line's end may lie outside the pause a segment was cut in


class CutStream(Stream):
    """A rule's stream that also keeps, per committed sentence, where the tail was cut after it (midway through the
    pause that follows its last word)."""

    def __init__(self, recognizer, config):
        super().__init__(recognizer, config)
        self.cuts: list[float] = []

    def feed(self, chunk):
        before = len(self.committed)
        super().feed(chunk)
        self.cuts += [self.cascade.stabilizer.live_start] * (len(self.committed) - before)


def at_line_end(last_word_end: float, cut: float, line_ends: np.ndarray) -> bool:
    """Whether a reference line ends in the pause a segment was cut in (from its last word's end to as far past the
    cut again, BOUNDARY_TOLERANCE either side): the speaker ended a sentence there."""
    pause_end = cut + max(0.0, cut - last_word_end)
    return bool(np.any((line_ends >= last_word_end - BOUNDARY_TOLERANCE)
                       & (line_ends <= pause_end + BOUNDARY_TOLERANCE)))


class Unpunctuated:
    """The recogniser, writing neither case nor punctuation (words that were only punctuation are dropped)."""

    def __init__(self, recognizer):
        self.recognizer = recognizer

    def transcribe(self, audio, language, context="", prefix=""):
        words = self.recognizer.transcribe(audio, language, context, prefix)
        bare = [TimedWord(re.sub(r"[^\w'-]", "", word.text).lower(), word.start, word.end) for word in words]
        return [word for word in bare if word.text]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="calibration", choices=["calibration", "evaluation", "all"])
    parser.add_argument("--max-talks", type=int)
    parser.add_argument("--skip-talks", type=int, default=0)
    parser.add_argument("--chunk", type=float, default=2.0, help="seconds of audio per step (the 2 s presets)")
    parser.add_argument("--pause-commit-seconds", type=float, nargs="+", default=[0.0, 20.0])
    parser.add_argument("--unpunctuated", action="store_true")
    parser.add_argument("--commit-agreement", default="sentence_end")
    parser.add_argument("--asr-threads", type=int, default=1)
    parser.add_argument("--min-pause", type=float, default=policies.transcript.PAUSE_COMMIT_MIN_PAUSE,
                        help="the silence a pause commit needs (PAUSE_COMMIT_MIN_PAUSE, set for this run)")
    parser.add_argument("--cache", type=Path, default=Path("runs/test-sets"), help="where the synthetic talks are "
                        "built once (simulagents eval's --cache)")
    args = parser.parse_args()
    policies.transcript.PAUSE_COMMIT_MIN_PAUSE = args.min_pause

    speech = mcif_speech_set("de", args.split, args.cache, args.max_talks, skip_talks=args.skip_talks)
    wavs = wav_list_paths(speech.wav_list)
    recognizer = load_recognizer("whisper", "embedded", threads=args.asr_threads)
    if args.unpunctuated:
        recognizer = Unpunctuated(recognizer)
    print(f"{args.split} split, {len(wavs)} talks, {len(speech.references)} lines; chunk {args.chunk} s; "
          f"{'unpunctuated' if args.unpunctuated else 'punctuated'} recogniser; pauses of {args.min_pause} s; "
          f"{cpu_summary()}")
    results = {seconds: {"ended": 0, "unended": 0, "at_line_end": 0, "waits": []} for seconds in
               args.pause_commit_seconds}
    started = time.perf_counter()
    for wav_path in wavs:
        line_ends = np.array([entry["offset"] + entry["duration"] for entry in speech.segment_entries
                              if Path(str(entry["wav"])).name == wav_path.name])
        audio = decode_audio_16k(wav_path)
        streams = {}
        for seconds in args.pause_commit_seconds:
            config = CascadeConfig(model="unused", source_lang="en", commit_agreement=args.commit_agreement,
                                   pause_commit_seconds=seconds)
            config.validate_speech()
            streams[seconds] = CutStream(recognizer, config)
        step = round(args.chunk * SAMPLE_RATE)
        for start in [*range(0, len(audio), step), None]:
            for stream in streams.values():
                stream.feed(None if start is None else audio[start:start + step])
        for seconds, stream in streams.items():
            result = results[seconds]
            for (at, sentence), cut in zip(stream.committed, stream.cuts):
                texts = [word.text for word in sentence]
                if at is None:
                    continue  # the talk's end
                result["waits"].append(at - sentence[0].end_time)
                if closes_sentence(texts, len(texts) - 1):
                    result["ended"] += 1
                else:
                    result["unended"] += 1
                    result["at_line_end"] += at_line_end(sentence[-1].end_time, cut, line_ends)
        print(f"{wav_path.name}: {len(audio) / SAMPLE_RATE / 60:.1f} min, {time.perf_counter() - started:.0f} s so "
              f"far; the talks so far:")
        print_table(results)


def print_table(results: dict[float, dict]) -> None:
    print(f"{'pause_commit_seconds':>20} | segments | at a sentence end | without one | of those at a line end | "
          f"first word waits: median / p95 / max", flush=True)
    for seconds, result in results.items():
        waits = np.array(result["waits"] or [0.0])
        print(f"{seconds:20.0f} | {len(result['waits']):8d} | {result['ended']:17d} | {result['unended']:11d} | "
              f"{result['at_line_end']:22d} | {np.median(waits):5.1f} / {np.percentile(waits, 95):5.1f} / "
              f"{waits.max():5.1f} s", flush=True)


if __name__ == "__main__":
    main()
