"""q/k capture and qk-fast replay on tiny checkpoints of every supported architecture, against independent
references: stock SDPA (capture must be invisible) and eager attention (replay must match)."""
import numpy as np
import pytest
import torch

from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.hf.reference import eager_source_attention
from alignatt_parity import assert_replay_matches_reference
from backends.models import load_causal_lm

ARCHITECTURES = ["gemma4", "gemma3", "qwen3", "qwen2", "llama"]
SOURCE = ("the committee approved the new budget for schools and hospitals after a long debate in the "
          "regional parliament last week").split()


def all_heads(model):
    return [(layer, head) for layer in range(model.config.num_hidden_layers)
            for head in range(model.config.num_attention_heads)]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def tiny_lm(request, tiny_checkpoint):
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(request.param)))
    return request.param, CausalLM(model, tokenizer)


def test_capture_leaves_logits_and_greedy_tokens_unchanged(tiny_lm):
    arch, lm = tiny_lm
    prompt = PromptBuilder(lm.tokenizer, "en", "de").build(SOURCE, "der Ausschuss").token_ids
    with torch.inference_mode():
        captured = lm.model(torch.tensor([prompt]), alignatt_recorder=None).logits
        lm.model.set_attn_implementation("sdpa")
        stock = lm.model(torch.tensor([prompt])).logits
        lm.model.set_attn_implementation("alignatt_sdpa")
    assert torch.equal(captured, stock), arch
    with_capture = lm.session(all_heads(lm.model)).draft(prompt, 12)
    without = lm.session(None).draft(prompt, 12, capture=False)
    assert with_capture.tokens == without.tokens
    assert len(with_capture.tokens) > 0


def test_replay_equals_eager_attention_and_decisions_agree(tiny_lm, tiny_checkpoint):
    # In float64: in float32 the captured SDPA forward and the eager reference forward drift apart by up to 1.2e-4
    # on the tiny Gemma-4's last layer before any replay; in float64 only the replay's float32 arithmetic is left.
    arch, _ = tiny_lm
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(arch)))
    lm = CausalLM(model.to(torch.float64), tokenizer)
    heads = all_heads(lm.model)
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    session = lm.session(heads)
    # Successive steps share the cached prefix (source grows, target prefix changes): replay must stay exact.
    # (Prefixes after which no tiny model ends its draft at once: an empty draft would compare nothing.)
    for words, prefix in [(SOURCE[:9], ""), (SOURCE[:14], "der Ausschuss"), (SOURCE, "der Ausschuss hat")]:
        prompt = builder.build(words, prefix)
        window = getattr(lm.model.config, "sliding_window", None)
        if arch in ("gemma4", "gemma3", "qwen3"):
            assert len(prompt.token_ids) > 2 * window, "prompt must cross the sliding window"
        draft = session.draft(prompt.token_ids, 10)
        assert draft.tokens
        replayed = draft.source_attention(prompt.source_positions)
        reference = eager_source_attention(
            lm.model, prompt.token_ids + draft.tokens, heads, list(draft.positions), prompt.source_positions)
        assert replayed.shape == reference.shape == (len(draft.tokens), len(heads), len(prompt.source_positions))
        assert_replay_matches_reference(replayed, reference, prompt)


def test_prefix_reuse_gives_the_same_draft_as_a_fresh_session(tiny_lm):
    _, lm = tiny_lm
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    reused = lm.session(all_heads(lm.model)[:3])
    for count in (6, 7, 11):
        prompt = builder.build(SOURCE[:count], "der")
        first = reused.draft(prompt.token_ids, 8)
        fresh = lm.session(None).draft(prompt.token_ids, 8, capture=False)
        assert first.tokens == fresh.tokens
    assert len(reused.cached_ids) >= len(prompt.token_ids)


def test_source_map_covers_every_word_in_order(tiny_lm):
    _, lm = tiny_lm
    prompt = PromptBuilder(lm.tokenizer, "en", "de").build(["Hello,", "world,", "how", "are", "you?"], "Hallo")
    assert list(np.unique(prompt.source_token_word)) == [0, 1, 2, 3, 4]
    assert np.all(np.diff(prompt.source_positions) == 1), "the source span is contiguous"
    encoding = lm.tokenizer(prompt.text, add_special_tokens=False)
    assert encoding["input_ids"] == prompt.token_ids
    source_text = lm.tokenizer.decode([prompt.token_ids[p] for p in prompt.source_positions])
    assert "Hello, world, how are you?" in source_text


def test_a_stale_draft_refuses_to_replay(tiny_lm):
    _, lm = tiny_lm
    prompt = PromptBuilder(lm.tokenizer, "en", "de").build(SOURCE[:5], "")
    session = lm.session(all_heads(lm.model)[:2])
    first = session.draft(prompt.token_ids, 3)
    first.source_attention(prompt.source_positions)
    session.draft(prompt.token_ids, 3)
    with pytest.raises(RuntimeError, match="drafted again"):
        first.source_attention(prompt.source_positions)


def test_the_eager_reference_of_an_empty_draft_is_empty(tiny_lm):
    """A draft that stops at once has no rows: the reference says so instead of failing on an empty index (the
    first GPU run's random model stopped at once, and the parity check died on `tensor[[]]`)."""
    _, lm = tiny_lm
    prompt = PromptBuilder(lm.tokenizer, "en", "de").build(SOURCE, "")
    heads = all_heads(lm.model)[:3]
    reference = eager_source_attention(lm.model, prompt.token_ids, heads, [], prompt.source_positions)
    assert reference.shape == (0, 3, len(prompt.source_positions))
