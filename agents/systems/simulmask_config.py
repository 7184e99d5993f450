"""The knobs of the SimulMask wait-k system (SimulEval text): names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob, language_knob
from agents.systems.config import WordWaitkKnobs


@dataclass(frozen=True)
class SimulMaskConfig(WordWaitkKnobs):
    system = "SimulMask wait-k"

    model: str = knob("tiiuae/falcon-rw-1b", "base ALiBi model (Falcon with alibi=True or Bloom): a Hugging Face id "
                                             "or a local directory")
    checkpoint: str = knob("", "fine-tuning checkpoint directory from `python -m backends.finetune_simulmask` (LoRA "
                               "or full); empty: the base model as it is")
    target_lang: str = language_knob("fr", "target language (a language written with spaces between words)")
    k: int = knob(5, "wait-k lag in source words (paper: trained at wait-9, evaluated at wait-5)")
    max_lag: int = knob(10, "once the source has ended, stop after this many target words beyond the source length")
    recompute: bool = knob(False, "baseline: re-encode the prediction (p2 + target) after every read instead of "
                                  "reusing its KV cache")

    def validate(self) -> None:
        super().validate()
        if self.max_lag < 0:
            raise ConfigError(f"max_lag must be >= 0, got {self.max_lag}")
