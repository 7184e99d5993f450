"""Streaming attention masks for decoder-only LLMs: word segmentation from tokenizer offsets, read schedules,
visibility matrices (pure numpy), and the transformers-specific 4D masks, group position ids and decoders."""
