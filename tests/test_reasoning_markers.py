"""Reasoning models' thought markers never reach a translation: the chat template is asked for no thinking, and a
draft ends at any special or control token (Qwen3's `<think>`, Gemma-4's `<|channel>`), on a tiny checkpoint whose
output layer is set so that it writes the marker first (a stand-in for a model that starts to think)."""
import pytest
import torch

from agents.systems.config import WaitkConfig
from agents.systems.llm import WaitkTranslator
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm
from common.stream import SourceWord
from observed import observe

WORDS = "the committee approved the new budget".split()

# A Qwen3-style template: the empty thought block is added only when enable_thinking is false.
THINKING_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- endif -%}{%- endif -%}"
)


@pytest.mark.parametrize("marker", ["<think>", "<|channel>"])
def test_a_draft_that_starts_thinking_ends_before_the_marker(tiny_checkpoint, marker):
    model, tokenizer = load_causal_lm(str(tiny_checkpoint("qwen3")))
    tokenizer.add_tokens([marker])  # added as a plain (not special) token, as Qwen3 ships <think>
    model.resize_token_embeddings(len(tokenizer))
    lm = CausalLM(model, tokenizer)
    marker_id = tokenizer.convert_tokens_to_ids(marker)
    assert marker_id in lm.stop_token_ids
    prompt = PromptBuilder(tokenizer, "en", "de").build(WORDS)
    with torch.no_grad():
        logits = model(torch.tensor([prompt.token_ids])).logits[0, -1]
        first = int(torch.argmax(logits))
        assert logits[first] > 0
        output = model.get_output_embeddings().weight
        output[marker_id] = 2 * output[first]  # the marker now wins the first step
        assert int(torch.argmax(model(torch.tensor([prompt.token_ids])).logits[0, -1])) == marker_id
    translator = WaitkTranslator(lm, WaitkConfig(k=1000, final_max_new_tokens=20))
    seen = observe(translator)
    translator.flush([SourceWord(w) for w in WORDS])
    assert marker not in translator.target_text
    assert seen.steps[-1].draft.finished and seen.steps[-1].draft.tokens == []


def test_the_chat_template_is_asked_for_no_thinking(tiny_checkpoint):
    _, tokenizer = load_causal_lm(str(tiny_checkpoint("qwen3")))
    tokenizer.chat_template = THINKING_TEMPLATE
    text = PromptBuilder(tokenizer, "en", "de").render("the committee", "")
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
