"""What every fine-tuning command shares (`python -m backends.finetune_gpe`, `python -m backends.finetune_simulmask`):
the parallel corpus, the common knobs, the training loop (LoRA or full, accumulation, schedules) and the CLI."""
