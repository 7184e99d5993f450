"""Word-level wait-k with a group-position-encoding LLM: source words are read into one KV cache as they arrive and
target words are written without re-encoding (backends.streaming_masks.decoder), one segment at a time."""
from __future__ import annotations

from agents.systems.gpe_config import GPEConfig
from agents.systems.word_waitk import WordWaitkTranslator, stream_own_lm
from backends.streaming_masks.decoder import (
    GroupPositionDecoder,
    ReencodingDecoder,
    StreamingLM,
)
from backends.streaming_masks.loading import translation_template


class GPETranslator(WordWaitkTranslator):
    """Wait-k over `GroupPositionDecoder` (or the re-encoding baseline); at most max_length_ratio * n + 10 target
    words per segment."""

    def __init__(self, lm: StreamingLM, config: GPEConfig):
        self.lm = stream_own_lm(lm, lambda tokenizer: translation_template(tokenizer, config.source_lang,
                                                                           config.target_lang))
        decoder_class = ReencodingDecoder if config.reencode else GroupPositionDecoder
        super().__init__(decoder_class(self.lm, phi=config.phi, max_word_tokens=config.max_word_tokens), config.k)
        self.config = config

    @staticmethod
    def load_lm(config: GPEConfig) -> StreamingLM:
        from backends.streaming_masks.loading import load_streaming_lm

        return load_streaming_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                 device=config.model_device, adapter=config.adapter)

    def target_word_limit(self, source_words: int, finished: bool) -> int:
        return int(self.config.max_length_ratio * source_words) + 10
