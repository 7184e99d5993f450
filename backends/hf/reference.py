"""The independent reference for q/k capture: transformers' eager attention with `output_attentions=True`.

Used by the parity tests, the capture benchmark and diagnostics; never on the serving path (it materialises every
layer's n×n attention).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Sequence

import torch


@contextmanager
def eager_attention(model) -> Iterator[None]:
    """Temporarily switch `model` to eager attention (not thread-safe: the model is shared)."""
    previous = model.config._attn_implementation  # noqa: SLF001 (transformers keeps it private)
    model.set_attn_implementation("eager")
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


@torch.inference_mode()
def eager_source_attention(
    model, token_ids: Sequence[int], heads: Sequence[tuple[int, int]], query_positions: Sequence[int],
    source_positions: Sequence[int],
) -> torch.Tensor:
    """[T, H, S] attention of the rows at `query_positions` to `source_positions` from one full eager forward."""
    with eager_attention(model):
        device = next(model.parameters()).device
        output = model(torch.tensor([list(token_ids)], device=device), output_attentions=True)
    rows = torch.as_tensor(list(query_positions), dtype=torch.long)  # long even when empty (an empty draft)
    columns = torch.as_tensor(list(source_positions), dtype=torch.long)
    return torch.stack(
        [output.attentions[layer][0, head].float().cpu()[rows][:, columns] for layer, head in heads], dim=1
    )
