"""The wait-k schedule, written once: target unit t (1-based) is written after g(t) = k + ceil(t / r) - 1 source
units, r target units per source unit (STACL's r = |y|/|x|; r = 1 is the classic g(t) = k + t - 1). Word-level
wait-k in the agents, the streaming masks of GPE and SimulMask, and STAR's anchors all read it here.
"""

from __future__ import annotations

import math

# r for character targets: the MCIF calibration split's en→zh references have 4870 units (split_units "char") for
# 2707 source words (1.80; de 1.01 and it 1.07 words per word). At r = 1 a character-level wait-k falls behind by
# 0.8 units per source word and writes almost half of each sentence after its end.
CHARACTER_UNITS_PER_WORD = 1.8


def default_units_per_word(target_unit: str) -> float:
    """r where none is set, for a target counted in `target_unit` ("char" or "word")."""
    return CHARACTER_UNITS_PER_WORD if target_unit == "char" else 1.0


# floor/ceil of products with a float rate: 1.8 * 5 is 9.000000000000002, 2.3 * 10 is 22.999999999999996.
_EPSILON = 1e-9


def _check_rate(rate: float) -> None:
    if not rate > 0:
        raise ValueError(f"target units per source unit must be > 0, got {rate}")


def units_read_before(target_index: int, k: int, rate: float = 1.0) -> int:
    """g(t) = k + ceil(t / r) - 1: the source units read before target unit `target_index` (1-based) is written."""
    if k < 1:
        raise ValueError(f"wait-k lag k must be >= 1, got {k}; k=1 writes after the first source word")
    if target_index < 1:
        raise ValueError(f"target units are counted from 1, got {target_index}")
    _check_rate(rate)
    return k + math.ceil(target_index / rate - _EPSILON) - 1


def waitk_target_budget(words_read: int, k: int, source_finished: bool, rate: float = 1.0) -> int | None:
    """Target units allowed after reading ``words_read`` source words: the largest t with g(t) <= words_read, so
    ``max(0, floor((words_read - k + 1) * r))``.

    Returns None (no limit) once the source is finished, so the rest of the translation can be written.
    """
    units_read_before(1, k, rate)  # checks k and r
    if words_read < 0:
        raise ValueError(f"words_read must be >= 0, got {words_read}")
    if source_finished:
        return None
    return max(0, math.floor((words_read - k + 1) * rate + _EPSILON))
