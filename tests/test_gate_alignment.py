"""The gold supported prefix of benchmarks/gate_alignment.py: which target words a source prefix supports under a
word alignment, and how emitted characters become emitted words."""
import numpy as np
import pytest

from backends.hf.calibrate import locate_words, whitespace_word_spans
from benchmarks.gate_alignment import (Cut, cut_points, head_spec, separation_auc, summarise, supported_prefix,
                                      token_labels, words_within)

TARGET = "Was ist also unsere Lösung?"
# The aligner's words (punctuation apart) and its links: "So" (source 0) -> "also", "solution" (source 4) -> "Lösung".
TARGET_WORDS = ["Was", "ist", "also", "unsere", "Lösung", "?"]
GOLD = {2: {0}, 4: {4}}


def test_the_supported_prefix_ends_before_the_first_word_aligned_to_unread_source():
    spans = locate_words(TARGET, TARGET_WORDS)
    whitespace = whitespace_word_spans(TARGET)
    assert supported_prefix(GOLD, spans, whitespace, read=0) == 2  # "also" needs "So"
    assert supported_prefix(GOLD, spans, whitespace, read=1) == 4  # "Lösung" needs "solution"
    assert supported_prefix(GOLD, spans, whitespace, read=4) == 4
    assert supported_prefix(GOLD, spans, whitespace, read=5) == 5  # every word (and "Lösung?" is one word)


def test_a_word_is_supported_only_when_all_its_aligned_source_words_are_read():
    spans = locate_words(TARGET, TARGET_WORDS)
    whitespace = whitespace_word_spans(TARGET)
    gold = {2: {0, 3}}  # "also" aligned to source words 0 and 3
    assert supported_prefix(gold, spans, whitespace, read=3) == 2
    assert supported_prefix(gold, spans, whitespace, read=4) == 5


def test_emitted_characters_count_whole_words_only():
    whitespace = whitespace_word_spans(TARGET)
    assert words_within(whitespace, 0) == 0
    assert words_within(whitespace, len("Was ist al")) == 2
    assert words_within(whitespace, len("Was ist also")) == 3
    assert words_within(whitespace, len(TARGET)) == 5


def test_cut_points_leave_the_whole_source_out_and_spread_evenly():
    assert cut_points(1, 6) == []
    assert cut_points(4, 6) == [1, 2, 3]
    points = cut_points(30, 6)
    assert len(points) == 6 and points[0] == 1 and max(points) <= 29 and points == sorted(set(points))


def test_summarise_counts_words_past_and_short_of_the_supported_prefix():
    cuts = [Cut(0, 3, committed=2, supported=3, emitted={"p": 5}), Cut(0, 4, committed=3, supported=5, emitted={"p": 4})]
    summary = summarise(cuts, "p")
    assert summary["emitted"] == (3 + 1) / 2
    assert summary["over_words"] == (2 + 0) / 2 and summary["over_rate"] == 0.5
    assert summary["under_words"] == (0 + 1) / 2 and summary["exact"] == 0.0


def test_head_specs_name_a_file_and_an_optional_top_k():
    assert head_spec("shipped=backends/heads/a.json") == ("shipped", "backends/heads/a.json", 8)
    assert head_spec("four=C:/heads/a.json:4") == ("four", "C:/heads/a.json", 4)
    with pytest.raises(SystemExit, match="NAME=FILE"):
        head_spec("backends/heads/a.json")


def test_draft_tokens_are_labelled_inside_the_supported_prefix_on_the_next_word_or_not_at_all():
    whitespace = whitespace_word_spans(TARGET)  # Was | ist | also | unsere | Lösung?
    tokens = [(0, 3), (3, 7), (7, 12), (12, 15), (15, 19), (19, 26)]  # " also" spans its space; "uns"+"ere"
    assert token_labels(tokens, whitespace, supported=2) == [True, True, False, None, None, None]
    assert token_labels(tokens, whitespace, supported=0) == [False, None, None, None, None, None]
    assert token_labels(tokens, whitespace, supported=5) == [True] * 6


def test_separation_auc_is_the_share_of_pairs_ordered_right_with_ties_as_half():
    assert separation_auc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert separation_auc([0.1], [0.9]) == 0.0
    assert separation_auc([0.5, 0.9], [0.5]) == 0.75
    assert np.isnan(separation_auc([], [0.5]))
