"""model_compile: the transformers backend's compiled decode step (backends/hf/compiled_step.py) against eager
decoding of the same weights as the reference: the same tokens, stops, ends and captured rows, one compilation for
every prompt length and session, eager decoding for a prompt longer than the static cache. On the tiny Gemma-4
(sliding-window and KV-shared layers, prompts past the window; compiling costs a minute of CI per architecture)."""
import pytest
import torch
from torch._dynamo.utils import counters

from backends.hf import compiled_step
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm

SOURCE = ("the committee approved the new budget for schools and hospitals after a long debate in the "
          "regional parliament last week").split()
# Successive steps of one stream: the source grows, the target prefix changes, so the cached prefix is reused.
STEPS = [(SOURCE[:9], ""), (SOURCE[:14], "der Ausschuss"), (SOURCE, "der Ausschuss hat")]


@pytest.fixture(scope="module", params=["gemma4"])  # the hardest cache: KV-shared and sliding-window layers
def lms(request, tiny_checkpoint):
    """An eager and a compiled `CausalLM` over the same weights, and the graphs compiled before the test's drafts."""
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(request.param)))
    before = counters["stats"]["unique_graphs"]
    compiled = CausalLM(model, tokenizer, compiled=True)
    assert counters["stats"]["unique_graphs"] > before, "the step was compiled at load"
    return CausalLM(model, tokenizer), compiled


def heads_of(lm):
    config = lm.model.config
    return [(layer, head) for layer in range(config.num_hidden_layers) for head in range(config.num_attention_heads)]


def prompts(lm):
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    return [builder.build(words, prefix) for words, prefix in STEPS]


def test_compiled_drafts_equal_eager_ones_with_and_without_capture(lms):
    eager, compiled = lms
    graphs = counters["stats"]["unique_graphs"]
    heads = heads_of(eager)
    sessions = {lm: (lm.session(heads), lm.session(None)) for lm in (eager, compiled)}
    for prompt in prompts(eager):
        window = getattr(eager.model.config, "sliding_window", None)
        if window:
            assert len(prompt.token_ids) > 2 * window, "prompts cross the sliding window"
        drafts = {}
        for lm, (capturing, plain) in sessions.items():
            captured = capturing.draft(prompt.token_ids, 10)
            drafts[lm] = (captured, plain.draft(prompt.token_ids, 10, capture=False),
                          captured.source_attention(prompt.source_positions))
        (captured, plain, rows), (captured_c, plain_c, rows_c) = drafts[eager], drafts[compiled]
        assert captured.tokens and captured_c.tokens == captured.tokens == plain.tokens == plain_c.tokens
        assert (captured_c.finished, plain_c.finished) == (captured.finished, plain.finished)
        # The compiled session's rows come from one batched forward over the draft, eager's from one per token: in
        # float32 the tiny Gemma-4's last layers differ by rounding up to 4e-5 (tests/test_hf_capture.py measures
        # 1.2e-4 between two of its forwards).
        torch.testing.assert_close(rows_c, rows, atol=2e-4, rtol=0)
    assert counters["stats"]["unique_graphs"] == graphs, "no compilation after load, whatever the prompt length"


def test_a_stop_is_asked_and_obeyed_as_in_eager_decoding(lms):
    eager, compiled = lms
    heads = heads_of(eager)
    prompt = prompts(eager)[1]
    for stop_after in (1, 3):
        asked = {}
        drafts = {}
        for lm in (eager, compiled):
            seen = asked[lm] = []

            def stop(draft, seen=seen):
                row = draft.source_attention(prompt.source_positions, len(draft.tokens) - 1)  # the newest row exists
                seen.append((len(draft.tokens), float(row.sum())))
                return len(draft.tokens) == stop_after

            drafts[lm] = lm.session(heads).draft(prompt.token_ids, 10, stop=stop)
        assert drafts[compiled].tokens == drafts[eager].tokens and len(drafts[eager].tokens) == stop_after
        assert drafts[compiled].finished is drafts[eager].finished is False
        assert [n for n, _ in asked[compiled]] == [n for n, _ in asked[eager]]  # asked after the same tokens
        assert [mass for _, mass in asked[compiled]] == pytest.approx([mass for _, mass in asked[eager]], abs=2e-4)
    # Without capture (a final draft) the compiled session asks after each step, as eager does.
    lengths = {lm: [] for lm in (eager, compiled)}
    for lm in (eager, compiled):
        lm.session(None).draft(prompt.token_ids, 8, capture=False,
                               stop=lambda draft, seen=lengths[lm]: seen.append(len(draft.tokens)) or False)
    assert lengths[compiled] == lengths[eager] and lengths[eager]


def test_a_banned_first_token_gives_the_eager_draft(lms):
    """The retry of a final draft (`banned_first_tokens`): the compiled step decodes what eager decoding does."""
    eager, compiled = lms
    for prompt in prompts(eager)[:2]:
        first = eager.session(None).draft(prompt.token_ids, 8, capture=False).tokens[0]
        drafts = [lm.session(None).draft(prompt.token_ids, 8, capture=False, banned_first_tokens=[first])
                  for lm in (eager, compiled)]
        assert drafts[0].tokens and drafts[0].tokens[0] != first
        assert drafts[1].tokens == drafts[0].tokens and drafts[1].finished is drafts[0].finished


