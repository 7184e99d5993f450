"""The knobs every training command has: `TrainingLoopKnobs` (steps, batches, schedule, checkpoints; STAR trains
on these) and `FinetuneKnobs` (plus the LLM, corpus and LoRA knobs; GPE and SimulMask subclass it)."""
from __future__ import annotations

from dataclasses import dataclass

from common.config import ConfigError, knob, with_default
from common.knobs import LanguagePairKnobs, ModelKnobs, WaitkKnob

LR_SCHEDULES = ("linear", "inverse_sqrt")


@dataclass(frozen=True)
class TrainingLoopKnobs:
    output_dir: str = knob("runs/finetune", "where checkpoints and the loss log are written (fine-tuning: also the "
                                            "held-out split)")
    learning_rate: float = knob(2e-4, "peak learning rate")
    lr_schedule: str = knob("linear", "after the linear warmup: linear (decay to final_lr_fraction x peak at "
                                      "max_steps) or inverse_sqrt (peak * sqrt(warmup_steps / step))")
    final_lr_fraction: float = knob(0.0, "linear schedule: the learning rate at max_steps, as a fraction of the peak")
    warmup_steps: int = knob(20, "linear warmup steps")
    batch_size: int = knob(8, "examples per forward")
    max_steps: int = knob(200, "optimizer steps")
    max_minutes: float = knob(0.0, "stop (and save) after this many minutes of training (0: no limit)")
    save_every: int = knob(100, "save a checkpoint every N steps (and at the end)")
    log_every: int = knob(5, "append the mean loss to the log every N steps")
    seed: int = knob(0, "initialisation, shuffling and dropout seed")
    threads: int = knob(0, "torch CPU threads (0: torch's default)")

    def validate(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if min(self.batch_size, self.max_steps, self.warmup_steps) < 1 or self.learning_rate <= 0:
            raise ConfigError("batch_size, max_steps and warmup_steps must be >= 1, learning_rate > 0")
        if not 0.0 <= self.final_lr_fraction <= 1.0:
            raise ConfigError(f"final_lr_fraction must be in [0, 1], got {self.final_lr_fraction}")


@dataclass(frozen=True)
class FinetuneKnobs(TrainingLoopKnobs, ModelKnobs, LanguagePairKnobs, WaitkKnob):
    source_file: str = knob("", "source side of the parallel corpus, one sentence per line")
    target_file: str = knob("", "target side, line-aligned with source_file")
    source_lang: str = with_default(LanguagePairKnobs, "source_lang", "cs")
    target_lang: str = with_default(LanguagePairKnobs, "target_lang", "en")
    held_out: int = knob(100, "the last N pairs are held out for evaluation (training pairs are disjoint from them)")
    max_words: int = knob(0, "train only on pairs with at most this many words per side (0: all)")
    method: str = knob("lora", "lora (peft) or full")
    lora_rank: int = knob(32, "LoRA rank r")
    lora_alpha: int = knob(64, "LoRA alpha")
    lora_dropout: float = knob(0.05, "LoRA dropout")
    weight_decay: float = knob(0.0, "AdamW weight decay")
    accumulation: int = knob(1, "forwards per optimizer step (pairs per step = batch_size x accumulation)")

    def validate(self) -> None:
        super().validate()
        if not self.source_file or not self.target_file:
            raise ConfigError("source_file and target_file are required (two line-aligned text files)")
        if self.method not in ("lora", "full"):
            raise ConfigError(f"method must be lora or full, got {self.method!r}")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.accumulation < 1:
            raise ConfigError(f"accumulation must be >= 1, got {self.accumulation}")
        if self.model_dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"model_dtype must be float32 or bfloat16 for training, got {self.model_dtype!r}")
