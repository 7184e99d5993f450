"""Weights shared by a server's streams under a key derived from the loader call (common.weights), never hand-listed:
a vLLM engine captures only the heads it was built with, so each language pair must get an engine with its own."""
from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

import agents.alignatt4llm as alignatt
from agents.systems.config import CascadeConfig
from agents.systems.llm import resolve_heads
from agents.systems.ssbd import ssbd_model_load
from agents.systems.ssbd_config import SSBDCascadeConfig
from backends import asr, choice
from backends.heads import HeadSet, save_heads
from common.weights import WeightCache, WeightLoad, hashable


def test_a_load_key_is_the_call_itself():
    def loader(model, *, heads, options):
        return model

    one = WeightLoad.of(loader, "m", heads=[(1, 2), (3, 4)], options={"b": 1, "a": [2]})
    same = WeightLoad.of(loader, "m", options={"a": (2,), "b": 1}, heads=((1, 2), (3, 4)))
    other = WeightLoad.of(loader, "m", heads=[(1, 2)], options={"b": 1, "a": [2]})
    assert one.key == same.key != other.key
    assert one.load() == "m"


def test_a_whole_config_is_refused_as_a_loader_argument():
    with pytest.raises(TypeError, match="not a whole CascadeConfig"):
        hashable(CascadeConfig())


def test_the_cache_loads_each_call_once_and_shares_equal_ones():
    calls = []

    def loader(name):
        calls.append(name)
        return object()

    cache = WeightCache()
    first = cache.get((WeightLoad.of(loader, "asr"), WeightLoad.of(loader, "lm-de")))
    second = cache.get((WeightLoad.of(loader, "asr"), WeightLoad.of(loader, "lm-zh")))
    assert calls == ["asr", "lm-de", "lm-zh"]
    assert first[0] is second[0] and first[1] is not second[1]


def test_one_model_serves_every_direction_and_a_different_head_file_gets_its_own_engine(tmp_path):
    de = CascadeConfig()
    zh = dataclasses.replace(de, target_lang="zh")
    hf_keys = [[load.key for load in alignatt.Agent.weight_loads(c)] for c in (de, zh)]
    assert hf_keys[0] == hf_keys[1]  # the transformers backend captures whatever heads a session asks for

    vllm = [dataclasses.replace(c, backend="vllm") for c in (de, zh)]
    vllm_keys = [[load.key for load in alignatt.Agent.weight_loads(c)] for c in vllm]
    assert vllm_keys[0] == vllm_keys[1]  # one engine, capturing the heads of every direction
    for config in vllm:
        assert set(resolve_heads(config).heads) <= set(alignatt.Agent.capture_heads(config))

    head_file = tmp_path / "heads.json"
    save_heads(HeadSet(((0, 1), (2, 3))), head_file)
    own = dataclasses.replace(vllm[0], heads=str(head_file))
    assert alignatt.Agent.capture_heads(own) == ((0, 1), (2, 3))
    assert alignatt.Agent.weight_loads(own)[1].key != vllm_keys[0][1]  # the key holds what the engine captures


def test_only_the_options_a_runtime_takes_are_in_its_key():
    base = choice.lm_weights("hf", "embedded", n_threads=4, gguf_weights="")
    assert base.key == choice.lm_weights("hf", "embedded", n_threads=2).key
    assert choice.lm_weights("llama_cpp", "embedded", gguf_weights="bf16").key != \
        choice.lm_weights("llama_cpp", "embedded", gguf_weights="q8_0").key
    with pytest.raises(ValueError, match="unknown backend"):
        choice.lm_weights("onnx", "embedded")


def test_ssbd_weights_are_keyed_by_the_gguf_format_too():
    """The hand-written key left out gguf_weights: a bf16 stream would have reused a q8_0 model."""
    keys = {ssbd_model_load(SSBDCascadeConfig(gguf_weights=weights)).key for weights in ("bf16", "q8_0", "")}
    assert len(keys) == 3


def test_three_directions_in_one_server_pool_share_one_engine_that_captures_their_heads_fake_vllm(monkeypatch):
    """A stand-in vLLM loader (vLLM runs only in .venv-vllm) records what each engine would capture. The organizers'
    harness starts the server on a preset's direction and may then stream another (`--tgt-lang Chinese`): one engine
    must serve both, as one recogniser does."""
    engines, recognisers = [], []

    def fake_vllm(model, dtype, device, capture_heads):
        engines.append(SimpleNamespace(capture_heads=capture_heads))
        return engines[-1]

    def fake_recogniser(model, device, window):
        recognisers.append((model, device, window))
        return SimpleNamespace()

    monkeypatch.setitem(choice.RUNTIMES, "vllm", fake_vllm)
    monkeypatch.setitem(asr.RECOGNIZERS, "whisper", fake_recogniser)

    class PoolAgent(alignatt.Agent):  # a class of its own: its cache starts empty
        @classmethod
        def build_translator(cls, config, shared):
            return SimpleNamespace(config=config, shared=shared)

    namespace = SimpleNamespace(backend="vllm", speech_chunk_size=1.0)
    PoolAgent.load_model(namespace)  # the server loads the preset's weights before any stream
    pool = [PoolAgent(namespace) for _ in range(3)]
    pool[1].set_target_language("Chinese")
    pool[2].set_source_language("cs"), pool[2].set_target_language("English")
    used = [processor._active_translator() for processor in pool]

    assert len(recognisers) == 1 and len(engines) == 1
    assert [t.config.target_lang for t in used] == ["de", "zh", "en"]
    for translation in used:
        _, engine = translation.shared
        assert engine is engines[0]
        assert set(resolve_heads(translation.config).heads) <= set(engine.capture_heads)
