"""Word-level wait-k with a group-position-encoding LLM: source words are read into one KV cache as they arrive and
target words are written without re-encoding (backends.streaming_masks.decoder), one segment at a time."""
from __future__ import annotations

import dataclasses

from agents.systems.gpe_config import GPEConfig
from agents.systems.word_waitk import WordWaitkTranslator
from backends.models import stream_tokenizer
from backends.streaming_masks.decoder import GroupPositionDecoder, ReencodingDecoder, StreamingLM
from backends.streaming_masks.loading import translation_template


class GPETranslator(WordWaitkTranslator):
    """Wait-k over `GroupPositionDecoder` (or the re-encoding baseline); at most max_length_ratio * n + 10 target
    words per segment."""

    def __init__(self, lm: StreamingLM, config: GPEConfig):
        tokenizer = stream_tokenizer(lm.tokenizer)  # this stream's own: server threads share no tokenizer state
        lm = dataclasses.replace(lm, tokenizer=tokenizer, template=translation_template(
            tokenizer, config.source_lang, config.target_lang))  # the same weights
        decoder_class = ReencodingDecoder if config.reencode else GroupPositionDecoder
        super().__init__(decoder_class(lm, phi=config.phi, max_word_tokens=config.max_word_tokens), config.k)
        self.lm = lm
        self.config = config

    @classmethod
    def from_config(cls, config: GPEConfig, lm: StreamingLM | None = None) -> "GPETranslator":
        if lm is None:
            from backends.streaming_masks.loading import load_streaming_lm

            lm = load_streaming_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                   device=config.model_device, adapter=config.adapter)
        return cls(lm, config)

    def target_word_limit(self, source_words: int, finished: bool) -> int:
        return int(self.config.max_length_ratio * source_words) + 10
