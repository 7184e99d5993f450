"""The paper's models' real chat formats, without their weights: tiny checkpoints whose tokenizers carry Gemma-4's
and Qwen3's control tokens and documented template behaviour (tests/tiny_checkpoints.py) go through the same prompt
builder and translators as the real models. One <bos>; thinking off; the same prompt suffix in the first step and
every later one; a thought marker the model starts to write never reaches the translation."""
import pytest
import torch

from agents.systems.config import AlignAttConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator, WaitkTranslator
from backends.heads import HeadSet
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm
from common.stream import SourceWord
from observed import observe

WORDS = "the committee approved the new budget".split()
PREFIX = "Der Ausschuss"

# What the documented templates put between the user turn and the answer when thinking is off.
ANSWER_HEADERS = {
    "gemma4": "<|turn>model\n<|channel>thought\n<channel|>",
    "qwen3": "<|im_start|>assistant\n<think>\n\n</think>\n\n",
}
THOUGHT_MARKERS = {"gemma4": "<|channel>", "qwen3": "<think>"}
REASONING_ARCHITECTURES = tuple(ANSWER_HEADERS)


@pytest.fixture(scope="module", params=REASONING_ARCHITECTURES)
def arch(request):
    return request.param


@pytest.fixture(scope="module")
def tokenizer(arch, tiny_checkpoint):
    return load_causal_lm(str(tiny_checkpoint(arch)))[1]


def test_one_bos_at_the_start_and_none_added_by_tokenization(arch, tokenizer):
    prompt = PromptBuilder(tokenizer, "en", "de").build(WORDS, PREFIX)
    if arch == "gemma4":  # the template writes <bos>; tokenizing the text must not add a second one
        assert prompt.token_ids[0] == tokenizer.bos_token_id
        assert prompt.token_ids.count(tokenizer.bos_token_id) == 1
    else:  # Qwen3 has no beginning-of-sequence token in its prompts
        assert not prompt.text.startswith(tokenizer.bos_token)


def test_thinking_is_off_and_the_answer_header_closes_the_thought_block(arch, tokenizer):
    builder = PromptBuilder(tokenizer, "en", "de")
    first = builder.build(WORDS).text
    assert first.endswith(ANSWER_HEADERS[arch])
    assert "<|think|>" not in first  # Gemma-4 thinks only when <|think|> opens the system turn
    assert first.count(THOUGHT_MARKERS[arch]) == 1  # only the empty, closed block of the header
    thinking = tokenizer.apply_chat_template(builder.messages(" ".join(WORDS)), tokenize=False,
                                             add_generation_prompt=True, enable_thinking=True)
    assert not thinking.endswith(ANSWER_HEADERS[arch]), "the flag must matter, or this test checks nothing"


def test_later_steps_extend_the_first_steps_prompt_token_for_token(arch, tokenizer):
    builder = PromptBuilder(tokenizer, "en", "de")
    first, later = builder.build(WORDS), builder.build(WORDS, PREFIX)
    assert later.text == first.text + PREFIX
    assert later.token_ids[: len(first.token_ids)] == first.token_ids
    assert tokenizer.decode(later.token_ids[len(first.token_ids):]) == PREFIX
    assert later.source_positions.tolist() == first.source_positions.tolist()


def test_a_continued_model_turn_would_lose_gemma4s_empty_thought_block(arch, tokenizer):
    """Why the builder appends the prefix to the generation prompt instead of continuing an unfinished assistant
    message: Gemma-4's template renders the empty thought block only in the generation prompt."""
    builder = PromptBuilder(tokenizer, "en", "de")
    messages = [*builder.messages(" ".join(WORDS)), {"role": "assistant", "content": PREFIX}]
    continued = tokenizer.apply_chat_template(messages, tokenize=False, continue_final_message=True,
                                              enable_thinking=False)
    assert continued.endswith(PREFIX)
    if arch == "gemma4":
        assert not continued.endswith(ANSWER_HEADERS[arch] + PREFIX)
    else:  # Qwen3 renders its last assistant turn with the same empty block: both ways agree
        assert continued == builder.build(WORDS, PREFIX).text


def _force_first_token(model, prompt_ids: list[int], token_id: int) -> None:
    """Point the output row of `token_id` at the current winner's, doubled: the model now writes it first."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt_ids])).logits[0, -1]
        winner = int(torch.argmax(logits))
        assert logits[winner] > 0
        model.get_output_embeddings().weight[token_id] = 2 * model.get_output_embeddings().weight[winner]
        assert int(torch.argmax(model(torch.tensor([prompt_ids])).logits[0, -1])) == token_id


@pytest.mark.parametrize("system", ["waitk", "alignatt"])
def test_a_forced_thought_marker_never_reaches_the_translation(arch, tiny_checkpoint, system):
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(arch)))
    marker = THOUGHT_MARKERS[arch]
    marker_id = tokenizer.convert_tokens_to_ids(marker)
    lm = CausalLM(model, tokenizer)
    assert marker_id in lm.stop_token_ids
    # Decoding alone would hide a special marker (Gemma-4's) and go on with the thought prose: only stopping helps.
    assert (marker in lm.decode([marker_id])) == (arch == "qwen3")
    prompt = PromptBuilder(tokenizer, "en", "de").build(WORDS)
    _force_first_token(model, prompt.token_ids, marker_id)
    if system == "waitk":
        translator = WaitkTranslator(lm, WaitkConfig(k=1000, final_max_new_tokens=20))
    else:
        translator = AlignAttTranslator(lm, AlignAttConfig(final_max_new_tokens=20), HeadSet(((0, 0), (1, 1))))
    seen = observe(translator)
    translator.flush([SourceWord(w) for w in WORDS])
    assert marker not in translator.target_text and "thought" not in translator.target_text
    assert translator.target_text == ""
    assert seen.steps[-1].draft.finished and seen.steps[-1].draft.tokens == []
