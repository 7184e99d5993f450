"""Real-time factor of the AlignAtt4LLM speech cascade on one long synthetic talk (espeak-ng), and whether a chunk
costs the same late in the talk as early on: mean per-chunk time in the last minute over the first.

    python benchmarks/cascade_rtf.py [--minutes 10] [--window-minutes 10] [--config alignatt4llm_cpu] [--set key=value ...]
                                     [--wav TALK.wav]

The talk is the English side of the MCIF dev set (../shared/data) spoken sentence after sentence, or a built-in
text when that folder is absent. Run on a quiet machine: other processes on the 2 cores distort every ratio.
Targets on 2 CPU cores with the embedded default: RTF < 1, last/first minute <= 1.25.
For long talks it also prints, per window of `--window-minutes`, the mean chunk time and the part of it spent in the
recogniser, the mean audio tail it re-transcribed, the resident memory at the window's end and the sizes of the
cascade's per-stream structures: flat rows are what a 2.5-hour talk needs. `--wav` streams a recorded 16 kHz mono
talk instead (a machine without espeak-ng, or real speech). `--trained-lengths` is for random weights (make gpu-check):
the recogniser and translator do a trained model's work on a real talk's transcript (benchmarks/trained_lengths.py).
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import soundfile

import eval_configs
from agents.simulstream_cli import parse_overrides
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig
from agents.systems.llm import AlignAttTranslator
from backends.hf.compiled_step import cuda_graph_report
from common.audio import AudioError, read_wav_info
from common.config import build_config, read_yaml
from common.synthetic_speech import SAMPLE_RATE, synthesize_talk

sys.path.insert(0, str(Path(__file__).parent))
from cpu import cpu_summary  # noqa: E402
from trained_lengths import (  # noqa: E402
    ReferenceTranscriber,
    final_budget_ratio,
    read_timeline,
    reference_words,
    timeline_path,
)

# Environment variables that make a library run a lower instruction set than the CPU has (to measure the AVX2 path
# on an AVX512 machine; llama.cpp has none: build it without AVX512 instead, docs/cpu_low_latency.md).
ISA_OVERRIDES = ("CT2_FORCE_CPU_ISA", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")

FALLBACK_TEXT = [
    "Simultaneous speech translation produces a translation while the speaker is still talking.",
    "A cascade first transcribes the speech and then translates the transcript with a language model.",
    "The policy decides after every chunk of audio how much of the draft translation can be shown.",
    "Words that the recogniser may still change are hidden from the policy for a quarter of a second.",
    "We measure quality with BLEU and chrF and latency with the average lag behind the speaker.",
]


def talk_sentences(minutes: float) -> list[str]:
    """Enough English sentences for `minutes` of speech at 160 words per minute (MCIF dev when present)."""
    try:
        from common.datasets import shared_data_dir

        sentences = (shared_data_dir() / "mcif_dev" / "en.txt").read_text().splitlines()
    except (OSError, RuntimeError, ValueError):
        sentences = FALLBACK_TEXT
    sentences = [s for s in sentences if s.strip()]
    needed, words, chosen = minutes * 160 * 1.1, 0, []
    while words < needed:
        sentence = sentences[len(chosen) % len(sentences)]
        chosen.append(sentence)
        words += len(sentence.split())
    return chosen


def read_talk(path: Path) -> tuple:
    """A recorded talk as float32 samples at 16 kHz; a clear error for anything the cascade would not be fed."""
    if not path.is_file():
        sys.exit(f"--wav {path}: no such file")
    try:
        rate, channels, _ = read_wav_info(path)  # the header only: a long talk is not read just to be refused
    except AudioError as error:
        sys.exit(f"--wav {path}: {error}")
    if rate != SAMPLE_RATE or channels != 1:
        sys.exit(f"--wav {path}: {rate} Hz, {channels} channel(s); the cascade is fed {SAMPLE_RATE} Hz mono "
                 f"(convert it: ffmpeg -i {path} -ar {SAMPLE_RATE} -ac 1 talk.wav)")
    return soundfile.read(str(path), dtype="float32")


def resident_mib() -> float:
    """Resident memory now (not the peak), from /proc/self/statm; the peak from getrusage where /proc is absent."""
    statm = Path("/proc/self/statm")
    if statm.is_file():
        return int(statm.read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def stream_structure_sizes(translator: CascadeTranslator) -> str:
    """The lengths of the cascade's per-stream state that could grow with a talk (the emitted output excluded)."""
    return (f"tail {len(translator.tail) / translator.SAMPLE_RATE:.1f} s, "
            f"kept sentences {len(translator.committed_sentences)}, "
            f"emitted units {len(translator.emitted_units)}")


