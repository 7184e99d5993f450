"""`banned_first_tokens` of the transformers backend's drafts (the retry of a final draft after a degenerate cut,
agents/systems/llm.py): against a full forward of the prompt as the independent reference, the first token is the
best of the others and the rest is the greedy continuation of the prompt plus that token."""
import pytest
import torch

from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm

SOURCES = ["the committee approved the new budget".split(), "after a long debate in the regional parliament".split()]


@pytest.fixture(scope="module", params=["qwen3", "gemma4"])
def lm(request, tiny_checkpoint):
    return CausalLM(*load_causal_lm(str(tiny_checkpoint(request.param))))


@torch.inference_mode()
def ranked_first_tokens(lm: CausalLM, prompt_ids: list[int]) -> list[int]:
    """Token ids by the full forward's last-row logits, best first (the reference, no cache, no session)."""
    logits = lm.model(torch.tensor([prompt_ids])).logits[0, -1]
    return torch.argsort(logits, descending=True, stable=True).tolist()


def test_the_first_token_is_the_best_of_the_others_and_the_rest_is_greedy(lm):
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    session = lm.session(None)
    for words in SOURCES:
        prompt_ids = builder.build(words, "").token_ids
        ranked = [t for t in ranked_first_tokens(lm, prompt_ids) if t not in lm.stop_token_ids]
        free = session.draft(prompt_ids, 8, capture=False)
        assert free.tokens[0] == ranked[0]
        for banned in ([ranked[0]], ranked[:3]):
            draft = session.draft(prompt_ids, 8, capture=False, banned_first_tokens=banned)
            assert draft.tokens[0] == ranked[len(banned)]
            rest = session.draft(prompt_ids + draft.tokens[:1], 7, capture=False)
            assert draft.tokens[1:] == rest.tokens and draft.finished == rest.finished
        # Only the first token is constrained: the ban leaves a draft that starts elsewhere free to use the token.
        assert session.draft(prompt_ids, 8, capture=False).tokens == free.tokens


def test_a_banned_first_token_with_capture_keeps_every_row(lm):
    heads = [(0, 0), (1, 1)]
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    prompt = builder.build(SOURCES[0], "")
    session = lm.session(heads)
    first = session.draft(prompt.token_ids, 6, capture=False).tokens[0]
    draft = session.draft(prompt.token_ids, 6, banned_first_tokens=[first])
    assert draft.tokens[0] != first
    assert draft.source_attention(prompt.source_positions).shape[0] == len(draft.tokens)
