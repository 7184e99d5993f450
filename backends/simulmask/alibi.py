"""The modified ALiBi bias of SimulMask: for each query row, a key's distance is its rank among the keys that row
can see, so keys removed by the mask leave no positional gap (paper §5.3, Figure 4b). The one place for this math.
"""
from __future__ import annotations

import math

import torch


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """The per-head ALiBi slopes m_h (float32 [H]), as Press et al. and transformers' Falcon/Bloom define them:
    for P = the largest power of 2 <= H, m_h = 2^(-8h/P) for h = 1..P, then the odd powers 2^(-4(2i-1)/P) of the
    doubled base for the remaining H - P heads."""
    if num_heads < 1:
        raise ValueError(f"num_heads must be >= 1, got {num_heads}")
    closest = 2 ** math.floor(math.log2(num_heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(closest) - 3)))
    slopes = [base ** power for power in range(1, closest + 1)]
    if closest != num_heads:
        extra_base = 2.0 ** (-(2.0 ** -(math.log2(2 * closest) - 3)))
        slopes += [extra_base ** power for power in range(1, 1 + 2 * (num_heads - closest), 2)]
    return torch.tensor(slopes, dtype=torch.float32)


def visible_key_rank(visible: torch.Tensor) -> torch.Tensor:
    """Long [..., Q, K]: for every visible key, how many visible keys precede it in its row (0, 1, 2, ...); 0 on
    hidden keys (they are masked anyway)."""
    visible = torch.as_tensor(visible, dtype=torch.bool)
    counts = visible.to(torch.long).cumsum(dim=-1)
    return (counts - 1) * visible


def modified_alibi_bias(visible: torch.Tensor, num_heads: int, dtype: torch.dtype = torch.float32,
                        bfloat16_products: bool = True) -> torch.Tensor:
    """[..., H, Q, K] bias m_h * rank(i, j) for a bool visibility [..., Q, K].

    Up to a per-row constant (which softmax ignores) this is -m_h * (number of visible keys between j and i), the
    ALiBi distance counting only keys row i sees. Where every key up to i is visible it equals stock ALiBi.
    `bfloat16_products`: round slopes and products to bfloat16 as transformers' Falcon `build_alibi_tensor` does
    (Bloom's stays in float32), so a model running stock ALiBi over a cache that holds exactly the visible keys (the
    SimulMask decoder) gets bit-identical biases."""
    rank = visible_key_rank(visible).unsqueeze(-3)  # [..., 1, Q, K]
    slopes = alibi_slopes(num_heads).to(rank.device).view(num_heads, 1, 1)
    if bfloat16_products:
        slopes = slopes.bfloat16()
    return (slopes * rank).to(dtype)


def biased_attention_mask(visible: torch.Tensor, num_heads: int, bias_divisor: float,
                          dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Falcon's float [..., H, Q, K] additive mask: modified ALiBi / `bias_divisor` where visible (Falcon adds ALiBi
    before its 1/sqrt(head_dim) scaling, so it passes sqrt(head_dim)), the dtype's finite minimum elsewhere."""
    visible = torch.as_tensor(visible, dtype=torch.bool)
    check_rows_see_a_key(visible)
    bias = modified_alibi_bias(visible, num_heads, dtype) / bias_divisor
    return bias.masked_fill(~visible.unsqueeze(-3), torch.finfo(dtype).min)


def check_rows_see_a_key(visible: torch.Tensor) -> None:
    if not bool(visible.any(dim=-1).all()):
        raise ValueError("every query row must see at least one key (itself); a padding row should see only itself")
