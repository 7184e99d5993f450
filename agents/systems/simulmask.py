"""Word-level wait-k with a SimulMask-fine-tuned ALiBi LLM: source words go into the prompt cache as they arrive and
target words are written over the spliced [prompt ‖ prediction] cache, never recomputed (backends.simulmask)."""
from __future__ import annotations

from agents.systems.simulmask_config import SimulMaskConfig
from agents.systems.word_waitk import WordWaitkTranslator, stream_own_lm
from backends.simulmask.decoder import RecomputingDecoder, SimulMaskDecoder
from backends.simulmask.prompt import simulmask_template
from backends.streaming_masks.decoder import StreamingLM


class SimulMaskTranslator(WordWaitkTranslator):
    """Wait-k over `SimulMaskDecoder` (or the recomputing baseline); greedy, one word per write; after the source
    has ended at most n + max_lag target words."""

    def __init__(self, lm: StreamingLM, config: SimulMaskConfig):
        self.lm = stream_own_lm(lm, lambda tokenizer: simulmask_template(tokenizer, config.source_lang,
                                                                         config.target_lang))
        decoder_class = RecomputingDecoder if config.recompute else SimulMaskDecoder
        super().__init__(decoder_class(self.lm, max_word_tokens=config.max_word_tokens), config.k)
        self.config = config

    @staticmethod
    def load_lm(config: SimulMaskConfig) -> StreamingLM:
        from backends.simulmask.loading import load_simulmask_lm

        return load_simulmask_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                 device=config.model_device, checkpoint=config.checkpoint)

    def target_word_limit(self, source_words: int, finished: bool) -> int | None:
        return source_words + self.config.max_lag if finished else None
