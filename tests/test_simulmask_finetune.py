"""SimulMask fine-tuning on a tiny Falcon (ALiBi): the loss falls, checkpoints (LoRA and full) reload onto fresh base
weights, the fine-tuned model decodes through the agent, and bad input is a clear error."""
from __future__ import annotations

import json

import pytest
import torch
from tiny_checkpoints import TINY_CORPUS

from agents.systems.simulmask import SimulMaskTranslator
from agents.systems.simulmask_config import SimulMaskConfig
from backends.finetune_simulmask.__main__ import main
from backends.finetune_simulmask.checkpoint import apply_checkpoint
from backends.finetune_simulmask.config import SimulMaskFinetuneConfig
from backends.finetune_simulmask.train import finetune
from backends.simulmask.loading import load_alibi_lm
from backends.simulmask.mask import collate_simulmask, simulmask_forward
from backends.simulmask.prompt import segment_pair, simulmask_template
from common.config import ConfigError, build_config
from common.stream import SourceWord

PAIRS = [(TINY_CORPUS[i], TINY_CORPUS[i + 1]) for i in range(0, len(TINY_CORPUS) - 1, 4)]  # en, de


@pytest.fixture
def corpus_files(tmp_path):
    (tmp_path / "src.txt").write_text("\n".join(source for source, _ in PAIRS * 3) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(target for _, target in PAIRS * 3) + "\n")
    return tmp_path / "src.txt", tmp_path / "tgt.txt"


def pairs_loss(model_spec: str, checkpoint=None) -> float:
    model, tokenizer = load_alibi_lm(model_spec)
    if checkpoint is not None:
        model = apply_checkpoint(model, checkpoint)
    template = simulmask_template(tokenizer, "en", "de")
    batch = collate_simulmask([segment_pair(tokenizer, template, s, t) for s, t in PAIRS], k=2,
                              pad_token_id=tokenizer.pad_token_id)
    with torch.no_grad():
        return simulmask_forward(model, batch).loss.item()


@pytest.mark.parametrize("method,learning_rate", [("lora", 1e-2), ("full", 3e-3)])
def test_loss_falls_and_checkpoint_reloads(tiny_checkpoint, corpus_files, tmp_path, method, learning_rate):
    model = str(tiny_checkpoint("falcon"))
    config = build_config(SimulMaskFinetuneConfig, {
        "model": model, "source_file": str(corpus_files[0]), "target_file": str(corpus_files[1]),
        "source_lang": "en", "target_lang": "de", "output_dir": str(tmp_path / "run"), "held_out": 2, "k": 2,
        "method": method, "learning_rate": learning_rate, "warmup_steps": 2, "batch_size": 4, "accumulation": 1,
        "max_steps": 30, "save_every": 15, "log_every": 5})
    final = finetune(config, log=lambda message: None)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "loss.jsonl").read_text().splitlines()]
    assert len(losses) == 6 and losses[-1] < losses[0] - 0.15
    assert (tmp_path / "run" / "checkpoint-15").is_dir()
    assert json.loads((final / "simulmask_training.json").read_text())["k"] == 2
    # the saved checkpoint, applied to freshly loaded base weights, has learned the training pairs
    assert pairs_loss(model, final) < pairs_loss(model) - 0.15
    # and the agent decodes with it (the KV-cached decoder over the fine-tuned weights)
    agent_config = build_config(SimulMaskConfig, {"model": model, "checkpoint": str(final), "target_lang": "de",
                                                  "k": 2, "max_lag": 3})
    translator = SimulMaskTranslator.from_config(agent_config)
    emission = translator.flush([SourceWord(w) for w in PAIRS[0][0].split()])
    assert 1 <= len(emission.new_units) <= len(PAIRS[0][0].split()) + 3


def test_cli_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--method", "full"])  # no corpus
    assert "source_file and target_file are required" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="alignment"):
        build_config(SimulMaskFinetuneConfig, {"source_file": "a", "target_file": "b", "alignment": "query"})
    with pytest.raises(FileNotFoundError, match="not a SimulMask fine-tuning checkpoint"):
        apply_checkpoint(torch.nn.Linear(1, 1), tmp_path)
