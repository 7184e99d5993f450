"""vLLM q/k capture on tiny random Gemma-4 (KV-shared layers, sliding windows), Gemma-3 and Qwen3 checkpoints,
against independent references: the same engine without the observer (greedy tokens and logprobs must be
bit-identical) and transformers' eager attention (replayed rows within 1e-4 in float32, same AlignAtt decisions)."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from vllm import SamplingParams, TokensPrompt  # noqa: E402

from alignatt_parity import assert_replay_matches_reference  # noqa: E402
from backends.prompt import PromptBuilder  # noqa: E402
from backends.hf.reference import eager_source_attention  # noqa: E402
from backends.models import load_causal_lm  # noqa: E402
from backends.vllm.lm import VLLMCausalLM  # noqa: E402

ARCHITECTURES = ["gemma4", "gemma3", "qwen3"]
SOURCE = ("the committee approved the new budget for schools and hospitals after a long debate in the "
          "regional parliament last week").split()
STEPS = [(SOURCE[:9], ""), (SOURCE[:14], "der"), (SOURCE, "der Ausschuss hat")]


def all_heads(config):
    return [(layer, head) for layer in range(config.num_hidden_layers) for head in range(config.num_attention_heads)]


def greedy_with_logprobs(lm: VLLMCausalLM, prompts: list[list[int]]):
    params = SamplingParams(temperature=0.0, max_tokens=12, logprobs=0, detokenize=False)
    outputs = lm.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    return [(list(o.outputs[0].token_ids), [next(iter(step.values())).logprob for step in o.outputs[0].logprobs])
            for o in outputs]


@pytest.fixture(scope="module", params=ARCHITECTURES)
def case(request, tiny_vllm_checkpoint):
    """(arch, transformers model, prompts, greedy outputs of an engine WITHOUT capture, engine WITH capture)."""
    arch = request.param
    path = str(tiny_vllm_checkpoint(arch))
    model, tokenizer = load_causal_lm(path)
    builder = PromptBuilder(tokenizer, "en", "de")
    prompts = [builder.build(words, prefix) for words, prefix in STEPS]
    plain = VLLMCausalLM.load(path, max_model_len=512)
    without_observer = greedy_with_logprobs(plain, [p.token_ids for p in prompts])
    plain.close()
    lm = VLLMCausalLM.load(path, max_model_len=512, capture_heads=all_heads(model.config))
    yield arch, model, prompts, without_observer, lm
    lm.close()


def test_capture_leaves_greedy_tokens_and_logprobs_bit_identical(case):
    arch, _, prompts, without_observer, lm = case
    assert lm.layouts, "capture is installed"
    with_observer = greedy_with_logprobs(lm, [p.token_ids for p in prompts])
    assert with_observer == without_observer, arch
    assert all(len(tokens) > 0 for tokens, _ in with_observer)


def test_replay_equals_eager_attention_and_decisions_agree(case):
    arch, model, prompts, _, lm = case
    heads = all_heads(model.config)
    session = lm.session(heads)
    window = getattr(model.config, "sliding_window", None)
    for prompt in prompts:
        if window:
            assert len(prompt.token_ids) > 2 * window, "prompt must cross the sliding window"
        draft = session.draft(prompt.token_ids, 10)
        plain = lm.session(None).draft(prompt.token_ids, 10, capture=False)
        # A random model may write a control token early, which ends a draft like the end of the turn does.
        assert draft.tokens == plain.tokens and draft.tokens and (len(draft.tokens) == 10 or draft.finished)
        replayed = draft.source_attention(prompt.source_positions)
        reference = eager_source_attention(
            model, prompt.token_ids + draft.tokens, heads, list(draft.positions), prompt.source_positions)
        assert replayed.shape == reference.shape == (len(draft.tokens), len(heads), len(prompt.source_positions))
        assert_replay_matches_reference(replayed, reference, prompt)


def test_kv_shared_layers_read_the_keys_of_the_layer_that_owns_the_kv(case):
    _, model, _, _, lm = case
    first_shared = model.config.num_hidden_layers - (getattr(model.config, "num_kv_shared_layers", 0) or 0)
    for layer, layout in lm.layouts.items():
        if layer < first_shared:
            assert layout.key_layer == layer
        else:  # Gemma-4: the last unshared layer of the same attention type
            same_type = [l for l in range(first_shared) if model.config.layer_types[l] == model.config.layer_types[layer]]
            assert layout.key_layer == same_type[-1]


def test_a_session_cannot_ask_for_heads_the_engine_does_not_capture(case):
    _, model, _, _, lm = case
    with pytest.raises(ValueError, match="not captured by this vLLM engine"):
        lm.session([(model.config.num_hidden_layers + 3, 0)])
