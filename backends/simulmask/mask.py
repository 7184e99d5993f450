"""The SimulMask (paper §5.2): a causal mask from which every connection a read schedule would not have at inference
is removed, built from the shared streaming visibility matrix, and the padded training batch that carries it.

Steps 1-3 of §5.2 are the rules of `backends.streaming_masks.visibility.visibility_matrix` over the SimulMask
segmentation (prompt p1 = source unit 0, source words 1..n, no end marker; p2 = target word 0, target words, EOS):
causal; source rows see source only; a target row sees the source units read when the token it PREDICTS is
generated, so p2's rows see the first read, the row of a word's last token sees the next read (at inference that
token is re-fed after the read), and the other rows of word t see g(t) = min(k + t - 1, n) words.
alignment="reference" reproduces the Simul-LLM code: every row of word t sees the read of word t + 1, which is
right for the word's last token but leaks one unread source word into the rows inside multi-token words.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from backends.streaming_masks.hf_inputs import causal_visibility, padded_batch
from backends.streaming_masks.schedule import waitk_schedule
from backends.streaming_masks.segments import SegmentedExample
from backends.streaming_masks.visibility import visibility_matrix


def simulmask_visibility(example: SegmentedExample, units_read: Sequence[int],
                         alignment: str = "predicted") -> np.ndarray:
    """Bool [L, L] SimulMask of one example for any read schedule: `units_read[j]` source units (words; n + 1 means
    the whole source) are read when target word j is generated (j = 0 for p2, m + 1 for EOS)."""
    return visibility_matrix(example.source_unit, example.target_word, np.asarray(units_read), alignment)


ALIGNMENTS = ("predicted", "reference")


def waitk_simulmask(example: SegmentedExample, k: int, alignment: str = "predicted") -> np.ndarray:
    """The wait-k SimulMask, g(j) = min(k + max(j, 1) - 1, n + 1): "predicted" (exactly what the decoder computes) or
    "reference" (Simul-LLM's per-query blocks: each row of word j gets g(j + 1))."""
    if alignment not in ALIGNMENTS:
        raise ValueError(f"SimulMask alignment must be one of {ALIGNMENTS}, got {alignment!r}")
    schedule = waitk_schedule(k, example.source_words + 1, example.target_words)
    if alignment == "reference":
        return simulmask_visibility(example, np.append(schedule[1:], schedule[-1]), "query")
    return simulmask_visibility(example, schedule, "predicted")


@dataclass
class SimulMaskBatch:
    input_ids: torch.Tensor  # [B, L]
    visible: torch.Tensor  # bool [B, L, L]
    labels: torch.Tensor  # [B, L], IGNORE_INDEX outside the target words and EOS

    def to(self, device) -> "SimulMaskBatch":
        return SimulMaskBatch(self.input_ids.to(device), self.visible.to(device), self.labels.to(device))


def collate_simulmask(examples: Sequence[SegmentedExample], k: int, pad_token_id: int, *, simulmask: bool = True,
                      alignment: str = "predicted") -> SimulMaskBatch:
    """Right-padded batch: the wait-k SimulMask (or, with `simulmask` off, the plain causal mask of causal
    fine-tuning); pad rows see only themselves, pad columns are hidden, loss on target words and EOS only (the
    reference's completion-only collator scores " {tgt}<eos>" too)."""
    input_ids, labels, visible = padded_batch(
        examples, pad_token_id,
        (lambda example: waitk_simulmask(example, k, alignment)) if simulmask else causal_visibility)
    return SimulMaskBatch(torch.from_numpy(input_ids), torch.from_numpy(visible), torch.from_numpy(labels))


def simulmask_forward(model, batch: SimulMaskBatch, **kwargs):
    """One forward of a Falcon/Bloom model under the batch's mask and modified ALiBi (loss included if labelled)."""
    from backends.simulmask.attention import modified_alibi_attention

    with modified_alibi_attention(model, batch.visible):
        return model(input_ids=batch.input_ids, labels=batch.labels, use_cache=False, **kwargs)
