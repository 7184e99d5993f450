"""Word-level wait-k with a group-position-encoding LLM: source words are read into one KV cache as they arrive and
target words are written without re-encoding (backends.streaming_masks.decoder), one segment at a time."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from agents.core import Emission, SourceWord, StreamingTranslator
from agents.systems.gpe_config import GPEConfig
from backends.streaming_masks.decoder import GroupPositionDecoder, ReencodingDecoder, StreamingLM
from backends.streaming_masks.loading import translation_template
from backends.streaming_masks.schedule import waitk_units_read
from policies.frontier import accessible_word_count


class GPETranslator(StreamingTranslator):
    """Wait-k over `GroupPositionDecoder`: before target word j exactly g(j) = min(k + j - 1, n + 1) source units
    are read (the training schedule), so decoding sees what training showed. Once read, a source word is final: a
    live ASR hypothesis that later changes an already read word is not re-read (that would need re-encoding)."""

    def __init__(self, lm: StreamingLM, config: GPEConfig):
        super().__init__("word")
        lm = dataclasses.replace(lm, template=translation_template(lm.tokenizer, config.source_lang,
                                                                   config.target_lang))  # same weights
        self.lm = lm
        self.config = config
        decoder_class = ReencodingDecoder if config.reencode else GroupPositionDecoder
        self.decoder = decoder_class(lm, phi=config.phi, max_word_tokens=config.max_word_tokens)

    @classmethod
    def from_config(cls, config: GPEConfig, lm: StreamingLM | None = None) -> "GPETranslator":
        if lm is None:
            from backends.streaming_masks.loading import load_streaming_lm

            lm = load_streaming_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                   device=config.model_device, adapter=config.adapter)
        return cls(lm, config)

    def reset(self) -> None:
        super().reset()
        self.decoder.reset()

    @property
    def source_words(self) -> list[str]:
        """Source words of the current segment read so far."""
        return self.decoder.source_words

    def feed(self, words: Sequence[SourceWord]) -> Emission:
        return self._emit(self._advance([*self.decoder.source_words, *(w.text for w in words)], finished=False))

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        return self.finish_segment([SourceWord(w) for w in self.decoder.source_words] + list(words))

    def revise(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """The cascade's live sentence: words ended by now - hold_back are available (already read ones stay)."""
        available = len(words) if now is None else accessible_word_count([w.end_time for w in words], now, hold_back)
        return self._emit(self._advance([w.text for w in words[:available]], finished=False))

    def finish_segment(self, words: Sequence[SourceWord]) -> Emission:
        """The segment's source is complete: write the rest of its translation, then start a new segment."""
        emission = self._emit(self._advance([w.text for w in words], finished=True)) if words else Emission()
        self.decoder.reset()
        return emission

    def _advance(self, words: list[str], finished: bool) -> Emission:
        """Read and write in schedule order as far as the available words allow; all available words are read
        at the end (none is needed by the next write any earlier)."""
        decoder = self.decoder
        words = [piece for word in words for piece in word.split()]
        words = decoder.source_words + words[len(decoder.source_words):]  # words already read are final
        available = len(words) + 1 if finished else len(words)
        units = len(words) + 1 if finished else None
        max_words = int(self.config.max_length_ratio * len(words)) + 10
        written: list[str] = []
        while not decoder.finished and decoder.words_written < max_words:
            j = decoder.words_written + 1
            needed = waitk_units_read(self.config.k, j, units) if finished else self.config.k + j - 1
            if needed > available:
                break
            self._read_up_to(words, needed)
            word = decoder.write_word()
            if word is not None:
                written.extend(word.split())
        if not decoder.finished:
            self._read_up_to(words, min(available, len(words)))
        return Emission(new_units=tuple(written))

    def _read_up_to(self, words: list[str], units: int) -> None:
        decoder = self.decoder
        while decoder.units_read < units:
            if len(decoder.source_words) < len(words):
                decoder.read_word(words[len(decoder.source_words)])
            else:
                decoder.read_end()
