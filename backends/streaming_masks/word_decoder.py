"""What every word-level streaming decoder shares (GPE's group positions, SimulMask's spliced cache): source words
read in order, target words written greedily one at a time, and the rule that a finished word's last token is
re-fed after a read so the next word sees the new source. Subclasses decide how tokens enter the cache."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import torch

from backends.streaming_masks.segments import SegmentationError


class WordDecoder(ABC):
    """One segment's state. Call `read_word` / `read_end` and `write_word` in schedule order.

    Rows are computed when the token they predict is generated (alignment "predicted"): a word ends when the greedy
    next token starts a new word or stops; if source is read before the next word, the KV of the finished word's
    last token is dropped and re-fed after the read, so the first token of the next word sees the new source.
    """

    def __init__(self, lm, max_word_tokens: int = 32, record_logits: bool = False):
        if max_word_tokens < 1:
            raise ValueError(f"max_word_tokens must be >= 1, got {max_word_tokens}")
        self.lm = lm
        self.max_word_tokens = max_word_tokens
        self.record_logits = record_logits
        self.forward_calls = 0  # model calls over the decoder's life (kept across reset: benchmarks read it)
        self.words_tokens = 0  # tokens of the written words over the decoder's life (likewise)
        self.reset()

    # ----- what subclasses implement -------------------------------------------------------------------------
    @abstractmethod
    def _reset_cache(self) -> None:
        """Start with empty caches."""

    @abstractmethod
    def _source_text(self, end: bool) -> str:
        """The text of the prompt and the source words read so far (with the end-of-source text if `end`)."""

    @abstractmethod
    def _append_source(self, ids: Sequence[int], unit: int) -> None:
        """Read source tokens (of source unit `unit`); extend source_ids and source_unit."""

    @abstractmethod
    def _append_target(self, ids: Sequence[int], word: int) -> torch.Tensor:
        """Feed target tokens (of target word `word`); extend target_ids and target_word; return their logits."""

    @abstractmethod
    def _drop_last_target(self) -> None:
        """Take the last cached target token out of the cache into `unfed` (it is fed again at the next write)."""

    # ----- state ---------------------------------------------------------------------------------------------
    def reset(self) -> None:
        self._reset_cache()
        self.source_words: list[str] = []
        self.source_ids: list[int] = []
        self.source_unit: list[int] = []  # per source token: 0 prompt, 1..n words, n + 1 end
        self.end_read = False
        self.target_ids: list[int] = []  # target tokens whose KV is cached (header, then words)
        self.target_word: list[int] = []  # per cached target token: 0 header, 1.. words
        self.unfed: int | None = None  # last token of the previous word, dropped before a read
        self.lookahead: int | None = None  # greedy next token from the newest cached target row
        self.words_written = 0
        self.units_at_write: list[int] = []  # source units read when each target word was written
        self.finished = False
        self.row_logits: dict[tuple[str, int], torch.Tensor] = {}
        self._append_source(self.lm.encode(self._source_text(end=False)), unit=0)

    # ----- reads ---------------------------------------------------------------------------------------------
    @property
    def units_read(self) -> int:
        """Source units read so far (words, plus 1 once the end of the source is known)."""
        return len(self.source_words) + int(self.end_read)

    def read_word(self, word: str) -> None:
        if self.end_read:
            raise RuntimeError("the source has ended: reset() before reading a new segment")
        if not word or any(c.isspace() for c in word):
            raise ValueError(f"a source word must be non-empty and contain no whitespace, got {word!r}")
        self.source_words.append(word)
        self._read_text(self._source_text(end=False), unit=len(self.source_words))

    def read_end(self) -> None:
        if not self.source_words:
            raise RuntimeError("read_end() before any source word: an empty segment has no translation")
        if not self.end_read:
            self.end_read = True
            self._read_text(self._source_text(end=True), unit=len(self.source_words) + 1)

    def _read_text(self, text: str, unit: int) -> None:
        """Tokenize the whole source block so far (as training does) and append the tokens beyond the cached ones;
        the cached tokens must be a prefix of the new tokenization."""
        ids = self.lm.encode(text)
        if ids[: len(self.source_ids)] != self.source_ids:
            raise SegmentationError(
                f"the tokenizer re-merged already read source tokens when {text[-40:]!r} arrived; streaming needs a "
                f"tokenizer whose merges stop at spaces (byte-level BPE or SentencePiece with whitespace split)")
        if self.lookahead is not None and self.target_ids:  # a finished word's last token waits for this read
            self._drop_last_target()
        self.lookahead = None
        self._append_source(ids[len(self.source_ids):], unit)

    # ----- writes --------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def write_word(self) -> str | None:
        """Generate the next target word greedily with the source read so far; None once the target has ended."""
        if self.finished:
            return None
        if not self.target_ids and self.unfed is None:
            logits = self._append_target(self.lm.encode(self.lm.template.target_prefix), word=0)
            first = int(torch.argmax(logits[-1]))  # the first word follows the header: any token may start it
        elif self.unfed is not None:
            token, self.unfed = self.unfed, None
            logits = self._append_target([token], word=self.words_written)
            first = int(torch.argmax(logits[-1].masked_fill(~self.lm.word_or_stop, float("-inf"))))
        else:
            first = self.lookahead
        self.lookahead = None
        if first in self.lm.stop_token_ids:
            self.finished = True
            return None
        word = [first]
        while True:
            logits = self._append_target([word[-1]], word=self.words_written + 1)
            following = int(torch.argmax(logits[-1]))
            if (following in self.lm.stop_token_ids or bool(self.lm.word_start[following])
                    or len(word) >= self.max_word_tokens):
                self.lookahead = following
                break
            word.append(following)
        self.words_written += 1
        self.words_tokens += len(word)
        self.units_at_write.append(self.units_read)
        return self.lm.tokenizer.decode(word, skip_special_tokens=True).strip()

    def _record(self, kind: str, start: int, logits: torch.Tensor) -> None:
        if self.record_logits:
            for offset in range(logits.shape[0]):
                self.row_logits[(kind, start + offset)] = logits[offset].cpu()
