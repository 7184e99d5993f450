"""Test media made with PyAV itself: speech encoded into the containers talks arrive in (MP4/M4A with AAC or ALAC,
MP3, FLAC), and a video with no audio track."""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def encode_audio(audio: np.ndarray, rate: int, path: Path, codec: str, channels: int = 1,
                 bit_rate: int | None = None) -> Path:
    """`audio` (float32 mono at `rate`) written to `path` with `codec`, the container chosen by the suffix."""
    import av

    layout = "stereo" if channels == 2 else "mono"
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        if bit_rate:
            stream.bit_rate = bit_rate
        samples = np.clip(audio, -1, 1).astype(np.float32)
        frame = av.AudioFrame.from_ndarray(np.tile(samples, (channels, 1)), format="fltp", layout=layout)
        frame.sample_rate = rate
        frame.time_base = Fraction(1, rate)
        frame.pts = 0
        for packet in stream.encode(frame):  # the encoder's own frame size is met by PyAV's internal FIFO
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path


def video_without_audio(path: Path, frames: int = 10) -> Path:
    """A small MPEG-4 video (grey frames) with no audio stream."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 128, np.uint8), format="rgb24")
            frame.pts = index
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return path
