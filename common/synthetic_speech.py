"""Synthetic long-form talks with espeak-ng: one 16 kHz mono wav per talk, each sentence spoken at a known offset,
plus the audio-segments YAML (`{wav, offset, duration}` per sentence) that simulstream's and OmniSTEval's scorers read.
`synthesize_long_form` rebuilds a real set's timeline (an MCIF-style segments YAML) so long-form evaluation runs here.
"""
from __future__ import annotations

import io
import shutil
import subprocess
from collections.abc import Iterator, Sequence
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


@dataclass(frozen=True)
class LongFormSet:
    """A synthetic long-form test set: the wav list (one talk per line) and the segments as actually spoken."""

    wav_list: Path
    segments: Path
    shifted_lines: int  # lines that overran the previous line and were started later than their given offset


# Speaking rates espeak-ng keeps intelligible; each line is spoken at its segment's own rate within these bounds.
MIN_WORDS_PER_MINUTE, MAX_WORDS_PER_MINUTE = 120, 320
GAP_SECONDS = 0.1  # silence kept between two lines when a line had to be started late


def read_segments(path: str | Path) -> list[dict]:
    """An audio-segments YAML: a list of {wav, offset, duration} in seconds, one per reference line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"audio-segments file {path} does not exist")
    segments = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(segments, list):
        raise ValueError(f"{path} must be a YAML list of {{wav, offset, duration}} entries")
    for number, segment in enumerate(segments, 1):
        if not (isinstance(segment, dict) and {"wav", "offset", "duration"} <= set(segment)):
            raise ValueError(f"{path}: entry {number} is not a {{wav, offset, duration}} mapping: {segment!r}")
    return segments


def segment_audio(segments: str | Path) -> Iterator[tuple[dict, np.ndarray]]:
    """Each entry of an audio-segments YAML with its audio (mono float32 at 16 kHz), read talk by talk: one talk's
    wav (relative to the YAML's folder) in memory at a time."""
    from common.audio import decode_audio_16k

    segments = Path(segments)
    talk, audio = None, np.zeros(0, dtype=np.float32)
    for segment in read_segments(segments):
        wav = segments.parent / str(segment["wav"])
        if wav != talk:
            talk, audio = wav, decode_audio_16k(wav)
        start = round(float(segment["offset"]) * SAMPLE_RATE)
        yield segment, audio[start:start + round(float(segment["duration"]) * SAMPLE_RATE)]


def synthesize_long_form(lines: Sequence[str], segments: Sequence[dict], out_dir: str | Path, voice: str = "en-us",
                         progress=None) -> LongFormSet:
    """Speak each line at its segment's offset, one wav per talk, keeping the original timeline.

    A line is spoken at the rate its segment implies (words / duration, clamped to 120-320 words per minute); a
    line that would overlap the previous one starts GAP_SECONDS after it instead. `out_dir` gets the wavs,
    `wavs.txt` and `audio-segments.yaml` with the offsets and durations as spoken (the one to score with)."""
    import soundfile

    if len(lines) != len(segments):
        raise ValueError(f"{len(lines)} text lines but {len(segments)} audio segments: they must be one per line")
    empty = [number for number, line in enumerate(lines, 1) if not line.strip()]
    if empty:
        raise ValueError(f"text lines {empty[:5]} are empty; every segment needs words to speak")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    talks: dict[str, list[SpokenSentence]] = {}
    audio: dict[str, list[tuple[int, np.ndarray]]] = {}
    cursor: dict[str, float] = {}
    shifted, previous_wav = 0, None
    for number, (line, segment) in enumerate(zip(lines, segments), 1):
        wav = Path(str(segment["wav"])).name
        if wav in talks and wav != previous_wav:
            raise ValueError(f"segment {number} returns to talk {wav} after another talk; the lines of a talk must "
                             "be contiguous (as in MCIF's audio-segments.yaml)")
        previous_wav = wav
        offset, duration = float(segment["offset"]), float(segment["duration"])
        rate = len(line.split()) / max(duration, 0.1) * 60
        speech = speak(line, voice, int(min(max(rate, MIN_WORDS_PER_MINUTE), MAX_WORDS_PER_MINUTE)))
        start = offset
        if wav in cursor and start < cursor[wav] + GAP_SECONDS:
            start, shifted = cursor[wav] + GAP_SECONDS, shifted + 1
        cursor[wav] = start + len(speech) / SAMPLE_RATE
        talks.setdefault(wav, []).append(SpokenSentence(line, start, len(speech) / SAMPLE_RATE))
        audio.setdefault(wav, []).append((round(start * SAMPLE_RATE), speech))
        if progress is not None:
            progress(number, len(lines))
    for wav, pieces in audio.items():
        talk = np.zeros(max(start + len(speech) for start, speech in pieces), dtype=np.float32)
        for start, speech in pieces:
            talk[start:start + len(speech)] = speech
        soundfile.write(str(out_dir / wav), np.clip(talk, -1, 1), SAMPLE_RATE, subtype="PCM_16")
    (out_dir / "wavs.txt").write_text("".join(f"{wav}\n" for wav in talks))
    write_segments_yaml(talks, out_dir / "audio-segments.yaml")
    return LongFormSet(out_dir / "wavs.txt", out_dir / "audio-segments.yaml", shifted)
