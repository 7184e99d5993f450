"""The knobs of the SimulMask wait-k system (SimulEval text): names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.systems.config import WordWaitkKnobs
from common.config import ConfigError, knob, with_default
from common.knobs import CheckpointKnob


@dataclass(frozen=True)
class SimulMaskConfig(WordWaitkKnobs, CheckpointKnob):
    system = "SimulMask wait-k"

    model: str = with_default(WordWaitkKnobs, "model", "tiiuae/falcon-rw-1b")  # an ALiBi model: Falcon or Bloom
    target_lang: str = with_default(WordWaitkKnobs, "target_lang", "fr")
    max_lag: int = knob(10, "once the source has ended, stop after this many target words beyond the source length")
    recompute: bool = knob(False, "baseline: re-encode the prediction (p2 + target) after every read instead of "
                                  "reusing its KV cache")

    def validate(self) -> None:
        super().validate()
        if self.max_lag < 0:
            raise ConfigError(f"max_lag must be >= 0, got {self.max_lag}")
