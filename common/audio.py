"""Audio at the harness boundary: whatever a harness delivers (native sample rate, lists, several channels)
becomes 16 kHz mono float32, resampled as one continuous stream (no seams between chunks)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

TARGET_SAMPLE_RATE = 16_000


class AudioError(ValueError):
    """Audio that cannot be used: wrong sample rate, wrong shape, non-finite samples."""


def to_mono_float32(samples) -> np.ndarray:
    """A 1-D float32 array from a list/array of samples, averaging channels ([frames, channels] or nested lists)."""
    array = np.asarray(samples, dtype=np.float32)
    if array.ndim == 2:
        array = array.mean(axis=1)
    if array.ndim != 1:
        raise AudioError(f"audio must be 1-D (mono) or [frames, channels], got shape {array.shape}")
    if array.size and not np.all(np.isfinite(array)):
        raise AudioError("audio contains NaN or infinite samples")
    return array


class StreamResampler:
    """Resamples one stream chunk by chunk to 16 kHz with soxr's streaming resampler (state kept between chunks)."""

    def __init__(self):
        self.input_rate: int | None = None
        self._stream = None

    def reset(self) -> None:
        self.input_rate, self._stream = None, None

    def push(self, samples, sample_rate: int, last: bool = False) -> np.ndarray:
        if not sample_rate or sample_rate <= 0:
            raise AudioError(f"invalid sample rate {sample_rate!r}; expected a positive number of samples per second")
        if self.input_rate is None:
            self.input_rate = int(sample_rate)
        elif int(sample_rate) != self.input_rate:
            raise AudioError(
                f"sample rate changed within a stream ({self.input_rate} -> {sample_rate} Hz); reset between streams"
            )
        audio = to_mono_float32(samples)
        if self.input_rate == TARGET_SAMPLE_RATE:
            return audio
        if self._stream is None:
            import soxr

            self._stream = soxr.ResampleStream(self.input_rate, TARGET_SAMPLE_RATE, 1, dtype="float32")
        return self._stream.resample_chunk(audio, last=last)


def as_float32_pcm(samples) -> np.ndarray:
    """One chunk of 16 kHz mono audio as float32 in [-1, 1]: integer PCM is scaled by its type's range, float is
    kept; anything not 1-D is refused (a harness must deliver mono)."""
    array = np.asarray(samples)
    if array.ndim != 1:
        raise AudioError(f"expected mono audio as a 1-D array, got shape {array.shape}; mix the channels down first "
                         "(to_mono_float32)")
    if np.issubdtype(array.dtype, np.integer):
        return (array.astype(np.float32) / float(-np.iinfo(array.dtype).min)).astype(np.float32)
    if not np.issubdtype(array.dtype, np.floating):
        raise AudioError(f"expected float or integer PCM samples, got {array.dtype}")
    array = array.astype(np.float32, copy=False)
    if array.size and not np.all(np.isfinite(array)):
        raise AudioError("audio contains NaN or infinite samples")
    return array


def read_wav_info(path) -> tuple[int, int, str]:
    """(sample rate, channels, subtype) of an audio file, or AudioError naming the file and the problem."""
    import soundfile

    try:
        info = soundfile.info(str(path))
    except (RuntimeError, soundfile.LibsndfileError) as error:
        raise AudioError(f"cannot read audio file {path}: {error}") from None
    return info.samplerate, info.channels, info.subtype


def _open_audio(path):
    """(PyAV container, its first audio stream), or AudioError naming the file."""
    import av

    try:
        container = av.open(str(path))
    except (av.FFmpegError, OSError) as error:
        raise AudioError(f"cannot read audio file {path}: {error}") from None
    if not container.streams.audio:
        kinds = ", ".join(stream.type for stream in container.streams) or "none"
        container.close()
        raise AudioError(f"{path} has no audio track (its streams: {kinds}); give a file with speech in it")
    return container, container.streams.audio[0]


def check_audio_file(path) -> None:
    """AudioError naming `path` unless a container FFmpeg reads, with an audio track (reads headers only)."""
    container, _ = _open_audio(path)
    container.close()


def decode_audio(path) -> tuple[np.ndarray, int]:
    """The first audio track of any container FFmpeg reads (WAV, FLAC, MP3, MP4/M4A, OGG, ...) as float32
    [frames, channels] at its own sample rate, decoded with PyAV; AudioError naming the file if it has no audio track
    or cannot be decoded."""
    import av

    container, stream = _open_audio(path)
    with container:
        to_float = av.AudioResampler(format="fltp")  # same layout and rate; planar float: [channels, samples]
        pieces = []
        try:
            for frame in container.decode(stream):
                pieces.extend(converted.to_ndarray() for converted in to_float.resample(frame))
            pieces.extend(converted.to_ndarray() for converted in to_float.resample(None))
        except av.FFmpegError as error:
            raise AudioError(f"cannot decode the audio of {path}: {error}") from None
        sample_rate = stream.codec_context.sample_rate
    if not pieces:
        return np.zeros((0, 1), dtype=np.float32), sample_rate
    return np.concatenate(pieces, axis=1).T.astype(np.float32, copy=False), sample_rate


def decode_audio_16k(path) -> np.ndarray:
    """`decode_audio`, mixed to mono and resampled to 16 kHz: what the recognisers take."""
    samples, sample_rate = decode_audio(path)
    return StreamResampler().push(samples, sample_rate, last=True)


def is_simulstream_wav(path) -> bool:
    """A .wav file simulstream's own reader takes as it is: mono 16-bit PCM at 16 kHz."""
    from pathlib import Path

    if Path(path).suffix.lower() != ".wav":
        return False
    try:
        return read_wav_info(path) == (TARGET_SAMPLE_RATE, 1, "PCM_16")
    except AudioError:
        return False


def normalized_wav(path, out_dir) -> str:
    """`path` itself if it is already mono 16-bit PCM WAV at 16 kHz (what simulstream's reader expects), else its
    first audio track (any container: WAV, FLAC, MP3, MP4/M4A...) converted to that (channels averaged, resampled with
    soxr) as out_dir/<same stem>.wav.

    simulstream reads 32-bit integer PCM as float, refuses IEEE-float, multi-channel and non-WAV files and resamples
    other rates inside the timed region; converting first avoids all of that. The stem is kept: its logs key by stem.
    """
    from pathlib import Path

    import soundfile

    path = Path(path)
    if is_simulstream_wav(path):
        return str(path)
    samples, sample_rate = decode_audio(path)
    audio = to_mono_float32(samples)
    if sample_rate != TARGET_SAMPLE_RATE and audio.size:
        import soxr

        audio = soxr.resample(audio, sample_rate, TARGET_SAMPLE_RATE).astype(np.float32)
    out = Path(out_dir) / f"{path.stem}.wav"
    out.parent.mkdir(parents=True, exist_ok=True)
    soundfile.write(str(out), np.clip(audio, -1.0, 1.0), TARGET_SAMPLE_RATE, subtype="PCM_16")
    return str(out)


def wav_list_paths(wav_list: str | Path) -> list[Path]:
    """The wav list's files, relative paths resolved against the list's directory (as simulstream does)."""
    wav_list = Path(wav_list)
    if not wav_list.is_file():
        raise FileNotFoundError(f"wav list {wav_list} does not exist (one wav path per line)")
    entries = [line.strip() for line in wav_list.read_text().splitlines() if line.strip()]
    if not entries:
        raise ValueError(f"wav list {wav_list} is empty")
    return [Path(e) if Path(e).is_absolute() else (wav_list.parent / e).resolve() for e in entries]
