"""vLLM's prefix caching skips computing a cached prefix, so its keys are never seen by the capture op: the engine
must either hold them already (this stream's previous prompt) or recompute the prompt without reading the cache.
Checked on a tiny Qwen3 against transformers' eager attention."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from backends.prompt import PromptBuilder  # noqa: E402
from backends.hf.reference import eager_source_attention  # noqa: E402

SOURCE = ("the committee approved the new budget for schools and hospitals after a long debate in the "
          "regional parliament last week").split()
OTHER = "in this talk I will briefly introduce our work on attention heads in large language models".split()


def test_prefix_cache_hits_replay_exactly_with_or_without_captured_keys(tiny_engine):
    heads = [(1, 0), (3, 2), (3, 3)]
    model, tokenizer, lm = tiny_engine("qwen3", heads, enable_prefix_caching=True)
    builder = PromptBuilder(tokenizer, "en", "de")
    stream_a, stream_b = lm.session(heads), lm.session(heads)
    steps = [(stream_a, SOURCE[:12], ""), (stream_a, SOURCE[:12], "der Ausschuss"),  # hit on A's own keys
             (stream_b, OTHER, ""),  # another stream overwrites the capture buffers
             (stream_a, SOURCE[:12], "der Ausschuss hat")]  # hit on A's blocks, keys no longer captured
    retries, hits = [], []
    for session, words, prefix in steps:
        prompt = builder.build(words, prefix)
        draft = session.draft(prompt.token_ids, 6)
        hits.append(lm.last_cached_tokens)
        retries.append(lm.prefix_cache_retries)
        reference = eager_source_attention(
            model, prompt.token_ids + draft.tokens, heads, list(draft.positions), prompt.source_positions)
        replayed = draft.source_attention(prompt.source_positions)
        assert (replayed - reference).abs().max().item() < 1e-4
    assert hits[1] > 0 and retries[1] == 0, "the second step reads the cache and already holds those keys"
    assert retries[3] == 1, "the fourth step's cache hit has no captured keys: it is recomputed"
