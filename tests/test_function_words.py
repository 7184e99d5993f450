"""The function-word lists that tell a draft's language (policies/function_words.py)."""
import pytest

from policies.function_words import FUNCTION_WORDS, exclusive_words, has_function_words, language_evidence


@pytest.mark.parametrize("lang, other", [("en", "de"), ("de", "en"), ("en", "it"), ("cs", "en"), ("en", "cs")])
def test_a_word_of_both_languages_is_evidence_for_neither(lang, other):
    mine, theirs = exclusive_words(lang, other), exclusive_words(other, lang)
    assert not mine & theirs
    shared_words = FUNCTION_WORDS[lang] & FUNCTION_WORDS[other]
    assert mine | theirs | shared_words == FUNCTION_WORDS[lang] | FUNCTION_WORDS[other]
    shared = {"en-de": "so", "de-en": "was", "en-it": "a", "cs-en": "to", "en-cs": "i"}[f"{lang}-{other}"]
    assert shared in FUNCTION_WORDS[lang] and shared in FUNCTION_WORDS[other] and shared not in mine | theirs


def test_every_listed_word_is_a_unit_as_the_guard_normalises_it():
    for words in FUNCTION_WORDS.values():
        assert all(word == word.casefold() and word.isalpha() for word in words)


def test_language_evidence_counts_words_of_one_language_only():
    assert language_evidence("so we are going to the".split(), "en", "de") == (5, 0)  # "so" is German too
    assert language_evidence("also wir sind heute".split(), "en", "de") == (0, 3)  # "also" is English too
    assert language_evidence(["我", "们", "we"], "en", "zh") == (1, 2)  # a Chinese target: its script
    assert language_evidence("so we are".split(), "en", "fr") == (3, 0)  # no French list: nothing counts for it
    assert not has_function_words("fr") and has_function_words("zh-Hans") and has_function_words("de")
