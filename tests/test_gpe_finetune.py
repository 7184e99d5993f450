"""GPE fine-tuning on a tiny model: the loss falls, checkpoints (LoRA and full) reload to the trained weights, the
held-out split is disjoint, and bad input is a clear error."""
from __future__ import annotations

import json

import pytest
import torch

from common.config import ConfigError, build_config
from backends.finetune_gpe.checkpoint import apply_checkpoint
from backends.finetune_gpe.config import GPEFinetuneConfig
from backends.finetune.data import ParallelCorpus
from backends.finetune_gpe.train import finetune
from backends.models import load_causal_lm
from backends.streaming_masks.hf_inputs import collate_streaming
from backends.streaming_masks.loading import translation_template
from backends.streaming_masks.segments import segment_example
from tiny_checkpoints import TINY_CORPUS

PAIRS = [(TINY_CORPUS[i], TINY_CORPUS[i + 1]) for i in range(0, len(TINY_CORPUS) - 1, 4)]  # en, de


@pytest.fixture
def corpus_files(tmp_path):
    sources = [source for source, _ in PAIRS] * 3
    targets = [target for _, target in PAIRS] * 3
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n")
    return tmp_path / "src.txt", tmp_path / "tgt.txt"


def held_out_loss(model_spec: str, checkpoint=None) -> float:
    model, tokenizer = load_causal_lm(model_spec)
    if checkpoint is not None:
        model = apply_checkpoint(model, checkpoint)
    template = translation_template(tokenizer, "en", "de")
    examples = [segment_example(tokenizer, template, s, t) for s, t in PAIRS]
    batch = collate_streaming(examples, k=2, phi=0, pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        return model(**batch.model_inputs()).loss.item()


@pytest.mark.parametrize("method,learning_rate", [("lora", 1e-2), ("full", 3e-3)])
def test_loss_falls_and_checkpoint_reloads(tiny_checkpoint, corpus_files, tmp_path, method, learning_rate):
    model = str(tiny_checkpoint("qwen2"))
    config = build_config(GPEFinetuneConfig, {
        "model": model, "source_file": str(corpus_files[0]), "target_file": str(corpus_files[1]),
        "source_lang": "en", "target_lang": "de", "output_dir": str(tmp_path / "run"), "held_out": 2, "k": 2,
        "method": method, "learning_rate": learning_rate, "warmup_steps": 2, "batch_size": 4, "max_steps": 30,
        "save_every": 15, "log_every": 5})
    final = finetune(config, log=lambda message: None)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "loss.jsonl").read_text().splitlines()]
    # (a tiny random model's logits are small and its final norm is not adapted by LoRA: modest but clear drops)
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.15
    assert (tmp_path / "run" / "checkpoint-15").is_dir()
    # the saved checkpoint, applied to freshly loaded base weights, has learned the training pairs
    assert held_out_loss(model, final) < held_out_loss(model) - 0.15


def test_held_out_lines_are_disjoint_by_content(tmp_path):
    sources = ["a b", "c d", "e f", "a b", "g h"]
    targets = ["A B", "C D", "E F", "A B", "G H"]
    corpus = ParallelCorpus(sources, targets)
    train, test = corpus.split(held_out=2)
    assert test.sources == ["a b", "g h"]
    assert train.sources == ["c d", "e f"]  # "a b" is a test line, so its earlier copy is not trained on
    assert not set(train.sources) & set(test.sources)


def test_bad_input_is_a_clear_error(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("eins\n")
    with pytest.raises(ValueError, match="one target line per source line"):
        ParallelCorpus.read(tmp_path / "a.txt", tmp_path / "b.txt")
    with pytest.raises(ConfigError, match="source_file and target_file are required"):
        build_config(GPEFinetuneConfig, {})
    with pytest.raises(ConfigError, match="lora or full"):
        build_config(GPEFinetuneConfig, {"source_file": "a", "target_file": "b", "method": "qlora"})
    with pytest.raises(FileNotFoundError, match="not a GPE fine-tuning checkpoint"):
        apply_checkpoint(None, tmp_path)
