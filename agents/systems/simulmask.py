"""Word-level wait-k with a SimulMask-fine-tuned ALiBi LLM: source words go into the prompt cache as they arrive and
target words are written over the spliced [prompt ‖ prediction] cache, never recomputed (backends.simulmask)."""
from __future__ import annotations

import dataclasses
from typing import Sequence

from agents.core import Emission, SourceWord, StreamingTranslator
from agents.systems.simulmask_config import SimulMaskConfig
from backends.simulmask.decoder import RecomputingDecoder, SimulMaskDecoder
from backends.simulmask.prompt import simulmask_template
from backends.streaming_masks.decoder import StreamingLM
from backends.streaming_masks.schedule import waitk_units_read


class SimulMaskTranslator(StreamingTranslator):
    """Before target word j exactly g(j) = min(k + j - 1, n + 1) source units are read (the training schedule);
    greedy, one word per write; after the source has ended at most n + max_lag target words."""

    def __init__(self, lm: StreamingLM, config: SimulMaskConfig):
        super().__init__("word")
        template = simulmask_template(lm.tokenizer, config.source_lang, config.target_lang)
        self.lm = dataclasses.replace(lm, template=template)  # the same weights
        self.config = config
        decoder_class = RecomputingDecoder if config.recompute else SimulMaskDecoder
        self.decoder = decoder_class(self.lm, max_word_tokens=config.max_word_tokens)

    @classmethod
    def from_config(cls, config: SimulMaskConfig, lm: StreamingLM | None = None) -> "SimulMaskTranslator":
        if lm is None:
            from backends.simulmask.loading import load_simulmask_lm

            lm = load_simulmask_lm(config.model, config.source_lang, config.target_lang, dtype=config.model_dtype,
                                   device=config.model_device, checkpoint=config.checkpoint)
        return cls(lm, config)

    def reset(self) -> None:
        super().reset()
        self.decoder.reset()

    def feed(self, words: Sequence[SourceWord]) -> Emission:
        return self._emit(self._advance([*self.decoder.source_words, *(w.text for w in words)], finished=False))

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        all_words = [*self.decoder.source_words, *(w.text for w in words)]
        emission = self._emit(self._advance(all_words, finished=True)) if all_words else Emission()
        self.decoder.reset()
        return emission

    def _advance(self, words: list[str], finished: bool) -> Emission:
        """Read and write in schedule order as far as the available words allow, then read what is left."""
        decoder = self.decoder
        words = [piece for word in words for piece in word.split()]
        available = len(words) + 1 if finished else len(words)
        written: list[str] = []
        while not decoder.finished and not (finished and decoder.words_written >= len(words) + self.config.max_lag):
            j = decoder.words_written + 1
            needed = waitk_units_read(self.config.k, j, available) if finished else self.config.k + j - 1
            if needed > available:
                break
            self._read_up_to(words, needed)
            word = decoder.write_word()
            if word is not None:
                written.extend(word.split())
        if not decoder.finished:
            self._read_up_to(words, len(words))
        return Emission(new_units=tuple(written))

    def _read_up_to(self, words: list[str], units: int) -> None:
        decoder = self.decoder
        while decoder.units_read < units:
            if len(decoder.source_words) < len(words):
                decoder.read_word(words[len(decoder.source_words)])
            else:
                decoder.read_end()
