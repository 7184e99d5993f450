"""Transformer pieces for STAR that run both over a whole sequence and step by step with cached state: causal
strided convolutions, sinusoidal positions, attention with an additive bias, pre-norm blocks with a KV cache."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn


def sinusoids(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """Sinusoidal embeddings [len(positions), dim] (no length limit: long streams keep working)."""
    rates = torch.exp(-math.log(10_000.0) * torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = positions.to(torch.float32).unsqueeze(1) * rates.to(positions.device).unsqueeze(0)
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class CausalConv1d(nn.Conv1d):
    """A strided Conv1d padded on the left only: output u reads inputs [stride·u − (kernel−1), stride·u]."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__(in_channels, out_channels, kernel_size, stride=stride)

    @property
    def history(self) -> int:
        return self.kernel_size[0] - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [batch, channels, time]
        return super().forward(F.pad(x, (self.history, 0)))

    def step(self, x: torch.Tensor, state: dict) -> torch.Tensor:
        """The outputs that the new inputs `x` complete; `state` (a dict, empty at the start) keeps the last
        kernel−1 inputs and how many inputs were seen, so chunked calls equal one `forward` over the whole input."""
        seen = state.get("seen", 0)
        previous = state.get("tail", x.new_zeros(x.shape[0], x.shape[1], self.history))
        joined = torch.cat([previous, x], dim=2)  # joined[..., j] is input seen − history + j
        first_end = -(-seen // self.stride[0]) * self.stride[0]  # the first output ends at an input ≡ 0 (mod stride)
        start = first_end - seen
        state["seen"], state["tail"] = seen + x.shape[2], joined[:, :, joined.shape[2] - self.history:]
        if joined.shape[2] - start < self.kernel_size[0]:
            return x.new_zeros(x.shape[0], self.out_channels, 0)
        return F.conv1d(joined[:, :, start:], self.weight, self.bias, stride=self.stride)


@dataclass
class KVCache:
    """Keys and values [batch, heads, time, head_dim] seen so far by one attention layer, in buffers that grow by
    GROWTH positions when full: appending does not copy the history each time, and at most GROWTH − 1 positions
    are allocated but unused (memory follows the stream length closely)."""

    GROWTH: ClassVar[int] = 256

    keys_buffer: torch.Tensor | None = None
    values_buffer: torch.Tensor | None = None
    length: int = 0

    def extend(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        needed = self.length + keys.shape[2]
        if self.keys_buffer is None or needed > self.keys_buffer.shape[2]:
            capacity = -(-needed // self.GROWTH) * self.GROWTH
            grown = [tensor.new_empty(*tensor.shape[:2], capacity, tensor.shape[3]) for tensor in (keys, values)]
            if self.keys_buffer is not None:
                grown[0][:, :, :self.length] = self.keys_buffer[:, :, :self.length]
                grown[1][:, :, :self.length] = self.values_buffer[:, :, :self.length]
            self.keys_buffer, self.values_buffer = grown
        self.keys_buffer[:, :, self.length:needed] = keys
        self.values_buffer[:, :, self.length:needed] = values
        self.length = needed
        return self.keys, self.values

    @property
    def keys(self) -> torch.Tensor | None:
        return None if self.keys_buffer is None else self.keys_buffer[:, :, :self.length]

    @property
    def values(self) -> torch.Tensor | None:
        return None if self.values_buffer is None else self.values_buffer[:, :, :self.length]


class Attention(nn.Module):
    """Multi-head attention; `mask` is an additive float mask or a boolean keep-mask broadcast to
    [batch, heads, queries, keys]."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        if dim % heads:
            raise ValueError(f"model dimension {dim} must be divisible by the number of heads {heads}")
        self.heads = heads
        self.query, self.key, self.value = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, dim = x.shape
        return x.view(batch, time, self.heads, dim // self.heads).transpose(1, 2)

    def project_memory(self, memory: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.split(self.key(memory)), self.split(self.value(memory))

    def forward(self, x: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask=None,
                is_causal: bool = False) -> torch.Tensor:
        attended = F.scaled_dot_product_attention(self.split(self.query(x)), keys, values, attn_mask=mask,
                                                  is_causal=is_causal)
        return self.out(attended.transpose(1, 2).flatten(2))


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention, optional cross-attention, feed-forward."""

    def __init__(self, dim: int, heads: int, cross: bool = False):
        super().__init__()
        self.self_norm, self.self_attention = nn.LayerNorm(dim), Attention(dim, heads)
        self.cross_norm = nn.LayerNorm(dim) if cross else None
        self.cross_attention = Attention(dim, heads) if cross else None
        self.ffn_norm = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, cache: KVCache | None = None, cross_kv=None, cross_mask=None) -> torch.Tensor:
        """x [batch, new, dim]. Without `cache`: x is the whole sequence (causal). With it: x continues the cached
        sequence and is appended to it. `cross_kv` are the memory's projected keys and values."""
        h = self.self_norm(x)
        keys, values = self.self_attention.split(self.self_attention.key(h)), self.self_attention.split(
            self.self_attention.value(h))
        if cache is None:
            x = x + self.self_attention(h, keys, values, is_causal=True)
        else:
            past = cache.length
            keys, values = cache.extend(keys, values)
            mask = None
            if x.shape[1] > 1:
                query_positions = torch.arange(past, past + x.shape[1], device=x.device).unsqueeze(1)
                mask = torch.arange(keys.shape[2], device=x.device).unsqueeze(0) <= query_positions
            x = x + self.self_attention(h, keys, values, mask=mask)
        if self.cross_attention is not None:
            x = x + self.cross_attention(self.cross_norm(x), *cross_kv, mask=cross_mask)
        return x + self.ffn(self.ffn_norm(x))


class CausalTransformer(nn.Module):
    """A stack of causal blocks with a final norm, run whole (`forward`) or in chunks (`step`, same result)."""

    def __init__(self, dim: int, heads: int, layers: int):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def step(self, x: torch.Tensor, caches: list[KVCache]) -> torch.Tensor:
        for block, cache in zip(self.blocks, caches):
            x = block(x, cache=cache)
        return self.norm(x)

    def new_caches(self) -> list[KVCache]:
        return [KVCache() for _ in self.blocks]
