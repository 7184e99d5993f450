"""The knobs of SimulMask fine-tuning: the shared fine-tuning knobs with the paper's defaults (model, optimiser,
schedule), plus the mask's own knobs."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob, language_knob
from backends.finetune.config import FinetuneKnobs

LORA_TARGETS = ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")  # Falcon and Bloom projections


@dataclass(frozen=True)
class FinetuneConfig(FinetuneKnobs):
    model: str = knob("tiiuae/falcon-rw-1b", "base ALiBi model: a Hugging Face id or local directory (Falcon with "
                                             "alibi=True, or Bloom)")
    source_lang: str = language_knob("en", "source language")
    target_lang: str = language_knob("fr", "target language")
    output_dir: str = knob("runs/simulmask_finetune", "where checkpoints, loss log and held-out split are written")
    k: int = knob(9, "wait-k lag of the training mask (paper: trained at wait-9, evaluated at wait-5)")
    method: str = knob("full", "full (paper) or lora (peft)")
    lora_rank: int = knob(64, "LoRA rank r (Simul-LLM: 64)")
    lora_alpha: int = knob(16, "LoRA alpha (Simul-LLM: 16)")
    lora_dropout: float = knob(0.1, "LoRA dropout")
    learning_rate: float = knob(2e-4, "peak learning rate (paper: 2e-4)")
    lr_schedule: str = knob("inverse_sqrt", "after the linear warmup: inverse_sqrt (paper) or linear")
    weight_decay: float = knob(0.1, "AdamW weight decay (paper: 0.1)")
    warmup_steps: int = knob(100, "linear warmup steps")
    batch_size: int = knob(16, "sentence pairs per forward")
    accumulation: int = knob(4, "forwards per optimizer step (paper: 16 x 4 = 64 pairs per step)")
    max_steps: int = knob(10000, "optimizer steps")
    save_every: int = knob(1000, "save a checkpoint every N steps (and at the end)")
    log_every: int = knob(10, "append the mean loss to loss.jsonl every N steps")
    model_dtype: str = knob("float32", "torch dtype of the weights: float32 or bfloat16 (paper: bfloat16 on GPU)")
    simulmask: bool = knob(True, "SimulMask with modified ALiBi (false: plain causal fine-tuning, for comparison)")
    alignment: str = knob("predicted", "predicted (what the cached decoder computes) or reference (Simul-LLM's mask, "
                                       "which leaks one source word into multi-token words)")

    def validate(self) -> None:
        super().validate()
        if self.alignment not in ("predicted", "reference"):
            raise ConfigError(f"alignment must be predicted or reference, got {self.alignment!r}")
