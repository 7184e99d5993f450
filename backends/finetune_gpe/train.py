"""The training loop: shuffled pairs -> segmented examples -> streaming batches -> AdamW with warmup and linear
decay; the loss log, checkpoints and the held-out split are written to the output directory."""
from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import torch

from backends.finetune_gpe.checkpoint import save_checkpoint
from backends.finetune_gpe.config import LORA_TARGETS, FinetuneConfig
from backends.finetune_gpe.data import ParallelCorpus
from backends.streaming_masks.hf_inputs import collate_streaming
from backends.streaming_masks.loading import attention_implementation, translation_template
from backends.streaming_masks.segments import segment_example


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
    """Linear warmup to the peak over `warmup_steps`, then linear decay to 0 at `max_steps`."""
    if step < config.warmup_steps:
        return config.learning_rate * (step + 1) / config.warmup_steps
    remaining = max(config.max_steps - config.warmup_steps, 1)
    return config.learning_rate * max(0.0, 1 - (step - config.warmup_steps) / remaining)


def finetune(config: FinetuneConfig, log=print) -> Path:
    from backends.models import load_causal_lm

    if config.threads:
        torch.set_num_threads(config.threads)
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = ParallelCorpus.read(config.source_file, config.target_file)
    train, test = corpus.split(config.held_out, config.max_words)
    (out / "heldout.source").write_text("\n".join(test.sources) + "\n")
    (out / "heldout.target").write_text("\n".join(test.targets) + "\n")
    log(f"{len(train)} training pairs, {len(test)} held out -> {out}/heldout.*")

    model, tokenizer = load_causal_lm(config.model, dtype=config.model_dtype, device=config.model_device,
                                      attn_implementation=attention_implementation(config.model))
    template = translation_template(tokenizer, config.source_lang, config.target_lang)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if config.method == "lora":
        model = lora_wrap(model, config)
    model.train()
    parameters = [p for p in model.parameters() if p.requires_grad]
    log(f"training {sum(p.numel() for p in parameters) / 1e6:.2f}M parameters ({config.method}), k={config.k}, "
        f"phi={config.phi}, streaming={config.streaming}")
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=0.0)
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    order: list[int] = []
    metadata = {"base_model": config.model, "method": config.method, "k": config.k, "phi": config.phi,
                "streaming": config.streaming, "source_lang": config.source_lang, "target_lang": config.target_lang}
    losses, started = [], time.monotonic()
    step = 0
    with (out / "loss.jsonl").open("a") as loss_log:
        for step in range(config.max_steps):
            if not order:
                order = list(range(len(train)))
                rng.shuffle(order)
            indices, order = order[: config.batch_size], order[config.batch_size:]
            examples = [segment_example(tokenizer, template, train.sources[i], train.targets[i]) for i in indices]
            batch = collate_streaming(examples, config.k, config.phi, pad_id, model.dtype, config.streaming)
            loss = model(**batch.to(config.model_device).model_inputs()).loss
            if not math.isfinite(loss.item()):
                raise FloatingPointError(f"loss is {loss.item()} at step {step}; lower learning_rate")
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate_at(step, config)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
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
