"""Streaming decoders for group-position-encoding (GPE) models: one KV cache in arrival order, no re-encoding.

A read appends source tokens that cached target tokens cannot see; a write generates one target word greedily at
target positions phi + t. `ReencodingDecoder` is the batch-streaming baseline that recomputes everything after a read.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache

from backends.hf.cache_keyword import cache_kwargs
from backends.streaming_masks.hf_inputs import additive_mask
from backends.streaming_masks.segments import StreamingTemplate
from backends.streaming_masks.word_decoder import WordDecoder

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
        from backends.draft import stop_token_ids

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


class GroupPositionDecoder(WordDecoder):
    """GPE: one KV cache in arrival order; source tokens at positions 0.., target tokens at phi + t; a source row sees
    cached source only, a target row everything cached (the visibility of `visibility_matrix`)."""

    def __init__(self, lm: StreamingLM, phi: int = 0, max_word_tokens: int = 32, record_logits: bool = False):
        if not isinstance(phi, int) or phi < 0:
            raise ValueError(f"phi must be an integer >= 0, got {phi!r}")
        self.phi = phi
        super().__init__(lm, max_word_tokens, record_logits)

    def _reset_cache(self) -> None:
        self.cache = DynamicCache()  # no config: every layer keeps all entries (see docs/waitk_gpe.md, sliding window)
        self.cache_is_source: list[bool] = []
        self.pending_source = 0  # read source tokens (the last ones of source_ids) not yet in the cache

    def _source_text(self, end: bool) -> str:
        text = self.lm.template.source_prefix + " ".join(self.source_words)
        return text + self.lm.template.source_suffix if end else text

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
            **cache_kwargs(self.lm.model, self.cache), use_cache=True,
            logits_to_keep=0 if self.record_logits else 1,
        )
        self.forward_calls += 1
        self.cache_is_source.extend([True] * source_count + [False] * (queries - source_count))
        return output.logits[0].float()


class ReencodingDecoder(GroupPositionDecoder):
    """Batch-streaming baseline: after every read, the next write recomputes [prompt ‖ source so far ‖ header ‖
    target so far] from scratch with contiguous positions and a causal mask, so every target token sees all the
    source read so far. Same word rule and greedy choices as `GroupPositionDecoder`."""

    def _reset_cache(self) -> None:
        self.stale = False
        super()._reset_cache()

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
