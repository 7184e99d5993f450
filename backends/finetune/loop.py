"""The training loop: shuffled pairs -> the recipe's batch loss -> AdamW with warmup and the configured decay,
gradient accumulation and clipping; loss log, checkpoints and the held-out split go to the output directory."""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from backends.finetune.config import FinetuneKnobs, TrainingLoopKnobs
from backends.finetune.data import ParallelCorpus
from backends.finetune.recipe import Recipe


def lora_wrap(model, config: FinetuneKnobs, lora_targets: tuple[str, ...]):
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    targets = sorted(present & set(lora_targets))
    if not targets:
        raise ValueError(f"none of the LoRA target projections {lora_targets} exist in this model; use method full")
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def learning_rate_at(step: int, config: TrainingLoopKnobs) -> float:
    """Linear warmup to the peak over `warmup_steps` (step 0 is the first), then `linear`: decay to
    `final_lr_fraction` x peak at `max_steps`, or `inverse_sqrt`: peak * sqrt(warmup_steps / (step + 1))."""
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    if config.lr_schedule == "inverse_sqrt":
        return config.learning_rate * math.sqrt(config.warmup_steps / (step + 1))
    progress = min(1.0, (step - config.warmup_steps) / max(config.max_steps - config.warmup_steps, 1))
    return config.learning_rate * (1 - (1 - config.final_lr_fraction) * progress)


def finetune(config: FinetuneKnobs, recipe: Recipe, log=print) -> Path:
    """Train on `config.source_file`/`target_file` minus the held-out tail; returns the final checkpoint."""
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    train, test = ParallelCorpus.read(config.source_file, config.target_file).split(config.held_out, config.max_words)
    (out / "heldout.source").write_text("\n".join(test.sources) + "\n")
    (out / "heldout.target").write_text("\n".join(test.targets) + "\n")
    log(f"{len(train)} training pairs, {len(test)} held out -> {out}/heldout.*")

    model, tokenizer = recipe.load(config)
    if config.method == "lora":
        model = lora_wrap(model, config, recipe.lora_targets)
    model.train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    metadata = {"base_model": config.model, "method": config.method, **recipe.metadata(config)}
    log(f"training {sum(p.numel() for p in parameters) / 1e6:.2f}M parameters, "
        + ", ".join(f"{key}={value}" for key, value in metadata.items() if key != "base_model"))
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    order: list[int] = []
    losses, started, step = [], time.monotonic(), 0
    with (out / "loss.jsonl").open("a") as loss_log:
        for step in range(config.max_steps):
            step_loss = 0.0
            for _ in range(config.accumulation):
                if not order:
                    order = list(range(len(train)))
                    rng.shuffle(order)
                indices, order = order[: config.batch_size], order[config.batch_size:]
                loss = recipe.batch_loss(model, tokenizer, [train.sources[i] for i in indices],
                                         [train.targets[i] for i in indices], config)
                if not math.isfinite(loss.item()):
                    raise FloatingPointError(f"loss is {loss.item()} at step {step}; lower learning_rate")
                (loss / config.accumulation).backward()
                step_loss += loss.item() / config.accumulation
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(step, config)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(step_loss)
            minutes = (time.monotonic() - started) / 60
            if (step + 1) % config.log_every == 0:
                record = {"step": step + 1, "loss": sum(losses[-config.log_every:]) / config.log_every,
                          "minutes": round(minutes, 2)}
                loss_log.write(json.dumps(record) + "\n")
                loss_log.flush()
                log(f"step {record['step']}: loss {record['loss']:.4f} ({minutes:.1f} min)")
            if (step + 1) % config.save_every == 0:
                recipe.checkpoints.save(model, out / f"checkpoint-{step + 1}", {**metadata, "step": step + 1})
            if config.max_minutes and minutes >= config.max_minutes:
                log(f"time budget of {config.max_minutes} min reached after {step + 1} steps")
                break
    final = recipe.checkpoints.save(model, out / "final", {**metadata, "step": step + 1})
    log(f"saved {final}")
    return final
