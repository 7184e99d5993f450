"""Greedy `generate` with one static KV cache reused by every call, so transformers compiles the decode step once
(a CUDA graph on a GPU) whatever the prompt length: the recogniser's per-token cost without Python's launch overhead.
"""
from __future__ import annotations

from backends.hf.cache_keyword import cache_kwargs
from backends.hf.compiled_step import StepThread


class CompiledDecoder:
    """Decodes for `model` (a transformers generation model whose text decoder compiles without graph breaks) into a
    static cache of `cache_tokens` positions (prompt plus new tokens). Calls are serialised on one thread (the cache is
    shared, and CUDA graphs are replayed only on the thread that recorded them: `StepThread`)."""

    def __init__(self, model, cache_tokens: int):
        from transformers import CompileConfig, StaticCache

        self.model = model
        self.cache_tokens = cache_tokens
        self.cache = StaticCache(config=model.config.get_text_config(), max_cache_len=cache_tokens)
        # Fixed shapes (dynamic=False): the step's inputs are one token and the whole static cache, so one graph
        # serves every call. transformers compiles only on accelerators unless told to compile everywhere.
        self.compile_config = CompileConfig(fullgraph=True, dynamic=False)
        self.compile_config._compile_all_devices = True  # noqa: SLF001 (a CPU compiles too: the tests do)
        self.thread = StepThread("compiled-asr-step")

    def fits(self, prompt_tokens: int, max_new_tokens: int) -> bool:
        """Whether a call with this prompt and budget fits the static cache (else decode it uncompiled)."""
        return prompt_tokens + max_new_tokens <= self.cache_tokens

    def generate(self, **kwargs):
        """`model.generate(**kwargs)` into the static cache, with the compiled step."""
        return self.thread.run(self._generate, **kwargs)

    def _generate(self, **kwargs):
        self.cache.reset()
        return self.model.generate(**kwargs, **cache_kwargs(self.model, self.cache), compile_config=self.compile_config)
