"""Audio at the harness boundary: whatever a harness delivers (native sample rate, lists, several channels)
becomes 16 kHz mono float32, resampled as one continuous stream (no seams between chunks)."""
from __future__ import annotations

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
