"""Tests for policies.waitk: the wait-k schedule g(t) and the target budget it gives, at r = 1 and other rates."""

from __future__ import annotations

import pytest

from policies.waitk import units_read_before, waitk_target_budget


@pytest.mark.parametrize("words_read, k, expected", [
    (0, 1, 0), (1, 1, 1), (5, 1, 5),
    (0, 3, 0), (1, 3, 0), (2, 3, 0), (3, 3, 1), (4, 3, 2), (10, 3, 8),
    (6, 7, 0), (7, 7, 1),
])
def test_budget_while_reading(words_read: int, k: int, expected: int) -> None:
    assert waitk_target_budget(words_read, k, source_finished=False) == expected


@pytest.mark.parametrize("words_read, k", [(0, 1), (2, 5), (10, 3)])
def test_unlimited_once_source_finished(words_read: int, k: int) -> None:
    assert waitk_target_budget(words_read, k, source_finished=True) is None


def test_budget_grows_by_one_per_word_after_the_lag() -> None:
    budgets = [waitk_target_budget(n, 4, False) for n in range(12)]
    assert budgets[:5] == [0, 0, 0, 0, 1]  # the first target unit after the 4th word
    assert all(later - earlier == 1 for earlier, later in zip(budgets[4:], budgets[5:]))  # type: ignore[operator]


@pytest.mark.parametrize("k", [0, -1])
def test_invalid_k(k: int) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        waitk_target_budget(3, k, False)


def test_negative_words_read() -> None:
    with pytest.raises(ValueError, match="words_read"):
        waitk_target_budget(-1, 2, False)


@pytest.mark.parametrize("rate", [0.5, 0.7, 1.0, 1.3, 1.8, 2.3, 3.0])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_budget_is_the_inverse_of_the_schedule(rate: float, k: int) -> None:
    """The budget after w words is the largest t whose g(t) <= w, counted by brute force over g."""
    schedule = [units_read_before(t, k, rate) for t in range(1, 400)]
    assert schedule == sorted(schedule)
    for words_read in range(80):
        expected = sum(1 for needed in schedule if needed <= words_read)
        assert waitk_target_budget(words_read, k, False, rate) == expected, words_read


def test_characters_come_at_the_rate_per_word_after_the_lag() -> None:
    """r = 1.8 (Chinese characters per English word): 1, 3, 5, 7, 9 units after words 3..7, 1.8 per word on average,
    where r = 1 would give 1, 2, 3, 4, 5."""
    assert [waitk_target_budget(n, 3, False, 1.8) for n in range(8)] == [0, 0, 0, 1, 3, 5, 7, 9]
    assert waitk_target_budget(3 + 99, 3, False, 1.8) == 180
    assert [units_read_before(t, 3, 1.8) for t in range(1, 6)] == [3, 4, 4, 5, 5]


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_invalid_rate(rate: float) -> None:
    with pytest.raises(ValueError, match="target units per source unit must be > 0"):
        waitk_target_budget(3, 2, False, rate)
