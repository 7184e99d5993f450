"""The knobs of the SSBD re-translation systems: the text translator (`SSBDConfig`) and the speech cascade driving
it (`SSBDCascadeConfig`), with names, defaults and help in one place."""
from __future__ import annotations

from dataclasses import dataclass

from agents.systems.config import (
    DraftBackendKnob,
    LLMTranslatorConfig,
    SpeechCascadeKnobs,
)
from common.config import ConfigError, knob, with_default

BACKENDS = ("llama_cpp", "hf")  # SSBD verifies drafts on these runtimes (backends.choice names them)


@dataclass(frozen=True)
class SSBDConfig(LLMTranslatorConfig, DraftBackendKnob):
    """SSBD runs on llama_cpp (the paper's runtime; model 'embedded' or a .gguf file) or hf (transformers)."""

    backend: str = with_default(DraftBackendKnob, "backend", "llama_cpp")
    beta: float = knob(0.2, "bias toward the draft token in verification, P' = (1-beta) P + beta delta (paper: 0.2; "
                            "0 = lossless, same output as greedy re-translation)")
    speculative: bool = knob(True, "reuse the previous output as the draft (SSBD); false: plain greedy "
                                   "re-translation from scratch at every update (the baseline)")
    mask_k: int = knob(0, "display-only mask-k: hide the last k target units of every intermediate output (they "
                          "stay in the draft); 0 shows everything")
    step_words: int = knob(3, "text input: re-translate every this many new source words (the paper's fixed lag "
                              "w = 3)")
    max_new_tokens: int = with_default(LLMTranslatorConfig, "max_new_tokens", 128)  # a whole re-translation
    n_ctx: int = with_default(DraftBackendKnob, "n_ctx", 1024)

    def validate(self) -> None:
        super().validate()
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.model_compile:
            raise ConfigError("model_compile compiles the single-token draft step of AlignAtt, wait-k and "
                              "LocalAgreement; SSBD verifies each draft in one batched forward (set model_compile: "
                              "false)")
        if not 0.0 <= self.beta <= 1.0:
            raise ConfigError(f"beta must be in [0, 1] (paper default 0.2), got {self.beta}")
        if self.mask_k < 0:
            raise ConfigError(f"mask_k must be >= 0, got {self.mask_k}")
        if self.step_words < 1:
            raise ConfigError(f"step_words must be >= 1, got {self.step_words}")
        self.validate_backend()  # gguf_weights, threads, context and dtype, as for every drafting runtime


@dataclass(frozen=True)
class SSBDCascadeConfig(SSBDConfig, SpeechCascadeKnobs):
    """ASR with word times -> transcript commit -> SSBD re-translation of the live sentence at every chunk."""

    mask_k: int = with_default(SSBDConfig, "mask_k", 2)

    def validate(self) -> None:
        super().validate()
        self.validate_speech()
