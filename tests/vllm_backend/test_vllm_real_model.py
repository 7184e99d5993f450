"""The embedded real model (Qwen2.5-Coder-0.5B-Instruct from the PyPI GGUF, Qwen2 attention) on vLLM with its
calibrated en-de heads: capture changes no greedy output (10 prompts), replay matches eager attention, and the same AlignAtt
translator code decides the same on the vLLM and transformers backends for 20 prompts."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from common.stream import SourceWord  # noqa: E402
from agents.systems.config import AlignAttConfig  # noqa: E402
from agents.systems.llm import AlignAttTranslator, resolve_heads  # noqa: E402
from backends.hf.lm import CausalLM  # noqa: E402
from backends.prompt import PromptBuilder  # noqa: E402
from backends.hf.reference import eager_source_attention  # noqa: E402
from backends.vllm.lm import VLLMCausalLM  # noqa: E402
from test_real_model import SENTENCES  # noqa: E402  (the real-model test sentences of the transformers backend)
from observed import observe

pytestmark = pytest.mark.real_model

# Two partial sources per sentence (half and all but the last word): 20 policy steps.
SOURCES = [words[:cut] for words in (s.split() for s in SENTENCES) for cut in (len(words) // 2, len(words) - 1)]


@pytest.fixture(scope="module")
def backends_pair(embedded_model_path):
    config = AlignAttConfig(model="embedded", border=-2)
    heads = resolve_heads(config)
    plain = VLLMCausalLM.load("embedded", max_model_len=1024)
    builder = PromptBuilder(plain.tokenizer, "en", "de")
    without_observer = [plain.session(None).draft(builder.build(w, "").token_ids, 16, capture=False).tokens
                        for w in SOURCES[::2]]
    plain.close()
    vllm_lm = VLLMCausalLM.load("embedded", max_model_len=1024, capture_heads=heads.heads)
    yield config, heads, CausalLM.load("embedded"), vllm_lm, without_observer
    vllm_lm.close()


def test_capture_changes_no_greedy_output(backends_pair):
    _, _, _, vllm_lm, without_observer = backends_pair
    builder = PromptBuilder(vllm_lm.tokenizer, "en", "de")
    with_observer = [vllm_lm.session(None).draft(builder.build(w, "").token_ids, 16, capture=False).tokens
                     for w in SOURCES[::2]]
    assert with_observer == without_observer


def test_replay_matches_eager_attention_of_the_real_model(backends_pair):
    _, heads, hf_lm, vllm_lm, _ = backends_pair
    builder = PromptBuilder(vllm_lm.tokenizer, "en", "de")
    for words in SOURCES[:4]:
        prompt = builder.build(words, "")
        draft = vllm_lm.session(heads.heads).draft(prompt.token_ids, 12)
        replayed = draft.source_attention(prompt.source_positions)
        reference = eager_source_attention(hf_lm.model, prompt.token_ids + draft.tokens, heads.heads,
                                           list(draft.positions), prompt.source_positions)
        assert (replayed - reference).abs().max().item() < 1e-4


def test_alignatt_decisions_identical_to_the_transformers_backend_on_20_prompts(backends_pair):
    config, heads, hf_lm, vllm_lm, _ = backends_pair
    on_hf, on_vllm = AlignAttTranslator(hf_lm, config, heads), AlignAttTranslator(vllm_lm, config, heads)
    seen_hf, seen_vllm = observe(on_hf), observe(on_vllm)
    accepted_somewhere = rejected_somewhere = 0
    for words in SOURCES:
        source = [SourceWord(w, float(i)) for i, w in enumerate(words)]
        emissions = []
        for translator in (on_hf, on_vllm):
            translator.reset()
            emissions.append(translator.revise(source))
        hf_step, vllm_step = seen_hf.steps[-1], seen_vllm.steps[-1]
        assert vllm_step.draft.tokens == hf_step.draft.tokens
        assert vllm_step.scan.accepted_tokens == hf_step.scan.accepted_tokens
        assert [d.source_word for d in vllm_step.scan.decisions] == [d.source_word for d in hf_step.scan.decisions]
        assert [d.failure for d in vllm_step.scan.decisions] == [d.failure for d in hf_step.scan.decisions]
        assert emissions[0] == emissions[1]
        accepted_somewhere += hf_step.scan.accepted_tokens > 0
        rejected_somewhere += hf_step.scan.accepted_tokens < len(hf_step.draft.tokens)
    assert accepted_somewhere > 0 and rejected_somewhere > 0, "the prompts exercise both acceptance and rejection"


def test_drafts_with_a_banned_first_token_equal_the_transformers_backend(backends_pair):
    """The retry of a final draft after a degenerate cut (agents/systems/llm.py) bans the token its cut part began
    with: vLLM takes the first token from one request's top log-probabilities, transformers masks its logits
    (tested against a full forward in tests/test_banned_first_tokens.py); both draft the same. A capturing draft
    with a ban (a segment's opening drafted again without the source's first word, on a live AlignAtt step) feeds
    the first token in the second request: its rows equal eager attention over the same tokens, the first one's
    included."""
    _, heads, hf_lm, vllm_lm, _ = backends_pair
    builder = PromptBuilder(vllm_lm.tokenizer, "en", "de")
    for words in SOURCES[:6]:
        prompt_ids = builder.build(words, "").token_ids
        greedy = hf_lm.session(None).draft(prompt_ids, 12, capture=False).tokens
        for banned in ([greedy[0]], greedy[:1] + greedy[2:4]):
            on_vllm = vllm_lm.session(heads.heads).draft(prompt_ids, 12, capture=False, banned_first_tokens=banned)
            on_hf = hf_lm.session(None).draft(prompt_ids, 12, capture=False, banned_first_tokens=banned)
            assert on_vllm.tokens == on_hf.tokens and on_vllm.tokens[0] not in banned
    for words in SOURCES[:3]:
        prompt = builder.build(words, "")
        banned = [hf_lm.session(None).draft(prompt.token_ids, 1, capture=False).tokens[0]]
        draft = vllm_lm.session(heads.heads).draft(prompt.token_ids, 12, banned_first_tokens=banned)
        assert draft.tokens == hf_lm.session(None).draft(prompt.token_ids, 12, capture=False,
                                                         banned_first_tokens=banned).tokens
        replayed = draft.source_attention(prompt.source_positions)
        reference = eager_source_attention(hf_lm.model, prompt.token_ids + draft.tokens, heads.heads,
                                           list(draft.positions), prompt.source_positions)
        assert replayed.shape[0] == len(draft.tokens) and (replayed - reference).abs().max().item() < 1e-4
