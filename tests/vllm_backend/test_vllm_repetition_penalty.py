"""`repetition_penalty` on vLLM (its own SamplingParams penalty, prompt ids included) drafts as the transformers
backend does (tests/test_repetition_penalty.py holds that one to `model.generate`), on a tiny Qwen3: plain and
capturing drafts, a banned first token (a -inf logit bias under the penalty, then a second request), 1.0 as before."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from backends.hf.lm import CausalLM  # noqa: E402
from backends.prompt import PromptBuilder  # noqa: E402
from backends.models import load_causal_lm  # noqa: E402
from backends.vllm.lm import VLLMCausalLM  # noqa: E402

SOURCES = ["the committee approved the new budget".split(),
           "after a long debate in the regional parliament the committee approved the budget".split()]
HEADS = [(1, 0), (3, 2)]
BUDGET = 12


@pytest.fixture(scope="module")
def pair(tiny_vllm_checkpoint):
    """(transformers backend, capturing vLLM engine) on the same tiny Qwen3, one engine for the module."""
    path = str(tiny_vllm_checkpoint("qwen3"))
    engine = VLLMCausalLM.load(path, max_model_len=512, capture_heads=HEADS)
    yield CausalLM(*load_causal_lm(path)), engine
    engine.close()


def test_penalised_drafts_equal_the_transformers_backend(pair):
    hf_lm, engine = pair
    hf, tokenizer = hf_lm.session(None), hf_lm.tokenizer
    builder = PromptBuilder(tokenizer, "en", "de")
    changed = 0
    for words in SOURCES:
        prompt = builder.build(words, "")
        plain = engine.session(None).draft(prompt.token_ids, BUDGET, capture=False)
        assert plain.tokens == engine.session(None).draft(prompt.token_ids, BUDGET, capture=False,
                                                          repetition_penalty=1.0).tokens
        for penalty in (1.05, 2.0):
            expected = hf.draft(prompt.token_ids, BUDGET, capture=False, repetition_penalty=penalty)
            for session, capture in ((engine.session(None), False), (engine.session(HEADS), True)):
                draft = session.draft(prompt.token_ids, BUDGET, capture=capture, repetition_penalty=penalty)
                assert (draft.tokens, draft.finished) == (expected.tokens, expected.finished), (penalty, capture)
                if capture:
                    assert draft.source_attention(prompt.source_positions).shape[0] == len(draft.tokens)
            changed += penalty == 2.0 and expected.tokens != plain.tokens
            # The penalised draft's first token banned, then also the best of the others.
            ranked = expected.tokens[:1]
            for banned in (ranked, ranked + hf.draft(prompt.token_ids, 1, capture=False, banned_first_tokens=ranked,
                                                     repetition_penalty=penalty).tokens):
                expected_banned = hf.draft(prompt.token_ids, BUDGET, capture=False, banned_first_tokens=banned,
                                           repetition_penalty=penalty)
                draft = engine.session(HEADS).draft(prompt.token_ids, BUDGET, banned_first_tokens=banned,
                                                    repetition_penalty=penalty)
                assert draft.tokens[0] not in banned
                assert (draft.tokens, draft.finished) == (expected_banned.tokens, expected_banned.finished)
    assert changed, "the strong penalty changes a draft (else this test shows nothing)"


def test_a_bad_penalty_is_refused_with_the_fix(pair):
    hf_lm, engine = pair
    prompt_ids = PromptBuilder(hf_lm.tokenizer, "en", "de").build(SOURCES[0], "").token_ids
    for penalty in (0.5, float("nan")):
        with pytest.raises(ValueError, match=r"repetition_penalty must be a finite number >= 1.0.*pass 1.0"):
            engine.session(None).draft(prompt_ids, BUDGET, capture=False, repetition_penalty=penalty)
