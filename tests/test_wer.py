"""The WER arithmetic of `common.wer` (the recogniser benchmark, STAR's evaluation and the offline cascade row use
it) against an independent recursive Levenshtein, and its text normalisation."""
from __future__ import annotations

import itertools
import random
from functools import lru_cache

import pytest

from common.wer import normalise_words as normalise
from common.wer import word_error_rate, word_errors


def recursive_distance(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    @lru_cache(maxsize=None)
    def distance(i: int, j: int) -> int:
        if i == 0 or j == 0:
            return i + j
        return min(distance(i - 1, j) + 1, distance(i, j - 1) + 1, distance(i - 1, j - 1) + (a[i - 1] != b[j - 1]))
    return distance(len(a), len(b))


def test_word_errors_match_the_recursive_definition():
    rng = random.Random(7)
    vocabulary = ["a", "b", "c"]
    for length_a, length_b in itertools.product(range(5), repeat=2):
        a = [rng.choice(vocabulary) for _ in range(length_a)]
        b = [rng.choice(vocabulary) for _ in range(length_b)]
        assert word_errors(a, b) == recursive_distance(tuple(a), tuple(b)), (a, b)


def test_normalise_drops_case_and_punctuation_but_keeps_words_whole():
    assert normalise("Ano, pane předsedající! It's well-known (FR).") == [
        "ano", "pane", "předsedající", "it's", "well-known", "fr"]


def test_corpus_wer_counts_all_errors_over_all_reference_words():
    # 1 substitution in 4 words, then 1 deletion in 2 words: 2 / 6, not the mean of 25% and 50%.
    assert word_error_rate(["The cat sat down.", "hello"], ["the bat sat down", "Hello, world!"]) == \
        pytest.approx(100 * 2 / 6)
    with pytest.raises(ValueError, match="parallel"):
        word_error_rate(["a"], ["a", "b"])
