"""Speech recognisers that give word end times, called once per chunk on the live audio tail; `load_recognizer`
picks one by name (`whisper`: faster-whisper, the CPU default; `qwen3`: Qwen3-ASR with its forced aligner)."""
from __future__ import annotations

from backends.asr.base import RecognizerError, SpeechRecognizer, TimedWord

RECOGNIZERS = ("whisper", "qwen3")
# What Whisper's encoder sees: the speech plus a margin ("fitted") or faster-whisper's 30 s pad ("padded").
WHISPER_WINDOWS = ("fitted", "padded")


def load_recognizer(name: str, model: str = "embedded", aligner: str = "", device: str = "cpu",
                    dtype: str = "float32", window: str = "fitted") -> SpeechRecognizer:
    """Build the recogniser `name` from local weights (`model`, and `aligner` for qwen3); nothing is downloaded.
    `window` (whisper only): what the encoder sees, "fitted" to the speech or "padded" to 30 s."""
    if name == "whisper":
        from backends.asr.whisper import WhisperRecognizer

        return WhisperRecognizer.load(model, device=device, window=window)
    if name == "qwen3":
        from backends.asr.qwen3 import Qwen3Recognizer

        return Qwen3Recognizer.load(model, aligner, device=device, dtype=dtype)
    raise RecognizerError(f"unknown ASR backend {name!r}; choose one of {', '.join(RECOGNIZERS)}")


__all__ = ["RECOGNIZERS", "WHISPER_WINDOWS", "RecognizerError", "SpeechRecognizer", "TimedWord", "load_recognizer"]
