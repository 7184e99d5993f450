"""SSBD re-translation on real backends: with beta = 0 every update equals greedy re-translation from scratch
(transformers float32 against an independent cache-free-reuse greedy loop; llama.cpp against llama.cpp), plus the
display mechanics (mask-k, exact-suffix revisions) and configuration errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers.cache_utils import DynamicCache

from agents.systems.ssbd import SSBDTranslator, TransformersSSBDModel
from agents.systems.ssbd_config import SSBDConfig
from backends.hf.cache_keyword import cache_kwargs
from backends.hf.lm import CausalLM
from common.config import ConfigError
from common.stream import SourceWord

SENTENCE = "The new plan starts in the year 2025 and it will lower the price of energy for every family".split()


@torch.inference_mode()
def greedy_from_scratch(lm: CausalLM, prompt_ids: list[int], budget: int) -> list[int]:
    """Plain greedy decoding with a fresh cache: the re-translation reference (no draft, no prefix reuse)."""
    cache = DynamicCache()
    logits = lm.model(input_ids=torch.tensor([prompt_ids]), **cache_kwargs(lm.model, cache), use_cache=True).logits
    tokens: list[int] = []
    while len(tokens) < budget:
        token = int(torch.argmax(logits[0, -1]))
        if token in lm.stop_token_ids:
            break
        tokens.append(token)
        logits = lm.model(input_ids=torch.tensor([[token]]), **cache_kwargs(lm.model, cache), use_cache=True).logits
    return tokens


def run_stream(translator: SSBDTranslator, words: list[str]) -> list[tuple[str, ...]]:
    """Feed `words` one at a time and flush; returns the displayed units after every emission, checking that each
    emission replays onto the previous display."""
    displays, shown = [], []
    for word in words:
        emission = translator.feed([SourceWord(word)])
        shown = shown[: len(shown) - emission.retract_units] + list(emission.new_units)
        displays.append(tuple(shown))
    emission = translator.flush()
    shown = shown[: len(shown) - emission.retract_units] + list(emission.new_units)
    displays.append(tuple(shown))
    assert shown == translator.emitted_units
    return displays


def check_lossless(translator: SSBDTranslator, reference) -> None:
    for update in translator.updates:
        prompt = translator.prompts.build(list(update.source_words))
        budget = translator.config.final_max_new_tokens if update.final else translator.config.max_new_tokens
        assert update.output.tokens == reference(prompt.token_ids, budget), update.source_words


# llama.cpp's batched kernels (draft verification, prompt prefill) round differently from its one-token kernel, so a
# near-tie between the top two tokens can flip (observed: a 0.10 logit gap). Beyond such a tie the outputs agree.
LLAMA_CPP_TIE_TOLERANCE = 0.25


def greedy_logits_at(session, prompt_ids: list[int], tokens: list[int]) -> np.ndarray:
    """The logits re-translation saw before emitting tokens[len(tokens)]: prompt in one batch, then one at a time."""
    session.reset()
    logits = session._prefill(prompt_ids)
    for token in tokens:
        logits = session._evaluate([token])[-1]
    return logits


@pytest.mark.real_model
def test_llama_cpp_rows_equal_llama_cpp_python_logits_all_evaluation():
    """The session asks llama.cpp for the rows it reads only (a prompt's last row, every draft row); the reference is
    llama-cpp-python's own `logits_all` evaluation of the same ids, which computes every row."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import LlamaCppLM

    model = LlamaCppLM.load("embedded", n_ctx=512, n_threads=2)  # batches of at most 256 tokens
    prompt = model.tokenizer("Translate into German: the cat sat on the mat." * 30)["input_ids"]
    assert len(prompt) > 256  # the prompt goes to llama.cpp in two batches, only the last one's last row is read
    draft = model.tokenizer(" Die Katze saß auf der Matte.")["input_ids"]
    session = model.session()
    prompt_row = session._prefill(prompt)
    draft_rows = session._evaluate(draft)
    session._truncate(len(prompt) + 2)  # roll back into the draft, then continue from there
    resumed_rows = session._evaluate(draft[2:])

    reference = llama_cpp.Llama(model_path=str(model.gguf_path), n_ctx=512, n_batch=256, n_threads=2,
                                n_threads_batch=2, logits_all=True, verbose=False)
    reference.eval(prompt)  # the same batches (kernels differ with the batch size), every row's logits kept
    reference.eval(draft)
    every_row = np.array(reference.scores[: len(prompt) + len(draft)])
    reference.n_tokens = len(prompt) + 2
    reference.eval(draft[2:])
    resumed_reference = np.array(reference.scores[len(prompt) + 2: len(prompt) + len(draft)])
    assert prompt_row.shape == (every_row.shape[1],) and draft_rows.shape == (len(draft), every_row.shape[1])
    np.testing.assert_allclose(prompt_row, every_row[len(prompt) - 1], atol=1e-3)
    np.testing.assert_allclose(draft_rows, every_row[len(prompt):], atol=1e-3)
    np.testing.assert_allclose(resumed_rows, resumed_reference, atol=1e-3)


@pytest.fixture(scope="module")
def embedded_lm(embedded_model_path):
    return CausalLM.load("embedded")


@pytest.mark.real_model
def test_beta_zero_equals_greedy_retranslation_at_every_update_on_transformers(embedded_lm):
    config = SSBDConfig(backend="hf", beta=0.0, max_new_tokens=48, final_max_new_tokens=64)
    translator = SSBDTranslator(TransformersSSBDModel(embedded_lm), config)
    run_stream(translator, SENTENCE)
    assert len(translator.updates) == len(SENTENCE) // config.step_words + 1
    check_lossless(translator, lambda prompt, budget: greedy_from_scratch(embedded_lm, prompt, budget))
    # The draft was really reused (not a trivially empty verification).
    assert translator.stats.accepted_tokens > 0 and translator.stats.draft_tokens > 0


@pytest.mark.real_model
@pytest.mark.parametrize("weight_type", ["", "bf16"])  # the file as it is (Q4_K_M), and re-quantized to bf16
def test_beta_zero_equals_retranslation_on_llama_cpp(weight_type):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import LlamaCppLM

    model = LlamaCppLM.load("embedded", n_ctx=512, n_threads=2, weight_type=weight_type)
    config = SSBDConfig(backend="llama_cpp", beta=0.0, max_new_tokens=48, final_max_new_tokens=64,
                        gguf_weights=weight_type)
    translator = SSBDTranslator(model, config)
    run_stream(translator, SENTENCE)
    fresh = model.session()

    def retranslate(prompt, budget):
        fresh.reset()
        return fresh.generate(prompt, [], 0.0, budget).tokens

    identical = 0
    for update in translator.updates:
        prompt = translator.prompts.build(list(update.source_words)).token_ids
        budget = config.final_max_new_tokens if update.final else config.max_new_tokens
        reference, output = retranslate(prompt, budget), update.output.tokens
        if output == reference:
            identical += 1
            continue
        # A difference may only start at a near-tie of re-translation's own logits.
        index = next(i for i, (a, b) in enumerate(zip(output + [-1], reference + [-1])) if a != b)
        logits = greedy_logits_at(fresh, prompt, reference[:index])
        chosen = reference[index] if index < len(reference) else int(np.argmax(logits))
        other = output[index] if index < len(output) else max(fresh.stop_token_ids, key=lambda t: logits[t])
        assert logits[chosen] - logits[other] < LLAMA_CPP_TIE_TOLERANCE, (update.source_words, index)
    assert identical >= len(translator.updates) // 2
    assert translator.stats.accepted_tokens > 0
    # The same ids as transformers: the prompt is built once, with the Hugging Face tokenizer of the same weights.
    assert translator.prompts.build(SENTENCE[:3]).token_ids == model.tokenizer.apply_chat_template(
        translator.prompts.messages(" ".join(SENTENCE[:3])), add_generation_prompt=True, tokenize=True,
        return_dict=False)


def test_tiny_model_mask_k_hides_the_tail_but_keeps_it_in_the_draft(tiny_checkpoint):
    lm = CausalLM.load(str(tiny_checkpoint("qwen2")))
    masked = SSBDTranslator(TransformersSSBDModel(lm), SSBDConfig(backend="hf", mask_k=2, beta=0.2,
                                                                  max_new_tokens=12, final_max_new_tokens=12))
    plain = SSBDTranslator(TransformersSSBDModel(lm), SSBDConfig(backend="hf", mask_k=0, beta=0.2,
                                                                 max_new_tokens=12, final_max_new_tokens=12))
    words = SENTENCE[:9]
    run_stream(masked, words)
    run_stream(plain, words)
    # Display-only: the outputs (and so the drafts, acceptances and the final text) are identical...
    assert [u.output.tokens for u in masked.updates] == [u.output.tokens for u in plain.updates]
    assert masked.emitted_units == plain.emitted_units
    # ...while every intermediate display hides the last 2 units of its output.
    for m, p in zip(masked.updates, plain.updates):
        if not m.final:
            assert m.displayed == p.displayed[: max(0, len(p.displayed) - 2)]
    assert masked.stats.erased_units <= plain.stats.erased_units


def test_reset_forgets_the_stream(tiny_checkpoint):
    lm = CausalLM.load(str(tiny_checkpoint("qwen2")))
    translator = SSBDTranslator(TransformersSSBDModel(lm), SSBDConfig(backend="hf", max_new_tokens=8,
                                                                      final_max_new_tokens=8))
    first = run_stream(translator, SENTENCE[:6])
    translator.reset()
    assert translator.emitted_units == [] and translator.draft == [] and translator.stats.updates == 0
    assert run_stream(translator, SENTENCE[:6]) == first


@pytest.mark.parametrize("values, message", [
    ({"beta": 1.5}, "beta must be in"),
    ({"backend": "vllm"}, "backend must be one of"),
    ({"mask_k": -1}, "mask_k"),
    ({"step_words": 0}, "step_words"),
    ({"backend": "llama_cpp", "model_dtype": "bfloat16"}, "model_dtype and model_device apply to the transformers"),
    ({"gguf_weights": "q5"}, "gguf_weights must be empty, auto or one of bf16"),
    ({"backend": "hf", "gguf_weights": "bf16"}, "applies to backend llama_cpp only"),
    ({"n_ctx": 8}, "n_ctx >= 64"),
])
def test_bad_configuration_is_refused(values, message):
    with pytest.raises(ConfigError, match=message):
        SSBDConfig(**values).validate()


@pytest.mark.real_model
def test_requantized_gguf_is_written_once_with_the_requested_weights_and_keeps_the_model(tmp_path, monkeypatch):
    """llama.cpp's quantizer writes the file once into the cache; the copy has the requested weight type and predicts
    like the original (same top token after a real prompt, log-probabilities close)."""
    gguf = pytest.importorskip("gguf", reason="gguf is not installed")
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import LlamaCppLM, gguf_path_for, requantized_gguf

    original = LlamaCppLM.load("embedded", n_ctx=256, n_threads=2)  # before the cache moves to tmp_path
    source = gguf_path_for("embedded")
    monkeypatch.setenv("SIMULAGENTS_CACHE", str(tmp_path))
    converted = requantized_gguf(source, "q8_0")
    assert converted.parent == tmp_path / "gguf" and list(converted.parent.iterdir()) == [converted]
    types = {tensor.name: tensor.tensor_type.name for tensor in gguf.GGUFReader(str(converted)).tensors}
    assert types["blk.0.ffn_up.weight"] == types["blk.23.attn_q.weight"] == "Q8_0"
    assert types["blk.0.attn_norm.weight"] == "F32"
    written = converted.stat().st_mtime_ns
    assert requantized_gguf(source, "q8_0") == converted and converted.stat().st_mtime_ns == written

    copy = LlamaCppLM(converted, original.tokenizer, n_ctx=256, n_threads=2)
    prompt = original.tokenizer.apply_chat_template(
        [{"role": "user", "content": "Translate into German: " + " ".join(SENTENCE)}], add_generation_prompt=True,
        tokenize=True, return_dict=False)
    log_probs = [torch.log_softmax(torch.from_numpy(lm.session()._prefill(prompt)), -1) for lm in (original, copy)]
    assert int(log_probs[0].argmax()) == int(log_probs[1].argmax())
    top = log_probs[0].topk(20).indices
    assert float((log_probs[0][top] - log_probs[1][top]).abs().max()) < 0.5


def test_requantized_copies_of_two_files_with_one_name_do_not_collide(tmp_path, monkeypatch):
    from backends.llama_cpp import requantized_path

    monkeypatch.setenv("SIMULAGENTS_CACHE", str(tmp_path / "cache"))
    first, second = tmp_path / "a" / "model.gguf", tmp_path / "b" / "model.gguf"
    for path in (first, second):
        path.parent.mkdir()
        path.write_bytes(b"GGUF")
    assert requantized_path(first, "bf16") != requantized_path(second, "bf16")
    assert requantized_path(first, "bf16") == requantized_path(first, "bf16") != requantized_path(first, "q8_0")
    named = requantized_path(first, "bf16")
    first.write_bytes(b"GGUF, replaced in place")  # another size: a new copy
    assert requantized_path(first, "bf16") != named


def test_unknown_gguf_weight_type_is_refused_with_the_choices():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import requantized_gguf

    with pytest.raises(ValueError, match="unknown GGUF weight type 'q5'.*bf16, f16, q8_0, q4_0"):
        requantized_gguf("model.gguf", "q5")


def test_llama_cpp_backend_needs_a_gguf_file(tmp_path):
    from backends.llama_cpp import gguf_path_for

    with pytest.raises(ValueError, match="runs GGUF files"):
        gguf_path_for(str(tmp_path))


def test_emission_then_chains_a_revision_into_the_previous_emission():
    from common.stream import Emission

    first = Emission(1, ("a", "b", "c"))
    assert first.then(Emission(2, ("x",))) == Emission(1, ("a", "x"))
    assert first.then(Emission(5, ("y",))) == Emission(3, ("y",))  # reaches 2 units before `first`
    assert first.then(Emission()) == first and Emission().then(first) == first
    before = ["p", "q", "r", "s"]
    shown = list(before)
    for emission in (first, Emission(5, ("y",))):
        shown = shown[: len(shown) - emission.retract_units] + list(emission.new_units)
    chained = first.then(Emission(5, ("y",)))
    assert before[: len(before) - chained.retract_units] + list(chained.new_units) == shown == ["p", "y"]


def test_emission_then_joins_a_piece_to_the_last_new_unit():
    """A unit that goes on inside the last one ("Open" + "AI") joins the last new unit of the emission before it, or
    keeps joining where that emission added none; it never comes with a retraction."""
    from common.stream import Emission

    joined = Emission(new_units=("AI", "eine"), joins_last_unit=True)
    assert Emission(new_units=("für", "Open")).then(joined) == Emission(new_units=("für", "OpenAI", "eine"))
    assert Emission().then(joined) == joined
    assert joined.then(Emission(new_units=("GPT",))) == Emission(new_units=("AI", "eine", "GPT"), joins_last_unit=True)
    assert Emission(1, ("a", "b")).then(Emission(1, ("x",))).joins_last_unit is False
    with pytest.raises(ValueError, match="retracts none"):
        Emission(1, ("x",), joins_last_unit=True)
    with pytest.raises(ValueError, match="at least one unit"):
        Emission(joins_last_unit=True)
    with pytest.raises(ValueError, match="cannot retract"):
        joined.then(Emission(1, ("x",)))


@pytest.mark.harness
def test_simuleval_text_agent_writes_the_final_retranslation(tmp_path, tiny_checkpoint):
    """The real SimulEval CLI with `agents.ssbd.TextAgent` (tiny random qwen2 on transformers): the prediction is the
    final re-translation of the whole source, written once the source is complete."""
    from harness_runs import simuleval_text_run

    model = str(tiny_checkpoint("qwen2"))
    sources = [" ".join(SENTENCE[:7]), " ".join(SENTENCE[7:11])]
    instances = simuleval_text_run(tmp_path, "agents.ssbd.TextAgent", sources, ["a", "b"], "--backend",
                                   "transformers", "--model", model, "--max-new-tokens", "8",
                                   "--final-max-new-tokens", "10")
    translator = SSBDTranslator(TransformersSSBDModel(CausalLM.load(model)), SSBDConfig(
        backend="hf", model=model, max_new_tokens=8, final_max_new_tokens=10))
    for source, instance in zip(sources, instances):
        translator.reset()
        run_stream(translator, source.split())
        assert instance["prediction"] == translator.target_text
        assert set(instance["delays"]) <= {len(source.split())}  # written when the source was complete


def test_shipped_ssbd_presets_are_valid():
    from simulstream.config import yaml_config

    import eval_configs
    from agents.ssbd import Agent
    from common.config import config_from_yaml

    namespace = yaml_config(str(eval_configs.path("ssbd_cpu")))
    assert namespace.type == "agents.ssbd.Agent" and namespace.speech_chunk_size > 0
    speech = Agent.parse_config(namespace)
    assert (speech.backend, speech.beta, speech.mask_k, speech.asr) == ("llama_cpp", 0.2, 2, "whisper")
    text = config_from_yaml(SSBDConfig, eval_configs.path("ssbd_text_cpu"))
    text.validate()
    assert (text.beta, text.step_words, text.mask_k) == (0.2, 3, 0)
