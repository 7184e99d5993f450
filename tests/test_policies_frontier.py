"""Tests for policies.frontier: accessible source words from word end times, the current time and a hold-back."""

from __future__ import annotations

import math
import random

import pytest

from policies.frontier import accessible_word_count


@pytest.mark.parametrize("end_times, now, hold_back, expected", [
    ([0.5, 1.0, 1.5, 2.0], 2.0, 0.0, 4),  # at 0 hold-back, every word that ended is accessible
    ([0.5, 1.0, 1.5, 2.0], 2.0, 0.25, 3),  # 2.0 > 1.75
    ([0.5, 1.0, 1.5, 2.0], 2.0, 0.5, 3),  # boundary: 1.5 <= 1.5 is accessible
    ([0.5, 1.0, 1.5, 2.0], 2.0, 0.51, 2),
    ([0.5, 1.0, 1.5, 2.0], 0.4, 0.0, 0),
    ([], 3.0, 0.25, 0),
    ([None, None, None], 0.0, 0.25, 3),  # text input: no times, everything accessible
    ([0.5, None, 1.0], 1.0, 0.0, 3),
    ([0.5, 3.0, 1.0], 2.0, 0.0, 1),  # stops at the first inaccessible word, even if a later one is earlier
    ([0.5, float("nan"), 1.0], 2.0, 0.0, 1),  # a NaN end time is not accessible
    ([15.2, 15.6, 15.9, 16.1], 16.2, 0.25, 3),  # absolute times deep into a stream: the hold-back still applies
    ([0.5, 1.0], math.inf, 0.0, 2),
])
def test_accessible_word_count(end_times: list[float | None], now: float, hold_back: float, expected: int) -> None:
    assert accessible_word_count(end_times, now, hold_back) == expected


def test_accessible_word_count_accepts_tuples_and_ints() -> None:
    assert accessible_word_count((1, 2, 3), 3, 1) == 2


def test_hold_back_shifts_the_frontier_the_same_anywhere_on_the_time_line() -> None:
    """Same relative layout at 0 s and at 15 s gives the same count (reference bug: only held back before 15 s)."""
    relative_ends = [0.4, 0.9, 1.3, 1.55]
    for offset in (0.0, 15.0, 600.0):
        absolute_ends = [offset + end for end in relative_ends]
        assert accessible_word_count(absolute_ends, offset + 1.6, 0.25) == 3


def test_matches_naive_reference_random() -> None:
    rng = random.Random(3)
    for _ in range(300):
        ends = sorted(rng.uniform(0, 10) for _ in range(rng.randint(0, 8)))
        times: list[float | None] = [None if rng.random() < 0.1 else end for end in ends]
        now, hold_back = rng.uniform(0, 11), rng.choice([0.0, 0.25, 0.5, 1.0])
        expected = 0
        while expected < len(times) and (times[expected] is None or times[expected] <= now - hold_back):
            expected += 1
        result = accessible_word_count(times, now, hold_back)
        assert result == expected
        assert result <= accessible_word_count(times, now, 0.0)  # a hold-back never adds words


@pytest.mark.parametrize("hold_back", [-0.001, -1.0, float("nan")])
def test_invalid_hold_back(hold_back: float) -> None:
    with pytest.raises(ValueError, match="hold_back"):
        accessible_word_count([1.0], 2.0, hold_back)


def test_nan_now_rejected() -> None:
    with pytest.raises(ValueError, match="now"):
        accessible_word_count([1.0], float("nan"), 0.0)
