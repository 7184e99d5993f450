"""Word-level wait-k with a SimulMask-fine-tuned ALiBi LLM: source words go into the prompt cache as they arrive and
target words are written over the spliced [prompt ‖ prediction] cache, never recomputed (backends.simulmask)."""
from __future__ import annotations

import dataclasses

from agents.systems.simulmask_config import SimulMaskConfig
from agents.systems.word_waitk import WordWaitkTranslator
from backends.models import stream_tokenizer
from backends.simulmask.decoder import RecomputingDecoder, SimulMaskDecoder
from backends.simulmask.prompt import simulmask_template
from backends.streaming_masks.decoder import StreamingLM


class SimulMaskTranslator(WordWaitkTranslator):
    """Wait-k over `SimulMaskDecoder` (or the recomputing baseline); greedy, one word per write; after the source
    has ended at most n + max_lag target words."""

    def __init__(self, lm: StreamingLM, config: SimulMaskConfig):
        tokenizer = stream_tokenizer(lm.tokenizer)  # this stream's own: server threads share no tokenizer state
        template = simulmask_template(tokenizer, config.source_lang, config.target_lang)
        lm = dataclasses.replace(lm, tokenizer=tokenizer, template=template)  # the same weights
        decoder_class = RecomputingDecoder if config.recompute else SimulMaskDecoder
        super().__init__(decoder_class(lm, max_word_tokens=config.max_word_tokens), config.k)
        self.lm = lm
        self.config = config

    @classmethod
    def from_config(cls, config: SimulMaskConfig, lm: StreamingLM | None = None) -> "SimulMaskTranslator":
        if lm is None:
            from backends.simulmask.loading import load_simulmask_lm

            lm = load_simulmask_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                   device=config.model_device, checkpoint=config.checkpoint)
        return cls(lm, config)

    def target_word_limit(self, source_words: int, finished: bool) -> int | None:
        return source_words + self.config.max_lag if finished else None
