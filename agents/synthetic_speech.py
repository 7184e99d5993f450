"""Synthetic long-form talks with espeak-ng: one 16 kHz mono wav per talk, each sentence spoken at a known offset,
plus the audio-segments YAML (`{wav, offset, duration}` per sentence) that simulstream's and OmniSTEval's scorers read.
"""
from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

SAMPLE_RATE = 16_000
ESPEAK_INSTALL_HINT = "install espeak-ng (Debian/Ubuntu: apt-get install espeak-ng; `make install` does it)"


class SynthesisError(RuntimeError):
    """espeak-ng is missing or failed."""


@dataclass(frozen=True)
class SpokenSentence:
    text: str
    offset: float  # seconds from the start of the talk
    duration: float


def espeak_binary() -> str:
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise SynthesisError(f"espeak-ng is not installed: {ESPEAK_INSTALL_HINT}")
    return binary


def speak(text: str, voice: str = "en-us", words_per_minute: int = 160) -> np.ndarray:
    """`text` spoken by espeak-ng as float32 at 16 kHz."""
    import soundfile
    import soxr

    result = subprocess.run([espeak_binary(), "-v", voice, "-s", str(words_per_minute), "--stdout", text],
                            capture_output=True, check=False)
    if result.returncode != 0 or not result.stdout:
        raise SynthesisError(f"espeak-ng failed on {text[:40]!r}: {result.stderr.decode(errors='replace').strip()}")
    audio, rate = soundfile.read(io.BytesIO(result.stdout), dtype="float32")
    return soxr.resample(audio, rate, SAMPLE_RATE).astype(np.float32) if rate != SAMPLE_RATE else audio


def synthesize_talk(sentences: Sequence[str], wav_path: str | Path, voice: str = "en-us", words_per_minute: int = 160,
                    pause_seconds: float = 0.6) -> list[SpokenSentence]:
    """Speak `sentences` one after the other with `pause_seconds` of silence between them into `wav_path` (16-bit
    PCM, 16 kHz, mono) and return where each sentence lies."""
    import soundfile

    pause = np.zeros(int(pause_seconds * SAMPLE_RATE), dtype=np.float32)
    pieces, spoken, cursor = [], [], 0
    for text in sentences:
        audio = speak(text, voice, words_per_minute)
        spoken.append(SpokenSentence(text, cursor / SAMPLE_RATE, len(audio) / SAMPLE_RATE))
        pieces += [audio, pause]
        cursor += len(audio) + len(pause)
    wav_path = Path(wav_path)
    wav_path.parent.mkdir(parents=True, exist_ok=True)
    talk = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    soundfile.write(str(wav_path), np.clip(talk, -1, 1), SAMPLE_RATE, subtype="PCM_16")
    return spoken


def write_segments_yaml(talks: dict[str, Sequence[SpokenSentence]], path: str | Path) -> None:
    """The audio-segments YAML for talks {wav file name: its sentences}, in order (one entry per reference line)."""
    entries = [{"wav": wav, "offset": round(s.offset, 3), "duration": round(s.duration, 3)}
               for wav, sentences in talks.items() for s in sentences]
    Path(path).write_text(yaml.safe_dump(entries, sort_keys=False))
