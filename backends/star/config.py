"""The knobs of STAR/CIF training (`python -m backends.star.train`): the model's, on the shared training-loop knobs
(steps, batches, schedule, checkpoints) with STAR's defaults."""
from __future__ import annotations

from dataclasses import dataclass

from agents.harness.config import ConfigError, knob, language_knob
from backends.finetune.config import TrainingLoopKnobs
from backends.star.model import COMPRESSORS


@dataclass(frozen=True)
class StarTrainConfig(TrainingLoopKnobs):
    train_tsv: str = knob("", "training utterances: 'wav path<TAB>transcript' per line")
    dev_tsv: str = knob("", "optional development utterances (loss logged at every save)")
    output_dir: str = knob("runs/star/model", "checkpoint directory (star_config.json, model.safetensors, "
                                              "tokenizer.json)")
    source_lang: str = language_knob("en", "language of the speech (recorded in the checkpoint; the agents check it)")
    target_lang: str = language_knob("en", "language of the transcripts or translations (en with en: ASR)")
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
    batch_size: int = knob(16, "utterances per step")
    learning_rate: float = knob(1e-3, "peak AdamW learning rate")
    final_lr_fraction: float = knob(0.1, "linear schedule: the learning rate at max_steps, as a fraction of the peak")
    warmup_steps: int = knob(300, "linear warmup steps")
    max_steps: int = knob(4000, "optimizer steps")
    save_every: int = knob(500, "save a checkpoint every N steps (and at the end)")
    log_every: int = knob(25, "append mean losses to train_log.jsonl every N steps")

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
