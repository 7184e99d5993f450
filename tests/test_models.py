"""Tests for where weights come from (`backends.models`) and the tiny test checkpoints (tests/tiny_checkpoints.py):
round trips are bit-identical, windows and KV sharing survive saving, multimodal Gemma checkpoints load as their text
decoder alone, and bad model specs fail with clear errors."""

from __future__ import annotations

import json
import logging
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from tiny_checkpoints import (
    TINY_ARCHITECTURES,
    TINY_CORPUS,
    TINY_MULTIMODAL_ARCHITECTURES,
    TINY_SLIDING_WINDOW,
    build_tiny_model,
    build_tiny_multimodal_checkpoint,
    build_tiny_multimodal_model,
    hf_cache_snapshot,
    main,
)
from transformers import AutoConfig, AutoTokenizer

from backends import models, sources
from backends.models import (
    EmbeddedModelUnavailableError,
    ModelLoadError,
    ModelNotFoundError,
    load_causal_lm,
    resolve_model,
)

PROMPT_TEXT = "In 2024 the cat sat on the mat. Die Katze saß auf der Matte. 猫坐在垫子上。 Il gatto dorme."
SYSTEM = {"role": "system", "content": "Translate the English text into German."}
USER = {"role": "user", "content": "The cat sat on the mat."}
PARTIAL_ASSISTANT = {"role": "assistant", "content": "Die Katze"}
GENERATION_HEADERS = {
    "gemma4": "<|turn>model\n<|channel>thought\n<channel|>",  # thinking off: an empty thought block
    "gemma": "<start_of_turn>model\n",
    "chatml": "<|im_start|>assistant\n",
}


def _header(arch: str) -> str:
    return GENERATION_HEADERS[arch if arch == "gemma4" else "gemma" if arch.startswith("gemma") else "chatml"]


