"""Decoder-only LLMs on transformers 5.x: prompt with an explicit source span, KV-cached greedy drafting, and
capture of the selected heads' queries and keys with qk-fast replay of the draft-to-source attention block."""
from backends.hf.capture import QKRecorder
from backends.hf.lm import CausalLM, DecodeSession, Draft
from backends.hf.prompt import PromptBuilder, TranslationPrompt
from backends.hf.replay import replay_attention

__all__ = ["CausalLM", "DecodeSession", "Draft", "PromptBuilder", "QKRecorder", "TranslationPrompt", "replay_attention"]
