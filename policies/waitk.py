"""The wait-k schedule, written once: target unit t (1-based) is written after g(t) = k + t - 1 source units.
Word-level wait-k in the agents, the streaming masks of GPE and SimulMask, and STAR's anchors all read it here.
"""

from __future__ import annotations


def units_read_before(target_index: int, k: int) -> int:
    """g(t) = k + t - 1: the source units read before target unit `target_index` (1-based) is written."""
    if k < 1:
        raise ValueError(f"wait-k lag k must be >= 1, got {k}; k=1 writes after the first source word")
    if target_index < 1:
        raise ValueError(f"target units are counted from 1, got {target_index}")
    return k + target_index - 1


def waitk_target_budget(words_read: int, k: int, source_finished: bool) -> int | None:
    """Target units allowed after reading ``words_read`` source words: the t with g(t) <= words_read, so
    ``max(0, words_read - k + 1)``.

    Returns None (no limit) once the source is finished, so the rest of the translation can be written.
    """
    first = units_read_before(1, k)  # g(1) = k (checks k)
    if words_read < 0:
        raise ValueError(f"words_read must be >= 0, got {words_read}")
    if source_finished:
        return None
    return max(0, words_read - first + 1)
