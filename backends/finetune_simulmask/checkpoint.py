"""SimulMask fine-tuning checkpoints: `simulmask_training.json` plus a peft LoRA adapter or full weights."""
from __future__ import annotations

from backends.checkpoints import CheckpointFormat

CHECKPOINTS = CheckpointFormat("SimulMask", "simulmask_training.json", "python -m backends.finetune_simulmask")
save_checkpoint, read_metadata, apply_checkpoint = CHECKPOINTS.save, CHECKPOINTS.read_metadata, CHECKPOINTS.apply
