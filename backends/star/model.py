"""STAR and its CIF baseline as one model: causal acoustic encoder -> segmenter scores -> segments of rescaled
scores (one per target token) -> anchors (STAR: the causal semantic encoder's state at each segment's last frame,
marked with a type embedding; CIF: the score-weighted sum of the segment's semantic states) -> decoder.

Loss = NLL + γ·(n* − Σσ(s))², with n* the target length (tokens + end of sentence)."""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from backends.star.decoder import Decoder
from backends.star.encoder import AcousticEncoder, encoder_frame_count
from backends.star.layers import CausalTransformer
from policies.integrate_fire import fire_frames, rescale_to_counts, segment_weights

COMPRESSORS = ("star", "cif")


@dataclass(frozen=True)
class StarModelConfig:
    vocab_size: int
    compressor: str = "star"  # star | cif
    dim: int = 192
    heads: int = 4
    encoder_layers: int = 4
    semantic_layers: int = 2
    decoder_layers: int = 4
    wait_k: int = 3  # the cross-attention mask of training: target token i reads i + k − 1 anchors (0: all)
    length_penalty: float = 0.01  # γ
    ctc_weight: float = 0.0  # auxiliary CTC on the acoustic encoder (stands in for the paper's pretrained encoder)

    def __post_init__(self):
        if self.compressor not in COMPRESSORS:
            raise ValueError(f"compressor must be one of {COMPRESSORS}, got {self.compressor!r}")
        if self.dim % self.heads or self.dim % 2:
            raise ValueError(f"dim {self.dim} must be even and divisible by heads {self.heads}")

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Batch:
    mel: torch.Tensor  # [batch, mel frames, 80]
    mel_lengths: torch.Tensor  # [batch]
    inputs: torch.Tensor  # decoder inputs [batch, positions]: BOS + tokens (padded)
    targets: torch.Tensor  # tokens + EOS, padded with -100
    target_lengths: torch.Tensor  # [batch] tokens + EOS


@dataclass
class Anchors:
    memory: torch.Tensor  # [batch, anchors, dim]
    counts: torch.Tensor  # [batch]
    bias: torch.Tensor | None  # [batch, anchors] segmenter logits at the anchors (STAR), None for CIF
    frames: list[torch.Tensor]  # per row: the frame each anchor (or CIF fire) completes at


class StarModel(nn.Module):
    def __init__(self, config: StarModelConfig):
        super().__init__()
        self.config = config
        dim = config.dim
        self.acoustic = AcousticEncoder(dim, config.heads, config.encoder_layers)
        self.segmenter = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 1))
        self.anchor_type = nn.Embedding(2, dim) if config.compressor == "star" else None
        self.semantic = CausalTransformer(dim, config.heads, config.semantic_layers)
        self.decoder = Decoder(config.vocab_size, dim, config.heads, config.decoder_layers)
        self.ctc_head = nn.Linear(dim, config.vocab_size) if config.ctc_weight > 0 else None

    def scores(self, states: torch.Tensor) -> torch.Tensor:
        """Segmenter logits s [batch, frames] from detached encoder states (the encoder gets no gradient from it)."""
        return self.segmenter(states.detach()).squeeze(-1)

    def compress(self, states: torch.Tensor, logits: torch.Tensor, frame_lengths: torch.Tensor,
                 counts: torch.Tensor) -> Anchors:
        """`counts[b]` anchors per row from rescaled scores (training and offline evaluation with a known count)."""
        mask = (torch.arange(states.shape[1], device=states.device).unsqueeze(0) < frame_lengths.unsqueeze(1))
        alpha = rescale_to_counts(torch.sigmoid(logits), counts, mask.to(logits.dtype))
        rows = range(states.shape[0])
        frames = [fire_frames(alpha[b, :frame_lengths[b]], int(counts[b])) for b in rows]
        if self.config.compressor == "star":
            is_anchor = torch.zeros_like(mask, dtype=torch.long)
            for b in rows:
                is_anchor[b, frames[b]] = 1
            semantic = self.semantic(states + self.anchor_type(is_anchor))
            memory = [semantic[b, frames[b]] for b in rows]
            bias = nn.utils.rnn.pad_sequence([logits[b, frames[b]] for b in rows], batch_first=True)
        else:
            semantic = self.semantic(states)
            memory = [segment_weights(alpha[b, :frame_lengths[b]], int(counts[b])) @ semantic[b, :frame_lengths[b]]
                      for b in rows]
            bias = None
        return Anchors(nn.utils.rnn.pad_sequence(memory, batch_first=True), counts, bias, frames)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        states = self.acoustic(batch.mel)
        frame_lengths = encoder_frame_count(batch.mel_lengths)
        logits = self.scores(states)
        mask = torch.arange(states.shape[1]).unsqueeze(0) < frame_lengths.unsqueeze(1)
        score_sums = (torch.sigmoid(logits) * mask).sum(dim=1)
        length_penalty = (batch.target_lengths.to(score_sums.dtype) - score_sums).pow(2).mean()
        anchors = self.compress(states, logits, frame_lengths, batch.target_lengths)
        token_logits = self.decoder(batch.inputs, anchors.memory, anchors.counts, anchors.bias, self.config.wait_k)
        nll = F.cross_entropy(token_logits.flatten(0, 1), batch.targets.flatten(), ignore_index=-100)
        losses = {"loss": nll + self.config.length_penalty * length_penalty, "nll": nll,
                  "length_penalty": length_penalty, "anchors_per_token": score_sums.sum() / batch.target_lengths.sum()}
        if self.ctc_head is not None:
            losses["ctc"] = self.ctc_loss(states, frame_lengths, batch)
            losses["loss"] = losses["loss"] + self.config.ctc_weight * losses["ctc"]
        return losses

    def ctc_loss(self, states: torch.Tensor, frame_lengths: torch.Tensor, batch: Batch) -> torch.Tensor:
        """CTC of the target pieces (no end of sentence) on the acoustic states; blank = the padding id 0."""
        log_probs = self.ctc_head(states).log_softmax(-1).transpose(0, 1)
        pieces = batch.target_lengths - 1
        targets = torch.cat([row[:length] for row, length in zip(batch.targets, pieces.tolist())])
        return F.ctc_loss(log_probs, targets, frame_lengths, pieces, blank=0, zero_infinity=True)
