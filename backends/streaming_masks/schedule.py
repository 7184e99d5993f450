"""Read schedules for streaming translation: how many source units are read when each target word is generated.

Pure integer math (numpy), shared by training masks, the streaming decoder and the SimulMask masks.
"""
from __future__ import annotations

import numpy as np

from policies.waitk import units_read_before


def waitk_units_read(k: int, target_word: int, source_units: int) -> int:
    """Source units read when target word `target_word` is generated under word-level wait-k.

    Units are the n source words plus the end-of-source marker, so `source_units` = N = n + 1; unit 0 (the prompt)
    is always visible and not counted. Target word 0 is the assistant header, which is fed together with the first
    written word, words 1..m are the translation and m + 1 is the end-of-target token:

        g(j) = min(k + max(j, 1) - 1, N)

    so word 1 is written after k units, each later word after one more, and the end marker is read as unit n + 1.
    """
    if target_word < 0 or source_units < 1:
        raise ValueError(f"need target_word >= 0 and source_units >= 1, got {target_word} and {source_units}")
    return min(units_read_before(max(target_word, 1), k), source_units)


def waitk_schedule(k: int, source_units: int, target_words: int) -> np.ndarray:
    """g(j) for j = 0 .. target_words + 1 (header, the m words, the end token): an int64 array of length m + 2."""
    return np.array([waitk_units_read(k, j, source_units) for j in range(target_words + 2)], dtype=np.int64)
