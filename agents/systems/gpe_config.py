"""The knobs of the group-position-encoding (GPE) wait-k system, text and speech cascade: names, defaults, help."""
from __future__ import annotations

from dataclasses import dataclass

from agents.systems.config import SpeechCascadeKnobs, WordWaitkKnobs
from common.config import ConfigError, knob
from common.knobs import GroupPositionKnob


@dataclass(frozen=True)
class GPEConfig(WordWaitkKnobs, GroupPositionKnob):
    system = "GPE wait-k"

    adapter: str = knob("", "fine-tuning checkpoint directory from `python -m backends.finetune_gpe` (LoRA or full); "
                            "empty: the base model as it is")
    reencode: bool = knob(False, "baseline: recompute source and target with contiguous positions after every read "
                                 "(batch-streaming) instead of the GPE cache")
    max_length_ratio: float = knob(2.0, "at most ratio * source words + 10 target words per segment")

    def validate(self) -> None:
        super().validate()
        if self.phi < 0:
            raise ConfigError(f"phi must be an integer >= 0, got {self.phi}")
        if self.max_length_ratio <= 0:
            raise ConfigError(f"max_length_ratio must be > 0, got {self.max_length_ratio}")


@dataclass(frozen=True)
class GPECascadeConfig(GPEConfig, SpeechCascadeKnobs):
    """ASR with word times feeding GPE wait-k, one step per chunk."""

    def validate(self) -> None:
        super().validate()
        self.validate_speech()
