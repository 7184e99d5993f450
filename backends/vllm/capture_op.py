"""The registered op `simulagents::capture_rows`: copy the selected heads' rows of a q or k projection into a
fixed-shape buffer by absolute position, and return a zero that the caller adds to the query (so graphs keep it).

It is opaque to torch.compile (its body always runs eagerly) and declares the buffer it writes, so compilation
neither drops nor reorders it; adding its zero changes no bit of the attention output.
"""
from __future__ import annotations

import torch


@torch.library.custom_op("simulagents::capture_rows", mutates_args=("buffer",))
def capture_rows(positions: torch.Tensor, rows: torch.Tensor, heads: torch.Tensor, buffer: torch.Tensor) -> torch.Tensor:
    """positions: [tokens] absolute positions; rows: [tokens, all heads · head_dim] (q or k after norm and RoPE);
    heads: indices of the heads to keep; buffer: [len(heads), capacity, head_dim], written at `positions`.

    Positions past the capacity (vLLM's profiling runs feed up to max_num_batched_tokens dummy tokens) are skipped.
    """
    head_dim = buffer.shape[-1]
    tokens = positions.shape[0]
    selected = rows[:tokens].reshape(tokens, -1, head_dim).index_select(1, heads)
    keep = positions < buffer.shape[1]
    buffer[:, positions[keep]] = selected[keep].transpose(0, 1).to(buffer.dtype)
    return rows.new_zeros(())


@capture_rows.register_fake
def _capture_rows_fake(positions, rows, heads, buffer):
    return rows.new_zeros(())
