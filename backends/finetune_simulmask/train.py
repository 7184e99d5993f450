"""The SimulMask training loop: shuffled pairs -> one prompt per pair (the decoder's) -> SimulMask batches -> AdamW
with warmup and inverse square root decay; loss log, checkpoints and the held-out split go to the output directory."""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from backends.finetune_gpe.data import ParallelCorpus
from backends.finetune_simulmask.checkpoint import save_checkpoint
from backends.finetune_simulmask.config import LORA_TARGETS, FinetuneConfig
from backends.simulmask.loading import load_alibi_lm
from backends.simulmask.mask import collate_simulmask, simulmask_forward
from backends.simulmask.prompt import segment_pair, simulmask_template


def lora_wrap(model, config: FinetuneConfig):
    from peft import LoraConfig, get_peft_model

    present = {name.rsplit(".", 1)[-1] for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)}
    targets = sorted(present & set(LORA_TARGETS))
    if not targets:
        raise ValueError(f"none of the LoRA target projections {LORA_TARGETS} exist in this model; use method full")
    lora = LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=targets, task_type="CAUSAL_LM")
    return get_peft_model(model, lora)


def learning_rate_at(step: int, config: FinetuneConfig) -> float:
    """Linear warmup to the peak over `warmup_steps`, then peak * sqrt(warmup_steps / step) (inverse square root)."""
    step = step + 1
    return config.learning_rate * min(step / config.warmup_steps, math.sqrt(config.warmup_steps / step))


def finetune(config: FinetuneConfig, log=print) -> Path:
    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = ParallelCorpus.read(config.source_file, config.target_file)
    train, test = corpus.split(config.held_out, config.max_words)
    (out / "heldout.source").write_text("\n".join(test.sources) + "\n")
    (out / "heldout.target").write_text("\n".join(test.targets) + "\n")
    log(f"{len(train)} training pairs, {len(test)} held out -> {out}/heldout.*")

    model, tokenizer = load_alibi_lm(config.model, dtype=config.model_dtype, device=config.model_device)
    template = simulmask_template(tokenizer, config.source_lang, config.target_lang)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if config.method == "lora":
        model = lora_wrap(model, config)
    model.train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    log(f"training {sum(p.numel() for p in parameters) / 1e6:.2f}M parameters ({config.method}), k={config.k}, "
        f"simulmask={config.simulmask}, alignment={config.alignment}")
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    order: list[int] = []
    metadata = {"base_model": config.model, "method": config.method, "k": config.k, "simulmask": config.simulmask,
                "alignment": config.alignment, "source_lang": config.source_lang, "target_lang": config.target_lang}
    losses, started, step = [], time.monotonic(), 0
    with (out / "loss.jsonl").open("a") as loss_log:
        for step in range(config.max_steps):
            step_loss = 0.0
            for _ in range(config.accumulation):
                if not order:
                    order = list(range(len(train)))
                    rng.shuffle(order)
                indices, order = order[: config.batch_size], order[config.batch_size:]
                examples = [segment_pair(tokenizer, template, train.sources[i], train.targets[i]) for i in indices]
                batch = collate_simulmask(examples, config.k, pad_id, simulmask=config.simulmask,
                                          alignment=config.alignment).to(config.model_device)
                loss = simulmask_forward(model, batch).loss
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
                save_checkpoint(model, out / f"checkpoint-{step + 1}", {**metadata, "step": step + 1})
            if config.max_minutes and minutes >= config.max_minutes:
                log(f"time budget of {config.max_minutes} min reached after {step + 1} steps")
                break
    final = save_checkpoint(model, out / "final", {**metadata, "step": step + 1})
    log(f"saved {final}")
    return final