def test_a_prompt_longer_than_the_static_cache_decodes_eagerly_and_the_next_one_compiled(lms, monkeypatch):
    eager, compiled = lms
    heads = heads_of(eager)
    short = prompts(eager)[0]
    long = PromptBuilder(eager.tokenizer, "en", "de").build(SOURCE * 60, "")
    assert len(long.token_ids) + 10 > compiled_step.COMPILED_CACHE_TOKENS
    calls = []
    forward = compiled.compiled_step._forward
    monkeypatch.setattr(compiled.compiled_step, "_forward", lambda **kwargs: calls.append(1) or forward(**kwargs))
    session = compiled.session(heads)
    reference = eager.session(heads)
    for prompt, fits in ((short, True), (long, False), (short, True)):
        before = len(calls)
        draft = session.draft(prompt.token_ids, 10)
        assert draft.tokens == reference.draft(prompt.token_ids, 10).tokens
        assert (len(calls) > before) is fits and session.static is fits


def test_model_compile_is_refused_where_it_cannot_run():
    from agents.systems.config import AlignAttConfig
    from common.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="model_compile compiles the transformers backend's decode step"):
        build_config(AlignAttConfig, {"backend": "llama_cpp", "model_compile": True})
    with pytest.raises(ConfigError, match="model_compile.*int8"):
        build_config(AlignAttConfig, {"model_dtype": "int8", "model_compile": True})
    from agents.systems.ssbd_config import SSBDConfig

    with pytest.raises(ConfigError, match="SSBD verifies each draft in one batched forward"):
        build_config(SSBDConfig, {"model_compile": True})


def test_a_step_from_another_thread_reuses_the_graph_compiled_at_load(lms, monkeypatch):
    """simulstream's HTTP server handles each request on a new thread (ThreadingHTTPServer): a draft asked from a
    thread other than the loading one, with another CPU thread count, gives the same tokens and rows, compiles
    nothing new, and runs its compiled steps on the step's own thread with the count it was compiled under. (On a
    GPU the step is also a CUDA graph, which torch.compile keeps per thread: `compiled_step.StepThread`; `make
    gpu-check`'s cascade rows feed each chunk from a new thread.)"""
    import threading

    eager, compiled = lms
    heads = heads_of(eager)
    prompt = prompts(eager)[1]
    reference = eager.session(heads).draft(prompt.token_ids, 10)
    graphs = counters["stats"]["unique_graphs"]
    results, callers, steps = [], [], []  # steps: (thread, CPU thread count) of every compiled step
    forward = compiled.compiled_step._forward
    monkeypatch.setattr(compiled.compiled_step, "_forward", lambda **kwargs: steps.append(
        (threading.get_ident(), torch.get_num_threads())) or forward(**kwargs))

    def draft_in_a_new_thread():
        # A new thread's CPU thread count is OMP_NUM_THREADS or all cores, whatever the loading thread's was set to
        # (CTranslate2's Whisper sets it there): a count unlike the one compiled under.
        torch.set_num_threads(13)  # no loading thread here had 13
        callers.append(threading.get_ident())
        results.append(compiled.session(heads).draft(prompt.token_ids, 10))

    for _ in range(2):  # two fresh threads, each with its own thread-local state
        thread = threading.Thread(target=draft_in_a_new_thread)
        thread.start()
        thread.join()
    assert len(results) == 2 and all(draft.tokens == reference.tokens for draft in results)
    for draft in results:
        torch.testing.assert_close(draft.source_attention(prompt.source_positions),
                                   reference.source_attention(prompt.source_positions), atol=2e-4, rtol=0)
    assert counters["stats"]["unique_graphs"] == graphs, "no compilation in a new thread"
    assert len(steps) >= 2 * 9 and len(set(steps)) == 1  # every step on one thread, with one CPU thread count
    (step_thread, step_count), = set(steps)
    assert step_thread not in callers and step_thread != threading.get_ident()
    assert step_count == compiled.compiled_step.cpu_threads  # the loading thread's count


def test_step_thread_runs_every_call_on_one_thread_in_the_callers_mode():
    """The mechanism alone: calls from any thread run on one thread, in the caller's grad and inference mode, a call
    from the step's own thread runs at once (no deadlock), and an error reaches the caller."""
    import threading

    step_thread = compiled_step.StepThread("test-step")
    seen = []

    def where():
        seen.append((threading.get_ident(), torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
        return len(seen)

    with torch.inference_mode():
        step_thread.run(where)
    with torch.no_grad():
        step_thread.run(where)
    step_thread.run(where)
    thread = threading.Thread(target=lambda: step_thread.run(where))
    thread.start()
    thread.join()
    assert step_thread.run(lambda: step_thread.run(where)) == 5  # nested: runs on the step's thread directly
    assert len({ident for ident, _, _ in seen}) == 1 and seen[0][0] != threading.get_ident()
    assert [(inference, grad) for _, inference, grad in seen] == [(True, False), (False, False), (False, True),
                                                                  (False, True), (False, True)]
    with pytest.raises(ZeroDivisionError):
        step_thread.run(lambda: 1 / 0)
