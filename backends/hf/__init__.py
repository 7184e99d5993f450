"""Decoder-only LLMs on transformers 5.x: prompt with an explicit source span (prompt.py), KV-cached greedy drafting
(lm.py), and capture of the selected heads' queries and keys (capture.py; replayed by backends/replay.py)."""
