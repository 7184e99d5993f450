"""The strictly causal acoustic encoder: log-mel -> two causal stride-2 convolutions (40 ms frames) -> sinusoidal
positions -> causal transformer. `step` continues a stream chunk by chunk and equals `forward` on the whole input."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from backends.star.features import HOP, N_MELS, WINDOW
from backends.star.layers import CausalConv1d, CausalTransformer, KVCache, sinusoids

SUBSAMPLING = 4  # mel frames (10 ms) per encoder frame
FRAME_MS = SUBSAMPLING * HOP * 1000 // 16_000  # 40 ms


def encoder_frame_count(mel_frames: int | torch.Tensor):
    """Encoder frames computed from `mel_frames` log-mel frames (frame u reads mel frames up to 4u)."""
    return (mel_frames + SUBSAMPLING - 1) // SUBSAMPLING


def frame_end_ms(frame: int) -> float:
    """Milliseconds of audio encoder frame `frame` has read: its last mel frame, 4·frame, ends at 160·4·frame + 400."""
    return (SUBSAMPLING * HOP * frame + WINDOW) * 1000 / 16_000


@dataclass
class EncoderStream:
    """The cached state of one stream: convolution tails, positions done, attention caches."""

    conv_states: list[dict] = field(default_factory=lambda: [{}, {}])
    frames: int = 0
    caches: list[KVCache] | None = None


class AcousticEncoder(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int):
        super().__init__()
        self.dim = dim
        self.conv1 = CausalConv1d(N_MELS, dim, 3, 2)
        self.conv2 = CausalConv1d(dim, dim, 3, 2)
        self.transformer = CausalTransformer(dim, heads, layers)

    def _positions(self, x: torch.Tensor, start: int) -> torch.Tensor:
        positions = torch.arange(start, start + x.shape[1], device=x.device)
        return x + sinusoids(positions, self.dim).to(x.dtype)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        """[batch, mel frames, 80] -> [batch, encoder frames, dim]."""
        x = F.gelu(self.conv2(F.gelu(self.conv1(mel.transpose(1, 2))))).transpose(1, 2)
        return self.transformer(self._positions(x, 0))

    def step(self, mel: torch.Tensor, stream: EncoderStream) -> torch.Tensor:
        """The encoder frames that the new mel frames [batch, new, 80] complete (possibly none)."""
        if stream.caches is None:
            stream.caches = self.transformer.new_caches()
        x = F.gelu(self.conv1.step(mel.transpose(1, 2), stream.conv_states[0]))
        x = F.gelu(self.conv2.step(x, stream.conv_states[1])).transpose(1, 2)
        if x.shape[1] == 0:
            return x
        x = self.transformer.step(self._positions(x, stream.frames), stream.caches)
        stream.frames += x.shape[1]
        return x
