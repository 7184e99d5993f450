"""The knobs of the SimulMask wait-k system (SimulEval text): names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob


@dataclass(frozen=True)
class SimulMaskConfig:
    model: str = knob("tiiuae/falcon-rw-1b", "base ALiBi model (Falcon with alibi=True or Bloom): a Hugging Face id "
                                             "or a local directory")
    checkpoint: str = knob("", "fine-tuning checkpoint directory from `python -m backends.finetune_simulmask` (LoRA "
                               "or full); empty: the base model as it is")
    source_lang: str = knob("en", "source language code")
    target_lang: str = knob("fr", "target language code (a language written with spaces between words)")
    k: int = knob(5, "wait-k lag in source words (paper: trained at wait-9, evaluated at wait-5)")
    max_lag: int = knob(10, "once the source has ended, stop after this many target words beyond the source length")
    recompute: bool = knob(False, "baseline: re-encode the prediction (p2 + target) after every read instead of "
                                  "reusing its KV cache")
    max_word_tokens: int = knob(32, "a target word ends after at most this many tokens")
    model_dtype: str = knob("float32", "torch dtype of the model: float32, bfloat16 or float16")
    model_device: str = knob("cpu", "torch device of the model, e.g. cpu or cuda")

    def validate(self) -> None:
        from backends.hf.prompt import language_name
        from policies.units import target_unit_for

        try:
            language_name(self.source_lang), language_name(self.target_lang)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.source_lang == self.target_lang:
            raise ConfigError(f"source and target language are both {self.source_lang!r}")
        if target_unit_for(self.target_lang) != "word":
            raise ConfigError(f"SimulMask wait-k writes whitespace words; target language {self.target_lang!r} is "
                              f"written without spaces (use agents.alignatt4llm for it)")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.max_lag < 0 or self.max_word_tokens < 1:
            raise ConfigError("max_lag must be >= 0 and max_word_tokens >= 1")
        if self.model_dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"model_dtype must be float32, bfloat16 or float16, got {self.model_dtype!r}")
