"""Fixed wait-k schedule at word level: read k source words, then write one target unit per word read.
Gives the number of target units that may have been written so far; the agent decides what a unit is.
"""

from __future__ import annotations


def waitk_target_budget(words_read: int, k: int, source_finished: bool) -> int | None:
    """Target units allowed after reading ``words_read`` source words: ``max(0, words_read - k + 1)``.

    Returns None (no limit) once the source is finished, so the rest of the translation can be written.
    """
    if k < 1:
        raise ValueError(f"wait-k lag k must be >= 1, got {k}; k=1 writes after the first source word")
    if words_read < 0:
        raise ValueError(f"words_read must be >= 0, got {words_read}")
    if source_finished:
        return None
    return max(0, words_read - k + 1)
