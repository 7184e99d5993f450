"""Causal log-mel features: 25 ms Hann windows every 10 ms with no centring (frame j reads samples
[160j, 160j + 400) only), a fixed log floor and scale instead of per-utterance normalisation (which would look ahead).
"""
from __future__ import annotations

import functools

import numpy as np
import torch

SAMPLE_RATE = 16_000
WINDOW = 400  # samples (25 ms)
HOP = 160  # samples (10 ms)
N_MELS = 80


@functools.lru_cache(maxsize=4)
def mel_filters(n_mels: int = N_MELS, n_fft: int = WINDOW, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
    """Triangular filters on the HTK mel scale, [n_mels, n_fft // 2 + 1], each normalised to unit area (Slaney)."""
    def to_mel(hz):
        return 2595.0 * np.log10(1.0 + np.asarray(hz) / 700.0)

    def to_hz(mel):
        return 700.0 * (10.0 ** (np.asarray(mel) / 2595.0) - 1.0)

    edges = to_hz(np.linspace(to_mel(0.0), to_mel(sample_rate / 2), n_mels + 2))
    bins = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)
    rising = (bins[None, :] - edges[:-2, None]) / (edges[1:-1, None] - edges[:-2, None])
    falling = (edges[2:, None] - bins[None, :]) / (edges[2:, None] - edges[1:-1, None])
    filters = np.maximum(0.0, np.minimum(rising, falling)) * (2.0 / (edges[2:] - edges[:-2]))[:, None]
    return torch.from_numpy(filters.astype(np.float32))


def frame_count(samples: int) -> int:
    """Log-mel frames computable from `samples` audio samples."""
    return 0 if samples < WINDOW else 1 + (samples - WINDOW) // HOP


def log_mel(audio: torch.Tensor) -> torch.Tensor:
    """[..., samples] float audio at 16 kHz -> [..., frames, 80] log-mel features (frame j ends at sample 160j+400)."""
    if audio.shape[-1] < WINDOW:
        return audio.new_zeros(*audio.shape[:-1], 0, N_MELS)
    frames = audio.unfold(-1, WINDOW, HOP) * torch.hann_window(WINDOW, periodic=True, device=audio.device)
    power = torch.fft.rfft(frames, dim=-1).abs().pow(2)
    mel = power @ mel_filters().to(audio.device).T
    return (torch.log10(mel.clamp_min(1e-10)) + 4.0) / 4.0