class TimedRecognizer:
    """The cascade's recogniser, timed: seconds spent transcribing and seconds of audio transcribed, per chunk."""

    def __init__(self, recognizer):
        self.recognizer = recognizer
        self.seconds, self.audio_seconds = [], []

    def transcribe(self, audio, language, context="", prefix=""):
        began = time.perf_counter()
        words = self.recognizer.transcribe(audio, language, context, prefix)
        self.seconds.append(time.perf_counter() - began)
        self.audio_seconds.append(len(audio) / SAMPLE_RATE)
        return words

    def __getattr__(self, name):
        return getattr(self.recognizer, name)


class TimedSegmentTranslator:
    """The cascade's segment translator, timed per call kind (live steps, final drafts of committed sentences); on
    llama.cpp also what each step evaluated: prompt tokens re-computed after the reused prefix, and one-token draft
    steps (the two costs of an MT step, docs/cpu_low_latency.md)."""

    def __init__(self, translator):
        self.translator = translator
        self.seconds = {"live": [], "final": []}
        self.batches: list[int] = []  # tokens per llama.cpp batch: >1 a prompt, 1 a draft step
        self.batch_seconds: list[float] = []
        self.draft_tokens = {"live": [], "final": []}  # tokens of each draft, per call kind
        self._kind = "live"
        session = getattr(translator, "session", None)
        if session is not None:
            draft = session.draft

            def counted_draft(*args, **kwargs):
                result = draft(*args, **kwargs)
                self.draft_tokens[self._kind].append(len(result.tokens))
                return result

            session.draft = counted_draft
        if session is not None and hasattr(session, "_decode"):
            decode = session._decode

            def timed_decode(token_ids, every_row):
                began = time.perf_counter()
                rows = decode(token_ids, every_row)
                self.batches.append(len(token_ids))
                self.batch_seconds.append(time.perf_counter() - began)
                return rows

            session._decode = timed_decode

    def _timed(self, kind, call, *args, **kwargs):
        self._kind = kind
        began = time.perf_counter()
        result = call(*args, **kwargs)
        self.seconds[kind].append(time.perf_counter() - began)
        return result

    def revise(self, *args, **kwargs):
        return self._timed("live", self.translator.revise, *args, **kwargs)

    def finish_segment(self, *args, **kwargs):
        return self._timed("final", self.translator.finish_segment, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.translator, name)

    def summary(self, chunks: int) -> str:
        live, final = self.seconds["live"], self.seconds["final"]
        text = (f"MT per chunk: {sum(live) / chunks:.3f} s in {len(live)} live steps, "
                f"{sum(final) / chunks:.3f} s in {len(final)} final drafts")
        drafted = {kind: statistics.mean(tokens) for kind, tokens in self.draft_tokens.items() if tokens}
        if drafted:
            text += "; tokens per draft: " + ", ".join(f"{kind} {mean:.1f}" for kind, mean in drafted.items())
        prompts = [(n, t) for n, t in zip(self.batches, self.batch_seconds) if n > 1]
        steps = [t for n, t in zip(self.batches, self.batch_seconds) if n == 1]
        if prompts and steps:
            tokens = sum(n for n, _ in prompts)
            text += (f"; llama.cpp: {tokens / len(prompts):.1f} prompt tokens re-computed per prompt at "
                     f"{1000 * sum(t for _, t in prompts) / tokens:.1f} ms each, {len(steps) / chunks:.1f} draft "
                     f"steps per chunk at {1000 * statistics.mean(steps):.1f} ms each")
        return text


def compiled_step_threads(translator, recognizer) -> list[tuple[str, object]]:
    """The threads of the translator's and the recogniser's compiled steps (`model_compile`, `asr_compile`), where
    there are any, to report the CUDA graphs they recorded."""
    found = []
    step = getattr(getattr(translator, "lm", None), "compiled_step", None)
    if step is not None:
        found.append(("translator", step.thread))
    inner = recognizer
    while inner is not None and getattr(inner, "_compiled", None) is None:
        inner = getattr(inner, "recognizer", None)  # through the timing and trained-length wrappers
    if inner is not None:
        found.append(("recogniser", inner._compiled.thread))
    return found


