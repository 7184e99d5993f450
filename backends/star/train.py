"""`python -m backends.star.train --train-tsv corpus/train.tsv --compressor star|cif [knobs]`: train STAR or its CIF
baseline from scratch (AdamW, warmup + linear decay to a tenth, gradient clipping) and save a checkpoint directory."""
from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import torch

from backends.finetune.loop import learning_rate_at
from backends.star.checkpoint import save_star
from backends.star.config import StarTrainConfig
from backends.star.data import collate, length_batches, load_utterances, read_tsv
from backends.star.model import StarModel, StarModelConfig
from backends.star.text import TargetVocabulary


def model_config(config: StarTrainConfig, vocab_size: int) -> StarModelConfig:
    return StarModelConfig(vocab_size=vocab_size, compressor=config.compressor, dim=config.dim, heads=config.heads,
                           encoder_layers=config.encoder_layers, semantic_layers=config.semantic_layers,
                           decoder_layers=config.decoder_layers, wait_k=config.wait_k,
                           length_penalty=config.length_penalty, ctc_weight=config.ctc_weight)


@torch.no_grad()
def mean_loss(model: StarModel, batches, vocabulary) -> float:
    model.eval()
    losses = [model(collate(batch, vocabulary))["nll"].item() for batch in batches]
    model.train()
    return sum(losses) / max(1, len(losses))


def train(config: StarTrainConfig, log=print) -> Path:
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    rows = read_tsv(config.train_tsv)
    vocabulary = TargetVocabulary.train((text for _, text in rows), config.vocab_size)
    utterances = load_utterances(rows, vocabulary)
    dev = load_utterances(read_tsv(config.dev_tsv), vocabulary) if config.dev_tsv else []
    dev_batches = length_batches(dev, config.batch_size, random.Random(0))
    model = StarModel(model_config(config, len(vocabulary)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
    out_dir = Path(config.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_file = (out_dir / "train_log.jsonl").open("a")
    log(f"{len(utterances)} utterances, {len(vocabulary)} pieces, "
        f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters")
    started, step, window = time.monotonic(), 0, []
    training = {"config": {k: getattr(config, k) for k in config.__dataclass_fields__}, "steps": 0}
    model.train()
    while step < config.max_steps:
        for batch in length_batches(utterances, config.batch_size, rng):
            if config.segmenter_steps and step == config.segmenter_steps:
                model.segmenter.requires_grad_(False)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(step, config)
            losses = model(collate(batch, vocabulary))
            optimizer.zero_grad(set_to_none=True)
            losses["loss"].backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            window.append({name: value.item() for name, value in losses.items()})
            minutes = (time.monotonic() - started) / 60
            out_of_time = bool(config.max_minutes) and minutes >= config.max_minutes
            if step % config.log_every == 0 or step == config.max_steps or out_of_time:
                record = {"step": step, "minutes": round(minutes, 2), "lr": learning_rate_at(step - 1, config),
                          **{name: sum(w[name] for w in window) / len(window) for name in window[0]}}
                window = []
                if dev_batches and (step % config.save_every == 0 or step == config.max_steps or out_of_time):
                    record["dev_nll"] = mean_loss(model, dev_batches, vocabulary)
                log_file.write(json.dumps(record) + "\n")
                log_file.flush()
                log(json.dumps(record))
            if step % config.save_every == 0 or step == config.max_steps or out_of_time:
                training.update(steps=step, minutes=round(minutes, 2))
                save_star(model, vocabulary, out_dir, training)
            if step == config.max_steps or out_of_time:
                return out_dir
    return out_dir


def main(argv: list[str] | None = None) -> int:
    from backends.finetune.cli import run_cli

    return run_cli(argv, "python -m backends.star.train", __doc__.split(":", 1)[1].strip(), StarTrainConfig, train)


if __name__ == "__main__":
    sys.exit(main())
