"""The knobs of SimulMask fine-tuning: names, defaults and help in one place (defaults: the paper's optimiser)."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob

LORA_TARGETS = ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")  # Falcon and Bloom projections


@dataclass(frozen=True)
class FinetuneConfig:
    model: str = knob("tiiuae/falcon-rw-1b", "base ALiBi model: a Hugging Face id or local directory (Falcon with "
                                             "alibi=True, or Bloom)")
    source_file: str = knob("", "source side of the parallel corpus, one sentence per line")
    target_file: str = knob("", "target side, line-aligned with source_file")
    source_lang: str = knob("en", "source language code")
    target_lang: str = knob("fr", "target language code")
    output_dir: str = knob("runs/simulmask_finetune", "where checkpoints, loss log and held-out split are written")
    held_out: int = knob(100, "the last N pairs are held out for evaluation (training pairs are disjoint from them)")
    max_words: int = knob(0, "train only on pairs with at most this many words per side (0: all)")
    k: int = knob(9, "wait-k lag of the training mask (paper: trained at wait-9, evaluated at wait-5)")
    simulmask: bool = knob(True, "SimulMask with modified ALiBi (false: plain causal fine-tuning, for comparison)")
    alignment: str = knob("predicted", "predicted (what the cached decoder computes) or reference (Simul-LLM's mask, "
                                       "which leaks one source word into multi-token words)")
    method: str = knob("full", "full (paper) or lora (peft)")
    lora_rank: int = knob(64, "LoRA rank r (Simul-LLM: 64)")
    lora_alpha: int = knob(16, "LoRA alpha (Simul-LLM: 16)")
    lora_dropout: float = knob(0.1, "LoRA dropout")
    learning_rate: float = knob(2e-4, "peak learning rate (paper: 2e-4)")
    weight_decay: float = knob(0.1, "AdamW weight decay (paper: 0.1)")
    warmup_steps: int = knob(100, "linear warmup steps, then inverse square root decay (paper's scheduler)")
    batch_size: int = knob(16, "sentence pairs per forward")
    accumulation: int = knob(4, "forwards per optimizer step (paper: 16 x 4 = 64 pairs per step)")
    max_steps: int = knob(10000, "optimizer steps")
    max_minutes: float = knob(0.0, "stop (and save) after this many minutes of training (0: no limit)")
    save_every: int = knob(1000, "save a checkpoint every N steps (and at the end)")
    log_every: int = knob(10, "append the mean loss to loss.jsonl every N steps")
    seed: int = knob(0, "shuffling and dropout seed")
    model_dtype: str = knob("float32", "torch dtype of the weights: float32 or bfloat16 (paper: bfloat16 on GPU)")
    model_device: str = knob("cpu", "torch device, e.g. cpu or cuda")
    threads: int = knob(0, "torch CPU threads (0: torch's default)")

    def validate(self) -> None:
        if not self.source_file or not self.target_file:
            raise ConfigError("source_file and target_file are required (two line-aligned text files)")
        if self.method not in ("lora", "full"):
            raise ConfigError(f"method must be lora or full, got {self.method!r}")
        if self.alignment not in ("predicted", "reference"):
            raise ConfigError(f"alignment must be predicted or reference, got {self.alignment!r}")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if min(self.batch_size, self.accumulation, self.max_steps, self.warmup_steps) < 1 or self.learning_rate <= 0:
            raise ConfigError("batch_size, accumulation, max_steps and warmup_steps must be >= 1, learning_rate > 0")
        if self.model_dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"model_dtype must be float32 or bfloat16 for training, got {self.model_dtype!r}")
