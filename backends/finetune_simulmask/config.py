"""The knobs of SimulMask fine-tuning: the shared fine-tuning knobs with the paper's defaults (model, optimiser,
schedule), plus the mask's own knobs."""
from __future__ import annotations

from dataclasses import dataclass

from backends.finetune.config import FinetuneKnobs
from common.config import ConfigError, knob, with_default

LORA_TARGETS = ("query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h")  # Falcon and Bloom projections


@dataclass(frozen=True)
class SimulMaskFinetuneConfig(FinetuneKnobs):
    # The paper's recipe (Falcon-RW-1B, full fine-tuning at wait-9, inverse-sqrt schedule, 16 x 4 pairs per step,
    # bfloat16 on GPU); LoRA as in Simul-LLM (r 64, alpha 16).
    model: str = with_default(FinetuneKnobs, "model", "tiiuae/falcon-rw-1b")  # an ALiBi model: Falcon or Bloom
    source_lang: str = with_default(FinetuneKnobs, "source_lang", "en")
    target_lang: str = with_default(FinetuneKnobs, "target_lang", "fr")
    output_dir: str = with_default(FinetuneKnobs, "output_dir", "runs/simulmask_finetune")
    k: int = with_default(FinetuneKnobs, "k", 9)  # evaluated at wait-5
    method: str = with_default(FinetuneKnobs, "method", "full")
    lora_rank: int = with_default(FinetuneKnobs, "lora_rank", 64)
    lora_alpha: int = with_default(FinetuneKnobs, "lora_alpha", 16)
    lora_dropout: float = with_default(FinetuneKnobs, "lora_dropout", 0.1)
    lr_schedule: str = with_default(FinetuneKnobs, "lr_schedule", "inverse_sqrt")
    weight_decay: float = with_default(FinetuneKnobs, "weight_decay", 0.1)
    warmup_steps: int = with_default(FinetuneKnobs, "warmup_steps", 100)
    batch_size: int = with_default(FinetuneKnobs, "batch_size", 16)
    accumulation: int = with_default(FinetuneKnobs, "accumulation", 4)
    max_steps: int = with_default(FinetuneKnobs, "max_steps", 10000)
    save_every: int = with_default(FinetuneKnobs, "save_every", 1000)
    log_every: int = with_default(FinetuneKnobs, "log_every", 10)
    simulmask: bool = knob(True, "SimulMask with modified ALiBi (false: plain causal fine-tuning, for comparison)")
    alignment: str = knob("predicted", "predicted (what the cached decoder computes) or reference (Simul-LLM's mask, "
                                       "which leaks one source word into multi-token words)")

    def validate(self) -> None:
        super().validate()
        if self.alignment not in ("predicted", "reference"):
            raise ConfigError(f"alignment must be predicted or reference, got {self.alignment!r}")
