"""Streaming decoders for group-position-encoding (GPE) models: one KV cache in arrival order, no re-encoding.

A read appends source tokens that cached target tokens cannot see; a write generates one target word greedily at
target positions phi + t. `ReencodingDecoder` is the batch-streaming baseline that recomputes everything after a read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache

from backends.streaming_masks.hf_inputs import additive_mask
from backends.streaming_masks.segments import SegmentationError, StreamingTemplate

# Whitespace as the pieces spell it: a space, tab or newline; byte-level BPE's "Ġ" (space), "Ċ" (newline) and "ĉ"
# (tab); SentencePiece's "▁" and its byte-fallback pieces.
WORD_START_MARKERS = (" ", "\t", "\n", "\u0120", "\u010a", "\u0109", "\u2581", "<0x0A>", "<0x09>", "<0x20>")


def word_start_tokens(tokenizer, vocab_size: int) -> torch.Tensor:
    """Bool [V]: the tokens that begin a new whitespace word (their piece starts with whitespace)."""
    pieces = tokenizer.convert_ids_to_tokens(list(range(min(vocab_size, len(tokenizer)))))
    starts = torch.zeros(vocab_size, dtype=torch.bool)
    starts[: len(pieces)] = torch.tensor([bool(p) and p.startswith(WORD_START_MARKERS) for p in pieces])
    return starts


@dataclass
class StreamingLM:
    """Loaded weights, tokenizer and prompt template: shared read-only by every stream's decoder."""

    model: object
    tokenizer: object
    template: StreamingTemplate
    stop_token_ids: frozenset
    word_start: torch.Tensor  # bool [V]: tokens that start a new word
    word_or_stop: torch.Tensor  # bool [V]: what may follow a finished word (a word start or a stop token)

    @classmethod
    def from_model(cls, model, tokenizer, template: StreamingTemplate) -> "StreamingLM":
        from backends.hf.lm import stop_token_ids

        vocab = model.get_output_embeddings().weight.shape[0]
        stops = frozenset(i for i in stop_token_ids(model, tokenizer) if i < vocab)
        word_start = word_start_tokens(tokenizer, vocab)
        word_or_stop = word_start.clone()
        word_or_stop[list(stops)] = True
        device = next(model.parameters()).device
        return cls(model, tokenizer, template, stops, word_start, word_or_stop.to(device))

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


