"""The knobs of GPE fine-tuning: names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "gate_proj", "up_proj", "down_proj",
                "gate_up_proj")


@dataclass(frozen=True)
class FinetuneConfig:
    model: str = knob("embedded", "base weights: a Hugging Face id, a local directory, a .gguf file or 'embedded'")
    source_file: str = knob("", "source side of the parallel corpus, one sentence per line")
    target_file: str = knob("", "target side, line-aligned with source_file")
    source_lang: str = knob("cs", "source language code")
    target_lang: str = knob("en", "target language code")
    output_dir: str = knob("runs/gpe_finetune", "where checkpoints, loss log and held-out split are written")
    held_out: int = knob(100, "the last N pairs are held out for evaluation (training pairs are disjoint from them)")
    max_words: int = knob(0, "train only on pairs with at most this many words per side (0: all)")
    k: int = knob(5, "wait-k lag of the training mask (source words before the first target word)")
    phi: int = knob(0, "first position id of the target group (paper: 0)")
    streaming: bool = knob(True, "streaming mask and group positions (false: plain causal batch fine-tuning)")
    method: str = knob("lora", "lora (peft) or full")
    lora_rank: int = knob(32, "LoRA rank r")
    lora_alpha: int = knob(64, "LoRA alpha")
    lora_dropout: float = knob(0.05, "LoRA dropout")
    learning_rate: float = knob(2e-4, "peak learning rate (linear warmup, then linear decay to 0)")
    warmup_steps: int = knob(20, "linear warmup steps")
    batch_size: int = knob(8, "sentence pairs per step")
    max_steps: int = knob(200, "optimizer steps")
    max_minutes: float = knob(0.0, "stop (and save) after this many minutes of training (0: no limit)")
    save_every: int = knob(100, "save a checkpoint every N steps (and at the end)")
    log_every: int = knob(5, "append the mean loss to loss.jsonl every N steps")
    seed: int = knob(0, "shuffling and dropout seed")
    model_dtype: str = knob("float32", "torch dtype of the weights: float32 or bfloat16")
    model_device: str = knob("cpu", "torch device, e.g. cpu or cuda")
    threads: int = knob(0, "torch CPU threads (0: torch's default)")

    def validate(self) -> None:
        if not self.source_file or not self.target_file:
            raise ConfigError("source_file and target_file are required (two line-aligned text files)")
        if self.method not in ("lora", "full"):
            raise ConfigError(f"method must be lora or full, got {self.method!r}")
        if self.k < 1 or self.phi < 0:
            raise ConfigError(f"need k >= 1 and phi >= 0, got k={self.k}, phi={self.phi}")
        if self.batch_size < 1 or self.max_steps < 1 or self.learning_rate <= 0:
            raise ConfigError("batch_size and max_steps must be >= 1 and learning_rate > 0")
        if self.model_dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"model_dtype must be float32 or bfloat16 for training, got {self.model_dtype!r}")
