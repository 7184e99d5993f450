"""The knobs of GPE fine-tuning: the shared fine-tuning knobs with GPE's defaults, plus the group positions."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob
from backends.finetune.config import FinetuneKnobs

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "gate_proj", "up_proj", "down_proj",
                "gate_up_proj")


@dataclass(frozen=True)
class FinetuneConfig(FinetuneKnobs):
    output_dir: str = knob("runs/gpe_finetune", "where checkpoints, loss log and held-out split are written")
    phi: int = knob(0, "first position id of the target group (paper: 0)")
    streaming: bool = knob(True, "streaming mask and group positions (false: plain causal batch fine-tuning)")

    def validate(self) -> None:
        super().validate()
        if self.phi < 0:
            raise ConfigError(f"phi must be >= 0, got {self.phi}")
