"""SimulMask (Raffel et al., EMNLP 2024) for ALiBi LLMs (Falcon, Bloom): the wait-k inference-mirrored attention
mask with the modified ALiBi bias for fine-tuning, and the KV-cached wait-k decoder that needs no recomputation."""
