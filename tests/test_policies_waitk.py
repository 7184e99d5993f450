"""Tests for policies.waitk: the wait-k target budget."""

from __future__ import annotations

import pytest

from policies.waitk import waitk_target_budget


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
