"""The knobs of STAR/CIF training (`python -m backends.star.train`): the model's, on the shared training-loop knobs
(steps, batches, schedule, checkpoints) with STAR's defaults."""
from __future__ import annotations

from dataclasses import dataclass

from backends.finetune.config import TrainingLoopKnobs
from backends.star.model import COMPRESSORS
from common.config import ConfigError, knob, with_default
from common.knobs import LanguagePairKnobs


@dataclass(frozen=True)
class StarTrainConfig(TrainingLoopKnobs, LanguagePairKnobs):
    train_tsv: str = knob("", "training utterances: 'wav path<TAB>transcript' per line")
    dev_tsv: str = knob("", "optional development utterances (loss logged at every save)")
    output_dir: str = with_default(TrainingLoopKnobs, "output_dir", "runs/star/model")  # star_config.json, weights
    target_lang: str = with_default(LanguagePairKnobs, "target_lang", "en")  # en with en: ASR; in the checkpoint
    compressor: str = knob("star", "star (anchors + segmenter bias in cross-attention) or cif (integrate-and-fire)")
    vocab_size: int = knob(500, "BPE pieces learnt from the training transcripts")
    dim: int = knob(192, "model width")
    heads: int = knob(4, "attention heads")
    encoder_layers: int = knob(4, "causal acoustic transformer layers")
    semantic_layers: int = knob(2, "causal semantic encoder layers (over all frames, anchors marked)")
    decoder_layers: int = knob(4, "decoder layers")
    wait_k: int = knob(3, "training cross-attention mask: target token i reads i + k - 1 anchors (0: all anchors)")
    length_penalty: float = knob(0.01, "gamma: weight of (target length - sum of segmenter scores)^2")
    ctc_weight: float = knob(0.0, "weight of an auxiliary CTC loss on the acoustic encoder (0: the paper's loss; "
                                  "helps a from-scratch encoder align on CPU budgets)")
    segmenter_steps: int = knob(0, "train the segmenter only for the first N steps, then freeze it (0: always)")
    batch_size: int = with_default(TrainingLoopKnobs, "batch_size", 16)  # utterances
    learning_rate: float = with_default(TrainingLoopKnobs, "learning_rate", 1e-3)
    final_lr_fraction: float = with_default(TrainingLoopKnobs, "final_lr_fraction", 0.1)
    warmup_steps: int = with_default(TrainingLoopKnobs, "warmup_steps", 300)
    max_steps: int = with_default(TrainingLoopKnobs, "max_steps", 4000)
    save_every: int = with_default(TrainingLoopKnobs, "save_every", 500)
    log_every: int = with_default(TrainingLoopKnobs, "log_every", 25)

    def validate(self) -> None:
        super().validate()
        if not self.train_tsv:
            raise ConfigError("train_tsv is required (build one with `python -m backends.star.corpus --out DIR`)")
        if self.compressor not in COMPRESSORS:
            raise ConfigError(f"compressor must be one of {', '.join(COMPRESSORS)}, got {self.compressor!r}")
        if self.dim % self.heads or self.dim % 2:
            raise ConfigError(f"dim ({self.dim}) must be even and divisible by heads ({self.heads})")
        if min(self.vocab_size - 4, self.encoder_layers, self.decoder_layers) < 1:
            raise ConfigError("encoder_layers and decoder_layers must be >= 1, vocab_size > 4")
        if self.wait_k < 0 or self.length_penalty < 0:
            raise ConfigError("need wait_k >= 0 and length_penalty >= 0")
