"""The streaming visibility matrix: which earlier tokens each row of a [source ‖ target] sequence may attend to.

Pure numpy over per-token segment ids, so any attention implementation (RoPE masks, ALiBi ranks) can consume it.
"""
from __future__ import annotations

import numpy as np

ALIGNMENTS = ("predicted", "query")


def visibility_matrix(source_unit: np.ndarray, target_word: np.ndarray, units_read: np.ndarray,
                      alignment: str = "predicted") -> np.ndarray:
    """Bool [L, L]: vis[i, j] is True when row i may attend to token j.

    The sequence is all source tokens then all target tokens. `source_unit[i]` is the source unit of a source token
    (0 = prompt, 1..n = words, n + 1 = end marker) and -1 on target tokens; `target_word[i]` is the target word of a
    target token (0 = header, 1..m = words, m + 1 = end) and -1 on source tokens; `units_read[j]` = g(j), the
    number of source units read when target word j is generated (`schedule.waitk_schedule`).

        vis[i, j] = j <= i                                          (causal)
                    and (i is source  =>  j is source)              (no input-attention mismatch)
                    and (i is target and j is source  =>  source_unit[j] <= g(w(i)))

    With alignment "predicted" (GPE), w(i) is the word of the token row i predicts, i.e. of token i + 1 (the last
    token keeps its own): a row is computed when its successor is generated, so it sees what that moment sees.
    With "query" (SimulMask as published), w(i) is the word of token i itself.
    """
    source_unit = np.asarray(source_unit, dtype=np.int64)
    target_word = np.asarray(target_word, dtype=np.int64)
    units_read = np.asarray(units_read, dtype=np.int64)
    if alignment not in ALIGNMENTS:
        raise ValueError(f"alignment must be one of {ALIGNMENTS}, got {alignment!r}")
    length = len(source_unit)
    if len(target_word) != length:
        raise ValueError(f"source_unit and target_word must have the same length, got {length} and {len(target_word)}")
    is_source = source_unit >= 0
    if np.any(is_source == (target_word >= 0)):
        raise ValueError("every token must be either a source token (source_unit >= 0) or a target token "
                         "(target_word >= 0), not both or neither")
    source_count = int(is_source.sum())
    if not np.all(is_source[:source_count]):
        raise ValueError("the sequence must be all source tokens followed by all target tokens")
    if np.any(np.diff(source_unit[:source_count]) < 0) or np.any(np.diff(target_word[source_count:]) < 0):
        raise ValueError("source units and target words must be non-decreasing along the sequence")
    if source_count < length and target_word[-1] >= len(units_read):
        raise ValueError(f"units_read has {len(units_read)} entries but the target has word {target_word[-1]}")

    causal = np.tril(np.ones((length, length), dtype=bool))
    row_word = target_word.copy()
    if alignment == "predicted":
        row_word[:-1] = target_word[1:]
    row_units = np.where(is_source, -1, units_read[np.clip(row_word, 0, None)] if len(units_read) else 0)
    source_column_visible = source_unit[None, :] <= row_units[:, None]  # only meaningful for target rows
    target_rows = ~is_source[:, None]
    source_columns = is_source[None, :]
    allowed = np.where(target_rows & source_columns, source_column_visible, True)
    allowed &= ~(is_source[:, None] & ~is_source[None, :])
    return causal & allowed
