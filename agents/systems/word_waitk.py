"""Word-level wait-k over a streaming decoder that reads source words into its cache and writes one target word at
a time (GPE, SimulMask): the read/write schedule, segments and live transcripts live here, once."""
from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Callable, Sequence
from typing import Protocol

from agents.core import StreamingTranslator
from backends.models import stream_tokenizer
from backends.streaming_masks.schedule import waitk_units_read
from common.stream import Emission, SourceWord
from policies.frontier import accessible_word_count
from policies.waitk import units_read_before


class WordDecoder(Protocol):
    """What the schedule drives (backends.streaming_masks.decoder, backends.simulmask.decoder)."""

    source_words: list[str]
    units_read: int
    words_written: int
    finished: bool

    def read_word(self, word: str) -> None: ...
    def read_end(self) -> None: ...
    def write_word(self) -> str | None: ...
    def reset(self) -> None: ...


class WordWaitkTranslator(StreamingTranslator):
    """Before target word j exactly g(j) = min(k + j - 1, n + 1) source units are read (the training schedule), so
    decoding sees what training showed; unit n + 1 is the end of the source. Once read, a source word is final: a live
    ASR hypothesis that later changes an already read word is not re-read (that would need re-encoding)."""

    def __init__(self, decoder: WordDecoder, k: int):
        super().__init__("word")
        self.decoder = decoder
        self.k = k

    @classmethod
    def from_config(cls, config, lm=None):
        """The translator for `config` on `lm`, the shared weights (loaded by `load_lm(config)` when not given)."""
        return cls(lm if lm is not None else cls.load_lm(config), config)

    @staticmethod
    def load_lm(config):
        """The weights `config` names, as the decoder's StreamingLM."""
        raise NotImplementedError

    @abstractmethod
    def target_word_limit(self, source_words: int, finished: bool) -> int | None:
        """At most this many target words for a segment of `source_words` words (None: no limit yet)."""

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
        limit = self.target_word_limit(len(words), finished)
        written: list[str] = []
        while not decoder.finished and (limit is None or decoder.words_written < limit):
            j = decoder.words_written + 1
            needed = waitk_units_read(self.k, j, available) if finished else units_read_before(j, self.k)
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


def stream_own_lm(lm, template_for: Callable):
    """The same weights with this stream's own tokenizer (server threads share no tokenizer state) and the prompt
    template `template_for(tokenizer)` built on it."""
    tokenizer = stream_tokenizer(lm.tokenizer)
    return dataclasses.replace(lm, tokenizer=tokenizer, template=template_for(tokenizer))
