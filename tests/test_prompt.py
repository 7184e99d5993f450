"""The prompt of Eq. (1) and its source map: layout, exact ids, and clear errors for unmappable tokenizers."""
import numpy as np
import pytest

from backends.prompt import PromptBuilder, PromptError, language_name, map_source_tokens
from backends.models import load_causal_lm


@pytest.fixture(scope="module", params=["qwen2", "gemma4"])
def tokenizer(request, tiny_checkpoint):
    return load_causal_lm(str(tiny_checkpoint(request.param)))[1]


def test_layout_is_system_source_instruction_then_target_prefix(tokenizer):
    builder = PromptBuilder(tokenizer, "en", "de")
    prompt = builder.build(["The", "cat", "sat."], "Die Katze")
    text = prompt.text
    source_at, instruction_at = text.index("The cat sat."), text.index(builder.instruction)
    assert text.index("German") < source_at < instruction_at < text.rindex("Die Katze")
    assert text.rstrip().endswith("Die Katze"), "the accepted prefix opens the assistant turn, to be continued"
    fresh = builder.build(["The", "cat"], "")
    assert not fresh.text.rstrip().endswith(builder.instruction), "an empty prefix still opens the assistant turn"


def test_instruction_before_the_source_leaves_only_the_template_and_target_after_it(tokenizer):
    """instruction_position="before_source": the instruction opens the user turn and the source map still covers
    exactly the source words; two steps whose source grew share every token before the changed word, and what
    follows the source is the chat template's closing and the target prefix only (not the instruction)."""
    builder = PromptBuilder(tokenizer, "en", "de", instruction_position="before_source")
    prompt = builder.build(["The", "cat", "sat", "on"], "Die Katze")
    text = prompt.text
    assert text.index("German") < text.index(builder.instruction) < text.index("The cat sat on") < text.rindex("Die")
    offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    mapped = "".join(text[offsets[p][0]:offsets[p][1]] for p in prompt.source_positions)
    assert mapped.strip() == "The cat sat on" and prompt.source_token_word.tolist()[-1] == 3
    grown = builder.build(["The", "cat", "sat", "on", "the", "mat."], "Die Katze")
    common = next(i for i, (a, b) in enumerate(zip(prompt.token_ids, grown.token_ids)) if a != b)
    assert common >= prompt.source_positions[-1], "the tokens before the last source word are reused"
    after_source = grown.text[grown.text.index("the mat.") + len("the mat."):]
    assert builder.instruction not in after_source and "Translate" not in after_source
    paper = PromptBuilder(tokenizer, "en", "de")  # Eq. (1): the instruction follows the source
    assert paper.instruction in paper.build(["The", "cat"], "").text.split("The cat", 1)[1]
    with pytest.raises(PromptError, match="instruction_position must be one of after_source, before_source"):
        PromptBuilder(tokenizer, "en", "de", instruction_position="system")


def test_source_map_is_computed_on_the_ids_fed_to_the_model(tokenizer):
    prompt = PromptBuilder(tokenizer, "en", "it").build(["Hello,", "world:", "3.5", "million", "(roughly)."], "")
    assert tokenizer(prompt.text, add_special_tokens=False)["input_ids"] == prompt.token_ids
    offsets = tokenizer(prompt.text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    start = prompt.text.index("Hello,")
    for position, word in zip(prompt.source_positions, prompt.source_token_word):
        token_start, token_end = offsets[position]
        assert token_end > start and token_start < start + len("Hello, world: 3.5 million (roughly).")
    assert sorted(set(prompt.source_token_word.tolist())) == [0, 1, 2, 3, 4]


def test_token_spanning_two_words_belongs_to_the_later_word():
    # The source "ab cd" starts at 10; tokens "a", "b c" (straddles both words), "d", then text after the source.
    words = ["ab", "cd"]
    positions, token_word = map_source_tokens([(0, 10), (10, 11), (11, 14), (14, 15), (15, 20)], words, 10)
    assert positions.tolist() == [1, 2, 3] and token_word.tolist() == [0, 1, 1]


def test_offsets_that_cannot_map_the_source_are_a_clear_error():
    with pytest.raises(PromptError, match="cannot map the source span"):
        map_source_tokens([(0, 0)] * 8, ["some", "words"], 3)


class FakeSlowTokenizer:
    """Stands in for a slow (Python) tokenizer: no offsets."""

    chat_template = "{{ messages }}"
    is_fast = False


def test_slow_tokenizer_and_missing_chat_template_are_clear_errors(tokenizer):
    with pytest.raises(PromptError, match="not a fast tokenizer"):
        PromptBuilder(FakeSlowTokenizer(), "en", "de")
    template, tokenizer.chat_template = tokenizer.chat_template, None
    try:
        with pytest.raises(PromptError, match="no chat template"):
            PromptBuilder(tokenizer, "en", "de")
    finally:
        tokenizer.chat_template = template


def test_bad_source_and_language_are_clear_errors(tokenizer):
    builder = PromptBuilder(tokenizer, "en", "de")
    with pytest.raises(PromptError, match="non-empty"):
        builder.build([], "")
    with pytest.raises(PromptError, match="non-empty"):
        builder.build(["two words"], "")
    with pytest.raises(PromptError, match="unknown language 'xx'"):
        language_name("xx")
    assert language_name("zh-CN") == "Chinese"
    assert isinstance(builder.build(["a"], "").source_positions, np.ndarray)
