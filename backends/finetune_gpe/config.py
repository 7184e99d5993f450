"""The knobs of GPE fine-tuning: the shared fine-tuning knobs with GPE's defaults, plus the group positions."""
from __future__ import annotations

from dataclasses import dataclass

from backends.finetune.config import FinetuneKnobs
from common.config import ConfigError, knob, with_default
from common.knobs import GroupPositionKnob

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj", "gate_proj", "up_proj", "down_proj",
                "gate_up_proj")


@dataclass(frozen=True)
class GPEFinetuneConfig(FinetuneKnobs, GroupPositionKnob):
    output_dir: str = with_default(FinetuneKnobs, "output_dir", "runs/gpe_finetune")
    streaming: bool = knob(True, "streaming mask and group positions (false: plain causal batch fine-tuning)")

    def validate(self) -> None:
        super().validate()
        if self.phi < 0:
            raise ConfigError(f"phi must be >= 0, got {self.phi}")