def _long_prompt_ids(tokenizer, length: int) -> torch.Tensor:
    ids = tokenizer(" ".join(TINY_CORPUS), add_special_tokens=False).input_ids
    assert len(ids) >= length
    return torch.tensor([ids[:length]])


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_tiny_checkpoint_reloads_bit_identical(arch: str, tiny_checkpoint: Callable[[str], Path]) -> None:
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(arch)))
    reference, reference_tokenizer = build_tiny_model(arch, seed=0)
    reference.set_attn_implementation(model.config._attn_implementation)  # sdpa; eager where SDPA cannot (Gemma-2)
    assert type(model) is type(reference)
    assert tokenizer.is_fast
    encoded = tokenizer(PROMPT_TEXT, return_tensors="pt", add_special_tokens=False)
    assert encoded.input_ids[0].tolist() == reference_tokenizer(PROMPT_TEXT, add_special_tokens=False).input_ids
    with torch.no_grad():
        assert torch.equal(model(encoded.input_ids).logits, reference(encoded.input_ids).logits)
    assert model.dtype == torch.float32 and not model.training
    assert (model.config.bos_token_id, model.config.eos_token_id, model.config.pad_token_id) == (
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
    )
    assert len(tokenizer) <= model.config.vocab_size


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_tiny_chat_template_and_offsets(arch: str, tiny_checkpoint: Callable[[str], Path]) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_checkpoint(arch))
    prompt = tokenizer.apply_chat_template([SYSTEM, USER], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith(_header(arch))
    assert SYSTEM["content"] in prompt and USER["content"] in prompt
    prefilled = prompt + PARTIAL_ASSISTANT["content"]  # as backends.prompt continues a translation
    if arch == "gemma4":
        assert prompt.startswith("<bos><|turn>system\n" + SYSTEM["content"] + "<turn|>\n")  # a native system turn
    elif arch.startswith("gemma"):
        assert prompt.startswith("<bos><start_of_turn>user\n" + SYSTEM["content"] + "\n\n")  # system merged
    encoded = tokenizer(prefilled, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded.offset_mapping
    assert len(offsets) == len(encoded.input_ids)
    assert all(0 <= start <= end <= len(prefilled) for start, end in offsets)
    assert all(a[0] <= b[0] for a, b in zip(offsets, offsets[1:]))
    specials = set(tokenizer.all_special_ids) | {tokenizer.convert_tokens_to_ids("<|im_start|>")}
    for token_id, (start, end) in zip(encoded.input_ids, offsets):
        if token_id in specials:
            assert prefilled[start:end] == tokenizer.convert_ids_to_tokens(token_id)
    assert prefilled.endswith(prefilled[offsets[-1][0] : offsets[-1][1]])


def _attention_rows(path: Path, length: int) -> tuple[list[torch.Tensor], object]:
    model, tokenizer = load_causal_lm(str(path), attn_implementation="eager")
    with torch.no_grad():
        output = model(_long_prompt_ids(tokenizer, length), output_attentions=True)
    return [layer[0, :, -1, :] for layer in output.attentions], model  # last query row, per head


def _assert_sliding_layers_slide(path: Path) -> None:
    rows, model = _attention_rows(path, length=40)
    layer_types = model.config.layer_types
    assert "sliding_attention" in layer_types and "full_attention" in layer_types
    for row, layer_type in zip(rows, layer_types, strict=True):
        attended = (row > 0).sum(dim=-1)
        if layer_type == "sliding_attention":
            assert int(attended.max()) <= TINY_SLIDING_WINDOW and float(row[:, 0].max()) == 0.0
        else:
            assert int(attended.min()) == 40


def _assert_gemma4_kv_sharing(model: torch.nn.Module) -> None:
    assert type(model).__name__ == "Gemma4ForCausalLM"
    attentions = [layer.self_attn for layer in model.model.layers]
    shared = [attention.is_kv_shared_layer for attention in attentions]
    assert shared == [False] * 8 + [True] * 4
    assert {attention.is_sliding for attention, is_shared in zip(attentions, shared) if is_shared} == {True, False}


@pytest.mark.parametrize("arch", ["gemma4", "gemma3", "qwen3"])
def test_sliding_layers_really_slide(arch: str, tiny_checkpoint: Callable[[str], Path]) -> None:
    _assert_sliding_layers_slide(tiny_checkpoint(arch))


def test_gemma4_has_kv_shared_layers(tiny_checkpoint: Callable[[str], Path]) -> None:
    model, _ = load_causal_lm(str(tiny_checkpoint("gemma4")))
    _assert_gemma4_kv_sharing(model)


@pytest.fixture(scope="module")
def tiny_multimodal_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Factory: tiny_multimodal_checkpoint("gemma4") -> a saved multimodal HF directory, built once per module."""
    built: dict[str, Path] = {}

    def checkpoint(arch: str) -> Path:
        if arch not in built:
            built[arch] = build_tiny_multimodal_checkpoint(arch, tmp_path_factory.mktemp(f"tiny-{arch}-multimodal"))
        return built[arch]

    return checkpoint


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("arch", TINY_MULTIMODAL_ARCHITECTURES)
def test_multimodal_checkpoint_loads_as_its_text_decoder(
    arch: str, tiny_multimodal_checkpoint: Callable[[str], Path]
) -> None:
    path = tiny_multimodal_checkpoint(arch)
    assert AutoConfig.from_pretrained(path).model_type == arch  # as in google/gemma-4-E4B-it: towers + text_config
    records = _Records()
    transformers_logger = logging.getLogger("transformers.modeling_utils")
    transformers_logger.addHandler(records)
    try:
        model, tokenizer = load_causal_lm(str(path))
    finally:
        transformers_logger.removeHandler(records)
    assert not [message for message in records.messages if "LOAD REPORT" in message]  # unread towers: no noise
    reference, reference_tokenizer = build_tiny_multimodal_model(arch, seed=0)
    assert type(reference).__name__ == f"{arch.capitalize()}ForConditionalGeneration"
    assert type(model).__name__ == f"{arch.capitalize()}ForCausalLM"
    text_config = reference.config.get_text_config(decoder=True)
    assert model.config.model_type == text_config.model_type == f"{arch}_text"
    assert (model.config.num_hidden_layers, model.config.num_attention_heads) == (
        text_config.num_hidden_layers,
        text_config.num_attention_heads,
    )
    # Only the text decoder: each layer index belongs to exactly one attention module (with the towers, the vision
    # and audio attention layers would reuse indices 0, 1, ...).
    layer_indices = sorted(m.layer_idx for m in model.modules() if type(m).__name__.endswith("Attention"))
    assert layer_indices == list(range(model.config.num_hidden_layers))
    assert not any(word in name for name, _ in model.named_modules() for word in ("tower", "vision", "audio"))
    assert tokenizer.chat_template == reference_tokenizer.chat_template
    prompt = tokenizer.apply_chat_template([SYSTEM, USER], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt + PROMPT_TEXT, return_tensors="pt", add_special_tokens=False).input_ids
    assert ids[0].tolist() == reference_tokenizer(prompt + PROMPT_TEXT, add_special_tokens=False).input_ids
    with torch.no_grad():  # the full multimodal model's text-only forward
        torch.testing.assert_close(model(ids).logits, reference(ids).logits, atol=1e-5, rtol=0)
    assert model.dtype == torch.float32 and not model.training
    assert (model.config.bos_token_id, model.config.eos_token_id, model.config.pad_token_id) == (
        tokenizer.bos_token_id,
        tokenizer.eos_token_id,
        tokenizer.pad_token_id,
    )


def test_multimodal_gemma4_keeps_kv_shared_and_sliding_layers_under_capture(
    tiny_multimodal_checkpoint: Callable[[str], Path],
) -> None:
    from backends.hf.lm import CausalLM

    _assert_sliding_layers_slide(tiny_multimodal_checkpoint("gemma4"))
    model, tokenizer = load_causal_lm(str(tiny_multimodal_checkpoint("gemma4")))
    _assert_gemma4_kv_sharing(model)
    # The q/k capture (which the full model's audio tower would refuse: it has no SDPA) records every text layer.
    lm = CausalLM(model, tokenizer)
    heads = [(layer, 0) for layer in range(model.config.num_hidden_layers)]
    draft = lm.session(heads).draft(_long_prompt_ids(tokenizer, 24)[0].tolist(), 3)
    assert draft.recorder.seen_layers == set(range(model.config.num_hidden_layers))


def test_multimodal_text_weights_not_found_fail_clearly(
    tmp_path: Path, tiny_multimodal_checkpoint: Callable[[str], Path]
) -> None:
    from safetensors.torch import load_file, save_file

    moved = shutil.copytree(tiny_multimodal_checkpoint("gemma4"), tmp_path / "moved")
    weights = load_file(moved / "model.safetensors")
    renamed = {key.replace("model.language_model.", "model.text_decoder."): value for key, value in weights.items()}
    save_file(renamed, moved / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match="weights of its text decoder .Gemma4ForCausalLM. are not where expected"):
        load_causal_lm(str(moved))


def test_tiny_cli_writes_a_multimodal_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["gemma3", str(tmp_path / "gemma3"), "--multimodal"]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "gemma3")
    assert AutoConfig.from_pretrained(tmp_path / "gemma3").model_type == "gemma3"
    with pytest.raises(SystemExit):
        main(["llama", str(tmp_path / "llama"), "--multimodal"])


def test_tiny_cli_writes_a_loadable_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["llama", str(tmp_path / "llama")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "llama")
    model, tokenizer = load_causal_lm(str(tmp_path / "llama"))
    assert type(model).__name__ == "LlamaForCausalLM" and tokenizer.chat_template


def test_nonexistent_path_names_the_spec() -> None:
    spec = "/nonexistent/simulagents/model-dir"
    with pytest.raises(ModelNotFoundError, match=re.escape(spec)) as caught:
        resolve_model(spec)
    assert "Accepted forms" in str(caught.value)
    assert all(source.accepted in str(caught.value) for source in models.MODEL_SOURCES)


def test_model_sources_are_asked_in_order_and_a_new_source_is_one_entry(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{}")
    registry = models.ModelSource("registry", "'registry:NAME'", lambda spec: spec.startswith("registry:"),
                                  lambda spec: tmp_path)
    monkeypatch.setattr(models, "MODEL_SOURCES", (*models.MODEL_SOURCES, registry))
    assert resolve_model("registry:any") == tmp_path
    assert resolve_model(str(tmp_path)) == tmp_path  # the directory source answers first for a directory
    assert [source.name for source in models.MODEL_SOURCES[:4]] == ["embedded", "directory", "gguf", "hf_cache"]


def test_uncached_repo_id_mentions_the_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match="Hugging Face cache") as caught:
        resolve_model("simulagents-test/not-a-cached-model")
    assert "hf download simulagents-test/not-a-cached-model" in str(caught.value)


def test_cached_repo_id_resolves_to_its_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_checkpoint: Callable[[str], Path]
) -> None:
    shutil.copytree(tiny_checkpoint("llama"), hf_cache_snapshot("simulagents-test/tiny-llama", tmp_path))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--simulagents-test--tiny-llama" / "snapshots" / ("0" * 40)
    assert resolve_model("simulagents-test/tiny-llama") == snapshot


def test_directory_without_config_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "model.gguf").write_bytes(b"")
    with pytest.raises(ModelNotFoundError, match="no config.json.*model.gguf"):
        resolve_model(str(tmp_path))


def test_file_that_is_not_gguf_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "weights.bin").write_bytes(b"0")
    with pytest.raises(ModelNotFoundError, match="not a .gguf file"):
        resolve_model(str(tmp_path / "weights.bin"))


def test_broken_gguf_fails_clearly_and_leaves_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sources.CACHE_ENV_VAR, str(tmp_path / "cache"))
    (tmp_path / "broken.gguf").write_bytes(b"GGUF not really")
    with pytest.raises(ModelLoadError, match="cannot convert"):
        resolve_model(str(tmp_path / "broken.gguf"))
    assert not any((tmp_path / "cache").rglob("config.json"))


def test_bad_options_and_unusable_tokenizers_fail_clearly(
    tmp_path: Path, tiny_checkpoint: Callable[[str], Path]
) -> None:
    with pytest.raises(ModelLoadError, match="unknown dtype 'float8'"):
        load_causal_lm(str(tiny_checkpoint("llama")), dtype="float8")
    no_template = shutil.copytree(tiny_checkpoint("llama"), tmp_path / "no-template")
    (no_template / "chat_template.jinja").unlink()
    with pytest.raises(ModelLoadError, match="no chat template"):
        load_causal_lm(str(no_template))


@pytest.mark.parametrize("spec, extra", [("embedded", "embedded"),
                                         ("embedded:qwen2.5-coder-1.5b-instruct", "embedded-1.5b")])
def test_missing_embedded_packages_say_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str,
                                                      extra: str) -> None:
    monkeypatch.setenv(sources.CACHE_ENV_VAR, str(tmp_path))
    monkeypatch.setitem(sys.modules, models.embedded_model(spec).part_modules[2], None)  # makes the import fail
    with pytest.raises(EmbeddedModelUnavailableError, match=re.escape(f'pip install "simulagents[{extra}]"')):
        resolve_model(spec)
    from backends.llama_cpp import gguf_path_for  # llama.cpp runs the same assembled file
    with pytest.raises(EmbeddedModelUnavailableError, match=re.escape(f'pip install "simulagents[{extra}]"')):
        gguf_path_for(spec)


def test_embedded_specs_name_the_registry_and_nothing_else() -> None:
    assert models.embedded_model("embedded") is models.EMBEDDED_MODELS[0]
    assert models.embedded_spec("embedded") == models.EMBEDDED_MODEL == "embedded:qwen2.5-coder-0.5b-instruct"
    for model in models.EMBEDDED_MODELS:
        assert models.embedded_model(model.spec) is model and models.embedded_spec(model.spec) == model.spec
    assert len({model.name for model in models.EMBEDDED_MODELS}) == len(models.EMBEDDED_MODELS)
    for spec in ("embedded:", "embedded:qwen2.5-coder-7b-instruct", "qwen2.5-coder-0.5b-instruct", "/models/x"):
        assert models.embedded_model(spec) is None and models.embedded_spec(spec) == spec
    with pytest.raises(ModelNotFoundError, match="not found.*'embedded:qwen2.5-coder-1.5b-instruct'"):
        resolve_model("embedded:qwen2.5-coder-7b-instruct")


def test_every_embedded_model_installs_through_its_extra_and_make_target() -> None:
    """The install hint of each EMBEDDED_MODELS entry names a pip extra that pins exactly its chunk packages and a
    Makefile target that installs that extra."""
    import tomllib

    root = Path(__file__).resolve().parent.parent
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    makefile = (root / "Makefile").read_text()
    for model in models.EMBEDDED_MODELS:
        pinned = {requirement.split("==")[0].replace("-", "_") for requirement in extras[model.extra]
                  if "==" in requirement}
        assert pinned == set(model.part_modules), model.extra
        target = re.search(r"`make ([\w.-]+)`", model.install_hint).group(1)
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), target
        if target != "install":
            assert f'".[{model.extra}]"' in makefile


def test_a_registered_model_is_assembled_from_its_chunk_packages_with_fake_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new embedded model is one EMBEDDED_MODELS entry: its chunks (here a tiny Qwen2 GGUF cut in three, each in a
    stand-in module with the chunk packages' `get_part_path`) are joined, checked and converted once, for transformers
    and for llama.cpp alike; a damaged chunk fails with the reinstall hint and leaves nothing in the cache."""
    import hashlib
    import types

    from backends.llama_cpp import gguf_path_for

    monkeypatch.setenv(sources.CACHE_ENV_VAR, str(tmp_path / "cache"))
    reference, _ = _write_tiny_qwen2_gguf(tmp_path / "whole.gguf")
    data = (tmp_path / "whole.gguf").read_bytes()
    cuts = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    names = []
    for i in range(3):
        chunk = tmp_path / f"part{i}.bin"
        chunk.write_bytes(data[cuts[i]:cuts[i + 1]])
        names.append(f"simulagents_test_part{i}")
        module = types.ModuleType(names[-1])
        module.get_part_path = lambda chunk=chunk: str(chunk)
        monkeypatch.setitem(sys.modules, names[-1], module)
    tiny = models.EmbeddedModel("tiny-qwen2", tuple(names), len(data), hashlib.sha256(data).hexdigest(), "tiny")
    monkeypatch.setattr(models, "EMBEDDED_MODELS", (*models.EMBEDDED_MODELS, tiny))

    assert gguf_path_for("embedded:tiny-qwen2").read_bytes() == data
    path = resolve_model("embedded:tiny-qwen2")
    assert path == tmp_path / "cache" / "hf" / "tiny-qwen2"
    model, tokenizer = load_causal_lm("embedded:tiny-qwen2")
    ids = tokenizer("The cat sat on the mat.", return_tensors="pt").input_ids
    reference.to(torch.bfloat16).to(torch.float32)  # the cache stores bfloat16
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, reference(ids).logits, atol=1e-4, rtol=0)

    shutil.rmtree(tmp_path / "cache")
    (tmp_path / "part1.bin").write_bytes(bytes(len(data[cuts[1]:cuts[2]])))  # same size, other bytes
    with pytest.raises(EmbeddedModelUnavailableError, match=re.escape('reinstall them: pip install "simulagents[tiny]"')):
        resolve_model("embedded:tiny-qwen2")
    assert not any((tmp_path / "cache").rglob("*.gguf")) and not any((tmp_path / "cache").rglob("config.json"))


def _write_tiny_qwen2_gguf(path: Path) -> tuple[torch.nn.Module, object]:
    """A float32 GGUF of the tiny Qwen2 (llama.cpp tensor names, GPT-2 style BPE tokenizer, chat template)."""
    gguf = pytest.importorskip("gguf")
    model, tokenizer = build_tiny_model("qwen2", seed=0)
    config = model.config
    tokenizer_json = json.loads(tokenizer.backend_tokenizer.to_str())
    vocab = tokenizer_json["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.get)
    special = {added["content"] for added in tokenizer_json["added_tokens"]}
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_name("tiny qwen2")
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_attention_heads)
    writer.add_head_count_kv(config.num_key_value_heads)
    writer.add_rope_freq_base(config.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t in tokens])
    writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in tokenizer_json["model"]["merges"]])
    writer.add_bos_token_id(tokenizer.bos_token_id)
    writer.add_eos_token_id(tokenizer.eos_token_id)
    writer.add_pad_token_id(tokenizer.pad_token_id)
    writer.add_chat_template(tokenizer.chat_template)
    top_level = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
    in_block = {
        "input_layernorm": "attn_norm",
        "post_attention_layernorm": "ffn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for name, tensor in model.state_dict().items():
        module, kind = name.rsplit(".", 1)
        if module in top_level:
            gguf_name = f"{top_level[module]}.{kind}"
        else:
            _, _, block, *rest = module.split(".")
            gguf_name = f"blk.{block}.{in_block['.'.join(rest)]}.{kind}"
        writer.add_tensor(gguf_name, tensor.numpy().astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model, tokenizer


def test_gguf_file_is_dequantised_once_into_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sources.CACHE_ENV_VAR, str(tmp_path / "cache"))
    reference, reference_tokenizer = _write_tiny_qwen2_gguf(tmp_path / "tiny-qwen2.gguf")
    path = resolve_model(str(tmp_path / "tiny-qwen2.gguf"))
    assert path.parent == tmp_path / "cache" / "hf" and path.name.startswith("tiny-qwen2-")
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no staging leftovers
    marker = path / models.SOURCE_MARKER
    written = marker.stat().st_mtime_ns
    assert resolve_model(str(tmp_path / "tiny-qwen2.gguf")) == path and marker.stat().st_mtime_ns == written
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["dtype"] == "bfloat16"
    model, tokenizer = load_causal_lm(str(path))
    assert tokenizer.chat_template == reference_tokenizer.chat_template
    prompt = tokenizer.apply_chat_template([USER], tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    assert ids.tolist() == reference_tokenizer(prompt, return_tensors="pt").input_ids.tolist()
    reference.to(torch.bfloat16).to(torch.float32)  # the cache stores bfloat16
    with torch.no_grad():  # not bit-identical: GGUF stores rms_norm_eps as float32 (1e-6 -> 9.99999997e-7)
        torch.testing.assert_close(model(ids).logits, reference(ids).logits, atol=1e-4, rtol=0)


@pytest.mark.real_model
def test_embedded_model_is_qwen2_with_a_chat_template(embedded_model_path: Path) -> None:
    assert embedded_model_path == sources.cache_dir() / "hf" / models.EMBEDDED_MODELS[0].name
    assert resolve_model(models.EMBEDDED_MODEL) == embedded_model_path
    tokenizer = AutoTokenizer.from_pretrained(embedded_model_path)
    assert tokenizer.is_fast and "<|im_start|>" in tokenizer.chat_template
    config = AutoConfig.from_pretrained(embedded_model_path)
    assert config.model_type == "qwen2" and config.architectures == ["Qwen2ForCausalLM"]
    assert (config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads) == (24, 14, 2)
    assert getattr(config, "quantization_config", None) is None
    gguf = models.embedded_gguf_path()
    assert gguf.stat().st_size == models.EMBEDDED_MODELS[0].gguf_size


@pytest.mark.real_model
def test_embedded_model_loads_and_translates_the_first_word(embedded_model_path: Path) -> None:
    model, tokenizer = load_causal_lm("embedded")
    prompt = tokenizer.apply_chat_template([SYSTEM, USER], tokenize=False, add_generation_prompt=True)
    encoded = tokenizer(prompt, return_tensors="pt", return_offsets_mapping=True)
    assert encoded.offset_mapping.shape[1] == encoded.input_ids.shape[1]
    with torch.no_grad():
        next_token = model(encoded.input_ids).logits[0, -1].argmax()
    assert tokenizer.decode(next_token).strip() == "Der"  # greedy: "Der Kater sitte auf dem Mat."


def test_int8_loads_quantized_linears_that_stay_close_to_float32_and_still_capture(
    tiny_checkpoint: Callable[[str], Path],
) -> None:
    from backends.hf.lm import CausalLM

    path = str(tiny_checkpoint("qwen3"))
    reference, tokenizer = load_causal_lm(path, dtype="float32")
    quantized = CausalLM.load(path, dtype="int8")
    linears = [m for m in quantized.model.modules() if type(m) is torch.nn.Linear]
    dynamic = [m for m in quantized.model.modules() if isinstance(m, torch.ao.nn.quantized.dynamic.Linear)]
    assert not linears and dynamic
    ids = torch.tensor([tokenizer("the cat sat on the mat")["input_ids"]])
    with torch.no_grad():
        expected, got = reference(ids).logits, quantized.model(ids).logits
    assert (got - expected).abs().max() <= 0.05 * expected.abs().max()
    draft = quantized.session([(0, 0), (1, 1)]).draft(ids[0].tolist(), 4)
    attention = draft.source_attention(range(ids.shape[1]))
    assert attention.shape == (len(draft.tokens), 2, ids.shape[1]) and torch.all(attention >= 0)


def test_int8_is_refused_off_the_cpu(tiny_checkpoint: Callable[[str], Path]) -> None:
    with pytest.raises(ModelLoadError, match="CPU only"):
        load_causal_lm(str(tiny_checkpoint("qwen3")), dtype="int8", device="cuda")
