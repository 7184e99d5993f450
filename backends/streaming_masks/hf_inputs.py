"""Model inputs for stock transformers decoders (Llama, Qwen2/3, Gemma-2/3, Phi-3): group position ids and 4D
additive float attention masks built from a visibility matrix, and a padded training batch with target-only labels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from backends.streaming_masks.schedule import waitk_schedule
from backends.streaming_masks.segments import SegmentedExample
from backends.streaming_masks.visibility import visibility_matrix

IGNORE_INDEX = -100


def group_position_ids(source_unit: np.ndarray, phi: int = 0) -> np.ndarray:
    """GPE position ids: source tokens 0 .. S-1, target tokens phi .. phi + T - 1 (paper §4.2, phi an integer)."""
    if not isinstance(phi, (int, np.integer)) or phi < 0:
        raise ValueError(f"phi (the target group's first position id) must be an integer >= 0, got {phi!r}")
    is_source = np.asarray(source_unit) >= 0
    source_count = int(is_source.sum())
    return np.concatenate([np.arange(source_count), phi + np.arange(len(is_source) - source_count)]).astype(np.int64)


def additive_mask(visible: torch.Tensor | np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """Bool [..., Q, K] visibility -> float mask of the same shape: 0 where visible, the dtype's finite minimum
    elsewhere (finite, so a row is never all -inf; every row must still see at least itself)."""
    visible = torch.as_tensor(visible, dtype=torch.bool)
    return torch.zeros(visible.shape, dtype=dtype).masked_fill(~visible, torch.finfo(dtype).min)


def example_visibility(example: SegmentedExample, k: int, alignment: str = "predicted") -> np.ndarray:
    """The wait-k visibility matrix of one segmented example."""
    units_read = waitk_schedule(k, example.source_words + 1, example.target_words)
    return visibility_matrix(example.source_unit, example.target_word, units_read, alignment)


def target_labels(example: SegmentedExample) -> np.ndarray:
    """Labels for the loss: target words and the end token (not the header, not the source); -100 elsewhere.
    transformers shifts them, so row i is scored on token i + 1."""
    return np.where(example.target_word >= 1, example.token_ids, IGNORE_INDEX)


@dataclass
class StreamingBatch:
    input_ids: torch.Tensor  # [B, L]
    attention_mask: torch.Tensor  # [B, 1, L, L] float, additive
    position_ids: torch.Tensor  # [B, L]
    labels: torch.Tensor  # [B, L]

    def to(self, device) -> "StreamingBatch":
        return StreamingBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.position_ids,
                                                         self.labels)))

    def model_inputs(self) -> dict:
        return {"input_ids": self.input_ids, "attention_mask": self.attention_mask,
                "position_ids": self.position_ids, "labels": self.labels}


def padded_batch(examples: Sequence[SegmentedExample], pad_token_id: int,
                 visibility: Callable[[SegmentedExample], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Right-padded token ids, labels (target words and EOS; pads ignored) and [batch, L, L] visibility with each
    example's `visibility(example)` in its top-left corner: pad rows see only themselves, pad columns are hidden."""
    length = max(len(e.token_ids) for e in examples)
    batch = len(examples)
    input_ids = np.full((batch, length), pad_token_id, dtype=np.int64)
    labels = np.full((batch, length), IGNORE_INDEX, dtype=np.int64)
    visible = np.zeros((batch, length, length), dtype=bool)
    visible[:, np.arange(length), np.arange(length)] = True
    for row, example in enumerate(examples):
        size = len(example.token_ids)
        input_ids[row, :size] = example.token_ids
        labels[row, :size] = target_labels(example)
        visible[row, :size, :size] = visibility(example)
    return input_ids, labels, visible


def causal_visibility(example: SegmentedExample) -> np.ndarray:
    """The plain causal mask of batch fine-tuning."""
    size = len(example.token_ids)
    return np.tril(np.ones((size, size), dtype=bool))


def collate_streaming(examples: Sequence[SegmentedExample], k: int, phi: int, pad_token_id: int,
                      dtype: torch.dtype = torch.float32, streaming: bool = True) -> StreamingBatch:
    """Right-padded batch. `streaming`: the wait-k visibility and group positions; otherwise the plain causal
    mask and contiguous positions (batch fine-tuning, for comparison). Pad rows see only themselves, pad columns
    are hidden, pad labels are ignored. The mask is always 4D: transformers would otherwise read a position-id
    reset as a packed-sequence boundary."""
    input_ids, labels, visible = padded_batch(
        examples, pad_token_id, (lambda example: example_visibility(example, k)) if streaming else causal_visibility)
    position_ids = np.zeros(input_ids.shape, dtype=np.int64)
    for row, example in enumerate(examples):
        size = len(example.token_ids)
        position_ids[row, :size] = group_position_ids(example.source_unit, phi) if streaming else np.arange(size)
    return StreamingBatch(
        input_ids=torch.from_numpy(input_ids),
        attention_mask=additive_mask(visible[:, None], dtype),
        position_ids=torch.from_numpy(position_ids),
        labels=torch.from_numpy(labels),
    )
