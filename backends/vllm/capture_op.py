"""The registered op `simulagents::capture_rows`: copy the selected heads' rows of a q or k projection into a
fixed-shape buffer by absolute position, and return a zero that the caller adds to the query (so graphs keep it).

It is opaque to torch.compile (its body always runs eagerly) and declares the buffer it writes, so compilation
neither drops nor reorders it; adding its zero changes no bit of the attention output. Its body is graph-safe: no
host sync and no shape that depends on data, so a CUDA graph that recorded it replays the same writes for new
positions (docs/vllm.md, "GPU / CUDA graphs").
"""
from __future__ import annotations

import torch


def write_rows(positions: torch.Tensor, rows: torch.Tensor, heads: torch.Tensor, buffer: torch.Tensor,
               is_padding: torch.Tensor | None = None) -> None:
    """positions: [tokens] absolute positions; rows: [tokens, all heads · head_dim] (q or k after norm and RoPE);
    heads: indices of the heads to keep; buffer: [len(heads), capacity + 1, head_dim], its last row a trash row;
    is_padding: [tokens] True for rows that are not real tokens (a padded graph batch), or None.

    Row i is written at positions[i]. Positions at or past the capacity (vLLM's profiling runs feed up to
    max_num_batched_tokens dummy tokens) and padding rows (their positions are stale) go to the trash row, so the
    write has one fixed shape whatever the data says.
    """
    head_dim = buffer.shape[-1]
    tokens = positions.shape[0]
    trash = buffer.shape[1] - 1
    selected = rows[:tokens].reshape(tokens, -1, head_dim).index_select(1, heads)
    index = positions.long().clamp(0, trash)  # index_copy_ takes int64 indices
    if is_padding is not None:
        index = index.masked_fill(is_padding[:tokens], trash)
    buffer.index_copy_(1, index, selected.transpose(0, 1).to(buffer.dtype))


def padding_mask() -> torch.Tensor | None:
    """The forward pass's padding rows, from vLLM's forward context (a slice of the model runner's persistent
    buffer, so a graph replay reads the current batch's mask); None outside a vLLM forward pass."""
    from vllm.forward_context import get_forward_context, is_forward_context_available

    return get_forward_context().is_padding if is_forward_context_available() else None


@torch.library.custom_op("simulagents::capture_rows", mutates_args=("buffer",))
def capture_rows(positions: torch.Tensor, rows: torch.Tensor, heads: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """`write_rows` with the current forward pass's padding mask; returns a zero scalar."""
    write_rows(positions, rows, heads, buffer, padding_mask())
    return rows.new_zeros(())


@capture_rows.register_fake
def _capture_rows_fake(positions, rows, heads, buffer):
    return rows.new_zeros(())
