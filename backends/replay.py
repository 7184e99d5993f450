"""qk-fast replay (paper Eqs. 2, 9–11): rebuild only the draft-to-source attention block from captured q/k, on the
runtime's own arrays (torch on its device, numpy from llama.cpp) through the array API, so torch is never needed.

For each selected head: logits = scaling · q_t · k_jᵀ (softcapped if the layer softcaps), the causal and
sliding-window masks the kernel used, a softmax over ALL visible columns, and only then the source columns.
"""
from __future__ import annotations

from typing import Any, Sequence

from array_api_compat import array_namespace, device, to_device

from backends.recorder import QKRecorder


def visible_keys_mask(xp, query_positions: Any, key_count: int, sliding_window: int | None) -> Any:
    """[T, key_count] bool: key j is visible to the query at position p iff j <= p and, with a window W, p - j < W
    (transformers' `sliding_window_overlay`: kv_idx > q_idx - W)."""
    keys = xp.arange(key_count, device=device(query_positions))
    visible = keys[None, :] <= query_positions[:, None]
    if sliding_window is not None:
        visible = visible & (keys[None, :] > query_positions[:, None] - sliding_window)
    return visible


def replay_attention(
    recorder: QKRecorder,
    draft_positions: range,
    source_positions: Sequence[int] | Any,
    heads: Sequence[tuple[int, int]] | None = None,
) -> Any:
    """Attention of each draft row to the source tokens, per head: float32 [T, H, S], on the CPU, of the recorder's
    array type (a torch tensor or a numpy array).

    `draft_positions` are the absolute positions of the draft rows (their queries were captured); `heads` defaults
    to the recorder's heads, in its order. Rows are full-softmax probabilities restricted to the source columns, so
    a row's source slice sums to at most 1 (the rest sits on the template, the target prefix and the draft).
    """
    heads = recorder.heads if heads is None else tuple(heads)
    layer, head = heads[0]
    xp = array_namespace(recorder.keys(layer, head, 0))
    if len(draft_positions) == 0:
        return xp.zeros((0, len(heads), len(source_positions)), dtype=xp.float32, device="cpu")
    key_count = draft_positions.stop
    rows = []
    for layer, head in heads:
        geometry = recorder.geometry[layer]
        query = xp.astype(recorder.queries(layer, head, slice(draft_positions.start, draft_positions.stop)),
                          xp.float32)
        keys = xp.astype(recorder.keys(layer, head, key_count), xp.float32)
        logits = (query @ keys.T) * geometry.scaling
        if geometry.softcap is not None:
            logits = xp.tanh(logits / geometry.softcap) * geometry.softcap
        positions = xp.arange(draft_positions.start, draft_positions.stop, device=device(logits))
        visible = visible_keys_mask(xp, positions, key_count, geometry.sliding_window)
        logits = xp.where(visible, logits, xp.asarray(-xp.inf, dtype=xp.float32, device=device(logits)))
        exponentials = xp.exp(logits - xp.max(logits, axis=-1, keepdims=True))
        probabilities = exponentials / xp.sum(exponentials, axis=-1, keepdims=True)
        source_index = xp.asarray(source_positions, dtype=xp.int64, device=device(probabilities))
        rows.append(xp.take(probabilities, source_index, axis=1))
    return to_device(xp.stack(rows, axis=1), "cpu")
