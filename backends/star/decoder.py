"""The text decoder: causal self-attention over target tokens and cross-attention over the anchors, with an
additive per-anchor bias (STAR's segmenter logits) in every layer and a wait-k visibility mask; `step` decodes one
token with cached self-attention keys and cached, growing anchor keys."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from backends.star.layers import Block, KVCache, sinusoids
from policies.waitk import units_read_before


def visible_anchor_counts(target_positions: torch.Tensor, anchor_counts: torch.Tensor, wait_k: int) -> torch.Tensor:
    """Anchors the decoder input at position p (predicting target token p+1) may read: min(p + k, |A|), all of them
    when k = 0. [batch, positions] from positions [positions] and anchor counts [batch]."""
    counts = anchor_counts.unsqueeze(1).expand(-1, target_positions.shape[0])
    if wait_k <= 0:
        return counts
    # g(p + 1) = p + k anchors (policies.waitk), p + 1 being the 1-based index of the token predicted
    first = units_read_before(1, wait_k)
    return torch.minimum(target_positions.unsqueeze(0) + first, counts)


def cross_attention_mask(visible: torch.Tensor, memory_length: int, bias: torch.Tensor | None) -> torch.Tensor:
    """Additive mask [batch, 1, queries, anchors]: the bias of each visible anchor (0 without STAR's bias), −inf
    for anchors a query may not read yet (or padding)."""
    keep = torch.arange(memory_length, device=visible.device).view(1, 1, -1) < visible.unsqueeze(-1)
    values = bias.unsqueeze(1).expand(-1, visible.shape[1], -1) if bias is not None else keep.float() * 0
    return values.masked_fill(~keep, float("-inf")).unsqueeze(1)


@dataclass
class DecoderStream:
    """One stream's decoder state: self-attention caches, projected anchor keys/values per layer, anchor biases."""

    caches: list[KVCache]
    cross: list[KVCache]
    bias: list[torch.Tensor] = field(default_factory=list)
    tokens: int = 0  # decoder inputs consumed so far


class Decoder(nn.Module):
    def __init__(self, vocab_size: int, dim: int, heads: int, layers: int):
        super().__init__()
        self.dim = dim
        self.embedding = nn.Embedding(vocab_size, dim)
        nn.init.normal_(self.embedding.weight, std=dim ** -0.5)  # tied output: logits start near unit scale
        self.blocks = nn.ModuleList(Block(dim, heads, cross=True) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def _embed(self, tokens: torch.Tensor, start: int) -> torch.Tensor:
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)
        return self.embedding(tokens) * self.dim ** 0.5 + sinusoids(positions, self.dim)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x) @ self.embedding.weight.T

    def forward(self, tokens: torch.Tensor, memory: torch.Tensor, anchor_counts: torch.Tensor,
                bias: torch.Tensor | None, wait_k: int) -> torch.Tensor:
        """Teacher-forced logits [batch, positions, vocab] for decoder inputs [batch, positions] over anchors
        memory [batch, anchors, dim] (the first anchor_counts[b] are real), bias [batch, anchors] or None."""
        visible = visible_anchor_counts(torch.arange(tokens.shape[1], device=tokens.device), anchor_counts, wait_k)
        mask = cross_attention_mask(visible, memory.shape[1], bias).to(memory.dtype)
        x = self._embed(tokens, 0)
        for block in self.blocks:
            x = block(x, cross_kv=block.cross_attention.project_memory(memory), cross_mask=mask)
        return self._logits(x)

    def new_stream(self) -> DecoderStream:
        return DecoderStream([KVCache() for _ in self.blocks], [KVCache() for _ in self.blocks])

    def add_anchors(self, stream: DecoderStream, anchors: torch.Tensor, bias: torch.Tensor | None) -> None:
        """Append anchors [1, new, dim] (and their biases [new]) to the stream's memory."""
        for block, cross in zip(self.blocks, stream.cross):
            cross.extend(*block.cross_attention.project_memory(anchors))
        if bias is not None:
            stream.bias.append(bias)

    def step(self, stream: DecoderStream, token: int, visible: int) -> torch.Tensor:
        """Logits [vocab] after feeding `token`, reading the first `visible` anchors."""
        anchors = stream.cross[0].length
        if not 1 <= visible <= anchors:
            raise ValueError(f"a decoder step must read between 1 and {anchors} anchors, got {visible}")
        bias = torch.cat(stream.bias).view(1, -1) if stream.bias else None
        mask = cross_attention_mask(torch.tensor([[visible]]), anchors, bias)
        x = self._embed(torch.tensor([[token]]), stream.tokens)
        for block, cache, cross in zip(self.blocks, stream.caches, stream.cross):
            x = block(x, cache=cache, cross_kv=(cross.keys, cross.values), cross_mask=mask)
        stream.tokens += 1
        return self._logits(x)[0, -1]
