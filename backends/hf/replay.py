"""qk-fast replay (paper Eqs. 2, 9–11): rebuild only the draft-to-source attention block from captured q/k.

For each selected head: logits = scaling · q_t · k_jᵀ (softcapped if the layer softcaps), the causal and
sliding-window masks the kernel used, a softmax over ALL visible columns, and only then the source columns.
"""
from __future__ import annotations

from typing import Sequence

import torch

from backends.hf.capture import QKRecorder


def visible_keys_mask(query_positions: torch.Tensor, key_count: int, sliding_window: int | None) -> torch.Tensor:
    """[T, key_count] bool: key j is visible to the query at position p iff j <= p and, with a window W, p - j < W
    (transformers' `sliding_window_overlay`: kv_idx > q_idx - W)."""
    keys = torch.arange(key_count, device=query_positions.device)
    visible = keys[None, :] <= query_positions[:, None]
    if sliding_window is not None:
        visible &= keys[None, :] > query_positions[:, None] - sliding_window
    return visible


def replay_attention(
    recorder: QKRecorder,
    draft_positions: range,
    source_positions: Sequence[int] | torch.Tensor,
    heads: Sequence[tuple[int, int]] | None = None,
) -> torch.Tensor:
    """Attention of each draft row to the source tokens, per head: float32 tensor [T, H, S].

    `draft_positions` are the absolute positions of the draft rows (their queries were captured); `heads` defaults
    to the recorder's heads, in its order. Rows are full-softmax probabilities restricted to the source columns, so
    a row's source slice sums to at most 1 (the rest sits on the template, the target prefix and the draft).
    """
    heads = recorder.heads if heads is None else tuple(heads)
    if len(draft_positions) == 0:
        return torch.zeros(0, len(heads), len(source_positions))
    positions = torch.arange(draft_positions.start, draft_positions.stop)
    key_count = draft_positions.stop
    source_index = torch.as_tensor(source_positions, dtype=torch.long)
    rows = []
    for layer, head in heads:
        geometry = recorder.geometry[layer]
        query = recorder.queries(layer, head, slice(draft_positions.start, draft_positions.stop)).float()
        keys = recorder.keys(layer, head, key_count).float()
        logits = (query @ keys.T) * geometry.scaling
        if geometry.softcap is not None:
            logits = torch.tanh(logits / geometry.softcap) * geometry.softcap
        visible = visible_keys_mask(positions.to(logits.device), key_count, geometry.sliding_window)
        logits = logits.masked_fill(~visible, float("-inf"))
        probabilities = torch.softmax(logits, dim=-1)
        rows.append(probabilities[:, source_index.to(probabilities.device)])
    return torch.stack(rows, dim=1).cpu()
