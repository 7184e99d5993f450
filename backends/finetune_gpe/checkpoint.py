"""GPE fine-tuning checkpoints: `gpe_training.json` plus a peft LoRA adapter or full weights."""
from __future__ import annotations

from backends.checkpoints import CheckpointFormat

CHECKPOINTS = CheckpointFormat("GPE", "gpe_training.json", "python -m backends.finetune_gpe")
save_checkpoint, read_metadata, apply_checkpoint = CHECKPOINTS.save, CHECKPOINTS.read_metadata, CHECKPOINTS.apply
