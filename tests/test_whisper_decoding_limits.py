"""The arithmetic around CTranslate2's Whisper decoder (no model): how long `max_length` must be for a token budget,
and how much preceding text goes into the decoder's prompt."""
from __future__ import annotations

import pytest

from backends.asr.whisper import MAX_CONTEXT_CHARACTERS, context_words, generation_max_length


def ctranslate2_new_tokens(max_length: int, prompt_length: int) -> int:
    """What CTranslate2 4.x decodes after a prompt (whisper.cc: min(max_length / 2, max_length - start step), the
    start step being the prompt's last position; measured with Whisper base: max_length 20 -> 10 tokens after the
    4-token task prompt, 40 -> 15 after a 26-token prompt with previous text)."""
    return min(max_length // 2, max_length - (prompt_length - 1))


@pytest.mark.parametrize("budget, prompt_length", [(8, 4), (24, 4), (88, 4), (30, 60), (200, 4), (10, 80)])
def test_the_whole_budget_can_be_decoded(budget, prompt_length):
    max_length = generation_max_length(budget, prompt_length, 448)
    assert ctranslate2_new_tokens(max_length, prompt_length) >= min(budget, 224)


def test_prompt_plus_budget_would_decode_only_half_of_it():
    """The fitted path's first length: 10 s of speech (88 tokens) stopped after 46 (tests/test_asr_whisper.py)."""
    assert ctranslate2_new_tokens(4 + 88, 4) == 46


def test_the_model_context_bounds_the_length():
    assert generation_max_length(400, 4, 448) == 448


def test_context_keeps_the_last_whole_words():
    assert context_words(" we trained one model ") == "we trained one model"
    long = " ".join(f"word{i}" for i in range(100))
    kept = context_words(long)
    assert len(kept) <= MAX_CONTEXT_CHARACTERS and long.endswith(kept)
    assert kept.split()[0] in long.split()  # no word cut in half
