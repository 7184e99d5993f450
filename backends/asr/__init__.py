"""Speech recognisers that give word end times, called once per chunk on the live audio tail; a registry by name
(`whisper`: faster-whisper, the CPU default; `qwen3`: Qwen3-ASR with its forced aligner)."""
from __future__ import annotations

from backends.asr.base import RecognizerError, SpeechRecognizer
from common.stream import TimedWord
from common.weights import WeightLoad

# What Whisper's encoder sees: the speech plus a margin ("fitted") or faster-whisper's 30 s pad ("padded").
WHISPER_WINDOWS = ("fitted", "padded")
DEFAULT_WHISPER_THREADS = 2  # the presets' two cores, which the recogniser and the MT take in turn


def _load_whisper(model: str, device: str, window: str, threads: int) -> SpeechRecognizer:
    from backends.asr.whisper import WhisperRecognizer

    return WhisperRecognizer.load(model, device=device, threads=threads, window=window)


def _load_qwen3(model: str, aligner: str, device: str, dtype: str, compiled: bool) -> SpeechRecognizer:
    from backends.torch_runtime import require_torch

    require_torch("asr: qwen3 (Qwen3-ASR)")
    from backends.asr.qwen3 import Qwen3Recognizer

    return Qwen3Recognizer.load(model, aligner, device=device, dtype=dtype, compiled=compiled)


# Each recogniser's loader; it takes exactly the options that change what it loads.
RECOGNIZERS = {"whisper": _load_whisper, "qwen3": _load_qwen3}


def recognizer_load(name: str, model: str = "embedded", aligner: str = "", device: str = "cpu",
                    dtype: str = "float32", window: str = "fitted", compiled: bool = False,
                    threads: int = DEFAULT_WHISPER_THREADS) -> WeightLoad:
    """The load of recogniser `name` from local weights (`model`, and `aligner` for qwen3; nothing is downloaded),
    with only the options it takes. `window` (whisper only): what the encoder sees, "fitted" to the speech or
    "padded" to 30 s. `threads` (whisper only): CTranslate2's CPU threads. `compiled` (qwen3 only): decode with a
    static cache and a compiled step."""
    if name not in RECOGNIZERS:
        raise RecognizerError(f"unknown ASR backend {name!r}; choose one of {', '.join(RECOGNIZERS)}")
    return WeightLoad.taking(RECOGNIZERS[name], model=model, aligner=aligner, device=device, dtype=dtype,
                             window=window, compiled=compiled, threads=threads)


def load_recognizer(name: str, model: str = "embedded", aligner: str = "", device: str = "cpu",
                    dtype: str = "float32", window: str = "fitted", compiled: bool = False,
                    threads: int = DEFAULT_WHISPER_THREADS) -> SpeechRecognizer:
    """Load recogniser `name` now (the options of `recognizer_load`)."""
    return recognizer_load(name, model, aligner, device, dtype, window, compiled, threads).load()


__all__ = ["RECOGNIZERS", "WHISPER_WINDOWS", "RecognizerError", "SpeechRecognizer", "TimedWord", "load_recognizer",
           "recognizer_load"]
