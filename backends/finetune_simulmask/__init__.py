"""Fine-tuning an ALiBi LLM (Falcon, Bloom) with SimulMask (`python -m backends.finetune_simulmask`): the wait-k
inference-mirrored mask with modified ALiBi, the plain SimulMask prompt, loss on the target only, LoRA or full."""