def trained_length_cascade(config: CascadeConfig, spoken) -> CascadeTranslator:
    """The cascade with random weights doing a trained model's work: the recogniser transcribes the talk's own words
    at a trained model's token count, the translator drafts every step to its budget or the policy's stop (no
    end-of-turn) and each final draft to a translation's length (`trained_lengths`)."""
    from agents.systems.llm import resolve_heads
    from backends.choice import lm_weights

    heads = resolve_heads(config)
    lm = lm_weights(config.backend, config.model, capture_heads=heads.heads, **config.lm_options()).load()
    ratio = final_budget_ratio(lm.tokenizer, [s.text for s in spoken], config.target_lang)
    config = dataclasses.replace(config, final_budget_ratio=ratio, final_budget_slack=0)
    lm.stop_token_ids = frozenset()
    translator = CascadeTranslator.from_config(config, AlignAttTranslator.from_config(config, lm))
    words = reference_words(spoken)
    translator.recognizer = ReferenceTranscriber(translator.recognizer, words, lambda: translator.now)
    print(f"trained lengths: recogniser decodes {len(words)} talk words at a trained tokenizer's "
          f"count; final drafts {ratio:.2f} x source tokens; no end-of-turn")
    return translator


def on_thread(call, *args, new_thread: bool):
    """`call(*args)`, on a new thread if `new_thread` (a one-thread pool made for this call; its exception is
    re-raised here)."""
    if not new_thread:
        return call(*args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(call, *args).result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--window-minutes", type=float, default=10.0,
                        help="report chunk time and resident memory per window of this many minutes")
    parser.add_argument("--config", default="alignatt4llm_cpu")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--wav", type=Path, help="a 16 kHz mono talk to stream instead of synthesising one")
    parser.add_argument("--trained-lengths", action="store_true",
                        help="random weights doing a trained model's work (Qwen3-ASR; with --wav, its timeline "
                             "beside it: benchmarks/trained_lengths.py)")
    parser.add_argument("--thread-per-chunk", action="store_true",
                        help="feed each chunk (and the final flush) from a new thread, as simulstream's "
                             "http_speech_processor_server does (a ThreadingHTTPServer: one thread per request); the "
                             "models were loaded, and compiled, on the main thread")
    args = parser.parse_args()

    values = {**read_yaml(eval_configs.path(args.config)), **parse_overrides(args.set)}
    chunk_seconds = float(values["speech_chunk_size"])
    config = build_config(CascadeConfig, values)

    if args.trained_lengths and config.asr != "qwen3":
        sys.exit(f"--trained-lengths stands in for Qwen3-ASR's decode; this config's recogniser is {config.asr!r}")
    if args.wav:
        spoken = None
        if args.trained_lengths:
            try:
                spoken = read_timeline(timeline_path(args.wav))
            except (FileNotFoundError, ValueError, KeyError) as error:
                sys.exit(f"--trained-lengths: {error}")
        audio, rate = read_talk(args.wav)
        source = args.wav.name
    else:
        with tempfile.TemporaryDirectory() as tmp:
            wav = Path(tmp) / "talk.wav"
            spoken = synthesize_talk(talk_sentences(args.minutes), wav)
            audio, rate = soundfile.read(str(wav), dtype="float32")
        source = "espeak-ng speech"
    audio = audio[: int(args.minutes * 60 * rate)]
    print(f"talk: {len(audio) / rate / 60:.1f} min of {source}; config {args.config} "
          f"(chunk {chunk_seconds} s, hold-back {config.hold_back} s, model {config.model}, asr {config.asr})")

    print(cpu_summary())
    if args.thread_per_chunk:
        print("chunks fed from a new thread each, as the HTTP speech-processor server does")

    began = time.perf_counter()
    if args.trained_lengths:
        translator = trained_length_cascade(config, spoken)
    else:
        translator = CascadeTranslator.from_config(config, AlignAttTranslator.from_config(config))
    print(f"models loaded in {time.perf_counter() - began:.0f} s"
          + "".join(f" (with compiling the {part}'s decode step: {knob})" for part, knob, on in (
              ("recogniser", "asr_compile", config.asr_compile), ("translator", "model_compile", config.model_compile))
              if on), flush=True)
    recognizer = translator.recognizer = TimedRecognizer(translator.recognizer)
    segment_translator = translator.translator = TimedSegmentTranslator(translator.translator)
    forced = [f"{name}={os.environ[name]}" for name in ISA_OVERRIDES if name in os.environ]
    if forced:
        print(f"instruction sets forced: {' '.join(forced)}")
    if config.backend == "llama_cpp":
        from backends.llama_cpp import build_features

        print(f"llama.cpp built for: {' '.join(sorted(build_features()))}; "
              f"weights: {segment_translator.lm.gguf_path.name}")
    translator.reset()
    step = int(chunk_seconds * rate)
    window_seconds = args.window_minutes * 60.0
    chunk_times, chunk_ends, longest_tail = [], [], 0.0
    asr_times, tail_seconds = [], []  # per chunk: seconds in the recogniser, seconds of audio it transcribed
    window_start, next_report = 0, window_seconds
    print(f"{'minutes':>11} | {'mean chunk':>10} | {'of it ASR':>9} | {'max chunk':>9} | {'mean tail':>9} | "
          f"{'RSS now':>9} | per-stream structures", flush=True)
    longest_lag = 0.0  # how far behind the audio a live stream would be when a chunk arrives
    for start in range(0, len(audio), step):
        longest_lag = max(longest_lag, translator.lag_seconds())
        began, calls = time.perf_counter(), len(recognizer.seconds)
        on_thread(translator.feed_audio, audio[start:start + step], new_thread=args.thread_per_chunk)
        chunk_times.append(time.perf_counter() - began)
        asr_times.append(sum(recognizer.seconds[calls:]))
        tail_seconds.append(sum(recognizer.audio_seconds[calls:]))
        chunk_ends.append(min(start + step, len(audio)) / rate)
        longest_tail = max(longest_tail, len(translator.tail) / rate)
        if chunk_ends[-1] >= next_report or start + step >= len(audio):
            times = chunk_times[window_start:]
            asr_seconds, tails = asr_times[window_start:], tail_seconds[window_start:]
            print(f"{(next_report - window_seconds) / 60:5.1f}-{chunk_ends[-1] / 60:<5.1f} | "
                  f"{statistics.mean(times):9.3f}s | {statistics.mean(asr_seconds):8.3f}s | {max(times):8.3f}s | "
                  f"{statistics.mean(tails):8.1f}s | {resident_mib():6.0f} MiB | "
                  f"{stream_structure_sizes(translator)}", flush=True)
            window_start, next_report = len(chunk_times), next_report + window_seconds
    began = time.perf_counter()
    on_thread(translator.flush, new_thread=args.thread_per_chunk)
    flush_time = time.perf_counter() - began

    audio_seconds = len(audio) / rate
    # The first minute starts when work does (no ASR or MT before min_start_seconds, by design).
    first = [t for t, end in zip(chunk_times, chunk_ends) if config.min_start_seconds <= end <= config.min_start_seconds + 60]
    last = [t for t, end in zip(chunk_times, chunk_ends) if end > audio_seconds - 60.0]
    rtf = (sum(chunk_times) + flush_time) / audio_seconds
    print(f"chunks: {len(chunk_times)}; final flush {flush_time:.2f} s; longest uncommitted tail {longest_tail:.1f} s")
    print(f"committed sentences: {translator.sentences_committed}; target words: {len(translator.emitted_units)}")
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    print(f"mean chunk time, first minute: {statistics.mean(first):.3f} s; last minute: {statistics.mean(last):.3f} s")
    asr_share = sum(recognizer.seconds) / (sum(chunk_times) + flush_time)
    decoded = getattr(recognizer.recognizer, "decoded_tokens", None)  # trained lengths: what each call decoded
    print(f"recogniser: {len(recognizer.seconds)} calls, mean {statistics.mean(recognizer.seconds):.3f} s on "
          f"{statistics.mean(recognizer.audio_seconds):.1f} s of tail; {100 * asr_share:.0f}% of the compute"
          + (f"; {statistics.mean(decoded):.1f} tokens decoded per call" if decoded else ""))
    print(segment_translator.summary(len(chunk_times)))
    print(f"longest lag behind the audio: {longest_lag:.1f} s; chunks only buffered to catch up "
          f"(max_lag_seconds {config.max_lag_seconds:g}): {translator.chunks_buffered}")
    for part, step_thread in compiled_step_threads(segment_translator, recognizer):
        print(f"compiled {part} step: {cuda_graph_report(step_thread)}")
    print(f"real-time factor: {rtf:.3f}  (target < 1)")
    print(f"last-minute / first-minute chunk time: {statistics.mean(last) / statistics.mean(first):.2f}x  "
          "(target <= 1.25)")


if __name__ == "__main__":
    main()
