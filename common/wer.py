"""Word error rate: the edit distance between word lists, and the normalisation both sides get first (lower case, no
punctuation), shared by the recogniser benchmark, STAR's evaluation and the offline cascade row of `simulagents eval`."""
from __future__ import annotations

import re
from collections.abc import Sequence


def normalise_words(text: str) -> list[str]:
    """Lower-cased words without punctuation (letters, digits and inner apostrophes or hyphens kept)."""
    return re.findall(r"\w+(?:['’-]\w+)*", text.lower())


def word_errors(hypothesis: Sequence[str], reference: Sequence[str]) -> int:
    """Levenshtein distance between word lists (substitutions, insertions, deletions)."""
    previous = list(range(len(reference) + 1))
    for i, word in enumerate(hypothesis, 1):
        current = [i]
        for j, target in enumerate(reference, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != target)))
        previous = current
    return previous[-1]


def word_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Corpus WER in percent: all word errors over all reference words, each line normalised first."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references: they must be parallel")
    errors = sum(word_errors(normalise_words(h), normalise_words(r)) for h, r in zip(hypotheses, references))
    words = sum(len(normalise_words(r)) for r in references)
    if words == 0:
        raise ValueError("the references have no words; WER is undefined")
    return 100.0 * errors / words