class GroupPositionDecoder:
    """One segment's streaming state. Call `read_word` / `read_end` and `write_word` in schedule order.

    Rows are computed when the token they predict is generated (the visibility of `visibility_matrix` with
    alignment "predicted"): a word ends when the greedy next token starts a new word or stops; if source is read
    before the next word, the KV of the finished word's last token is dropped (`crop(-1)`) and re-fed afterwards at
    the same position, so the first token of the next word is predicted with the new source in view.
    """

    def __init__(self, lm: StreamingLM, phi: int = 0, max_word_tokens: int = 32, record_logits: bool = False):
        if not isinstance(phi, int) or phi < 0:
            raise ValueError(f"phi must be an integer >= 0, got {phi!r}")
        self.lm = lm
        self.phi = phi
        self.max_word_tokens = max_word_tokens
        self.record_logits = record_logits
        self.forward_calls = 0  # model calls over the decoder's life (kept across reset: benchmarks read it)
        self.reset()

    def reset(self) -> None:
        self.cache = DynamicCache()  # no config: every layer keeps all entries (see docs/waitk_gpe.md, sliding window)
        self.cache_is_source: list[bool] = []
        self.source_words: list[str] = []
        self.source_ids: list[int] = []
        self.source_unit: list[int] = []  # per source token: 0 prompt, 1..n words, n + 1 end
        self.pending_source = 0  # read source tokens (the last ones of source_ids) not yet in the cache
        self.end_read = False
        self.target_ids: list[int] = []  # target tokens whose KV is cached (header, then words)
        self.target_word: list[int] = []  # per cached target token: 0 header, 1.. words
        self.unfed: int | None = None  # last token of the previous word, cropped before a read
        self.lookahead: int | None = None  # greedy next token from the newest cached target row
        self.words_written = 0
        self.units_at_write: list[int] = []  # source units read when each target word was written
        self.finished = False
        self.row_logits: dict[tuple[str, int], torch.Tensor] = {}
        self._append_source(self.lm.encode(self.lm.template.source_prefix), unit=0)

    # ----- reads ---------------------------------------------------------------------------------------------
    @property
    def units_read(self) -> int:
        """Source units read so far (words, plus 1 once the end marker is read)."""
        return len(self.source_words) + int(self.end_read)

    def read_word(self, word: str) -> None:
        if self.end_read:
            raise RuntimeError("the source has ended: reset() before reading a new segment")
        if not word or any(c.isspace() for c in word):
            raise ValueError(f"a source word must be non-empty and contain no whitespace, got {word!r}")
        self.source_words.append(word)
        self._read_text(self._source_text(), unit=len(self.source_words))

    def read_end(self) -> None:
        if not self.source_words:
            raise RuntimeError("read_end() before any source word: an empty segment has no translation")
        if not self.end_read:
            self.end_read = True
            self._read_text(self._source_text() + self.lm.template.source_suffix, unit=len(self.source_words) + 1)

    def _source_text(self) -> str:
        return self.lm.template.source_prefix + " ".join(self.source_words)

    def _read_text(self, text: str, unit: int) -> None:
        """Tokenize the whole source block so far and append the tokens beyond the cached ones (the training
        segmentation tokenizes it in one piece too); the cached tokens must be a prefix of the new tokenization."""
        ids = self.lm.encode(text)
        if ids[: len(self.source_ids)] != self.source_ids:
            raise SegmentationError(
                f"the tokenizer re-merged already read source tokens when {text[-40:]!r} arrived; streaming needs a "
                f"tokenizer whose merges stop at spaces (byte-level BPE or SentencePiece with whitespace split)")
        new_ids = ids[len(self.source_ids):]
        if self.lookahead is not None and self.target_ids:  # a finished word's last token waits for this read
            self._drop_last_target()
        self.lookahead = None
        self._append_source(new_ids, unit)

    def _drop_last_target(self) -> None:
        self.cache.crop(-1)
        self.cache_is_source.pop()
        self.unfed = self.target_ids.pop()
        self.target_word.pop()

    def _append_source(self, ids: Sequence[int], unit: int) -> None:
        """Read tokens wait for the next write, which feeds them in the same forward (fewer model calls)."""
        self.source_ids.extend(ids)
        self.source_unit.extend([unit] * len(ids))
        self.pending_source += len(ids)

    # ----- writes --------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def write_word(self) -> str | None:
        """Generate the next target word with the source read so far; None once the target is finished."""
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
        self.units_at_write.append(self.units_read)
        return self.lm.tokenizer.decode(word, skip_special_tokens=True).strip()

    def _append_target(self, ids: Sequence[int], word: int) -> torch.Tensor:
        """Feed the pending source tokens (positions S..) and then `ids` (positions phi + t..) in one forward;
        returns the logits of the last row."""
        source_start = len(self.source_ids) - self.pending_source
        target_start = len(self.target_ids)
        source_ids = self.source_ids[source_start:]
        positions = [source_start + i for i in range(len(source_ids))]
        positions += [self.phi + target_start + i for i in range(len(ids))]
        logits = self._forward([*source_ids, *ids], positions, source_count=len(source_ids))
        if self.record_logits:
            self._record("s", source_start, logits[: len(source_ids)])
            self._record("t", target_start, logits[len(source_ids):])
        self.pending_source = 0
        self.target_ids.extend(ids)
        self.target_word.extend([word] * len(ids))
        return logits[-1:]

    # ----- the model -----------------------------------------------------------------------------------------
    @torch.inference_mode()
    def _forward(self, ids: Sequence[int], positions: Sequence[int], source_count: int = 0) -> torch.Tensor:
        """Append `ids` (the first `source_count` of them source tokens, the rest target tokens) to the cache.
        Source rows see cached source only; target rows see everything cached. The new tokens see each other
        causally (source first, so new source rows never see new target). Returns float32 logits [len(ids), V]
        (only the last row unless recording)."""
        queries, cached = len(ids), len(self.cache_is_source)
        visible = torch.ones(queries, cached + queries, dtype=torch.bool)
        if source_count and cached:
            visible[:source_count, :cached] = torch.tensor(self.cache_is_source, dtype=torch.bool)
        visible[:, cached:] = torch.tril(torch.ones(queries, queries, dtype=torch.bool))
        device = self.lm.device
        output = self.lm.model(
            input_ids=torch.tensor([list(ids)], device=device),
            position_ids=torch.tensor([list(positions)], device=device),
            attention_mask=additive_mask(visible[None, None], self.lm.dtype).to(device),
            past_key_values=self.cache, use_cache=True,
            logits_to_keep=0 if self.record_logits else 1,
        )
        self.forward_calls += 1
        self.cache_is_source.extend([True] * source_count + [False] * (queries - source_count))
        return output.logits[0].float()

    def _record(self, kind: str, start: int, logits: torch.Tensor) -> None:
        if self.record_logits:
            for offset in range(logits.shape[0]):
                self.row_logits[(kind, start + offset)] = logits[offset].cpu()


class ReencodingDecoder(GroupPositionDecoder):
    """Batch-streaming baseline: after every read, the next write recomputes [prompt ‖ source so far ‖ header ‖
    target so far] from scratch with contiguous positions and a causal mask, so every target token sees all the
    source read so far. Same word rule and greedy choices as `GroupPositionDecoder`."""

    def reset(self) -> None:
        self.stale = False
        super().reset()

    def _append_source(self, ids, unit):
        if ids:
            self.source_ids.extend(ids)
            self.source_unit.extend([unit] * len(ids))
            self.stale = True

    def _drop_last_target(self) -> None:
        self.unfed = self.target_ids.pop()
        self.target_word.pop()

    def _append_target(self, ids, word):
        if self.stale:
            self.cache, self.cache_is_source = DynamicCache(), []
            prefix = self.source_ids + self.target_ids
            logits = GroupPositionDecoder._forward(self, prefix + list(ids), list(range(len(prefix) + len(ids))))
            self.stale = False
        else:
            start = len(self.source_ids) + len(self.target_ids)
            logits = GroupPositionDecoder._forward(self, ids, list(range(start, start + len(ids))))
        self.target_ids.extend(ids)
        self.target_word.extend([word] * len(ids))
        return logits
