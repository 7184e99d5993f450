"""Fine-tuning a decoder-only LLM for group-position-encoding streaming translation (`python -m
backends.finetune_gpe`): the wait-k streaming mask, group position ids, loss on the target only, LoRA or full."""
