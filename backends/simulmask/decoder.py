"""The SimulMask wait-k decoder for ALiBi models: a prompt cache (p1 + source read so far) and a prediction cache
(p2 + target), spliced as [prompt ‖ prediction] for writes, so no key or value is ever recomputed.

ALiBi is not baked into keys: over the splice, stock ALiBi gives each key its index, which is exactly its rank among
the keys a SimulMask row sees in training (unread source is simply absent). `RecomputingDecoder` is the baseline that
re-encodes p2 + target after every read (the paper's "falcon-causal-rec", Table 1)."""
from __future__ import annotations

from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache

from backends.simulmask.prompt import source_text
from backends.streaming_masks.decoder import StreamingLM
from backends.streaming_masks.segments import SegmentationError


def splice(prompt: DynamicCache, previous: DynamicCache | None = None, previous_prompt_length: int = 0) -> DynamicCache:
    """A new cache holding, per layer, the prompt cache's entries then the prediction entries of `previous` (those
    after its first `previous_prompt_length`): [p1, source read, p2, target]."""
    cache = DynamicCache()
    for index, layer in enumerate(prompt.layers):
        keys, values = layer.keys, layer.values
        if previous is not None:
            old = previous.layers[index]
            keys = torch.cat([keys, old.keys[..., previous_prompt_length:, :]], dim=-2)
            values = torch.cat([values, old.values[..., previous_prompt_length:, :]], dim=-2)
        cache.update(keys, values, index)
    return cache


class SimulMaskDecoder:
    """One segment's state. Call `read_word` / `read_end` and `write_word` in schedule order.

    A row is computed when the token it predicts is generated (SimulMask alignment "predicted"): a word ends when the
    greedy next token starts a new word or stops; if source is read before the next word, the KV of the finished
    word's last token is dropped and re-fed after the read, so the next word's first token sees the new source.
    """

    def __init__(self, lm: StreamingLM, max_word_tokens: int = 32, record_logits: bool = False):
        if max_word_tokens < 1:
            raise ValueError(f"max_word_tokens must be >= 1, got {max_word_tokens}")
        self.lm = lm
        self.max_word_tokens = max_word_tokens
        self.record_logits = record_logits
        self.forward_calls = 0  # model calls over the decoder's life (kept across reset: benchmarks read it)
        self.words_tokens = 0  # tokens of the written words over the decoder's life (likewise)
        self.reset()

    def reset(self) -> None:
        self.prompt_cache = DynamicCache()
        self.cache: DynamicCache | None = None  # the splice [prompt ‖ prediction]; None before the first write
        self.spliced_prompt_length = 0  # prompt entries at the front of self.cache
        self.source_words: list[str] = []
        self.source_ids: list[int] = []
        self.source_unit: list[int] = []  # per source token: 0 instruction, 1..n words, n + 1 end (if it has tokens)
        self.end_read = False
        self.target_ids: list[int] = []  # target tokens whose KV is cached (p2, then words)
        self.target_word: list[int] = []  # per cached target token: 0 p2, 1.. words
        self.unfed: int | None = None  # last token of the previous word, dropped before a read
        self.lookahead: int | None = None  # greedy next token from the newest cached target row
        self.words_written = 0
        self.finished = False
        self.row_logits: dict[tuple[str, int], torch.Tensor] = {}
        self._append_source(self.lm.encode(source_text(self.lm.template, [])), unit=0)

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
        self._read_text(source_text(self.lm.template, self.source_words), unit=len(self.source_words))

    def read_end(self) -> None:
        if not self.source_words:
            raise RuntimeError("read_end() before any source word: an empty segment has no translation")
        if not self.end_read:
            self.end_read = True
            self._read_text(source_text(self.lm.template, self.source_words) + self.lm.template.source_suffix,
                            unit=len(self.source_words) + 1)

    def _read_text(self, text: str, unit: int) -> None:
        """Tokenize the whole source block so far (as training does) and append the tokens beyond the cached ones."""
        ids = self.lm.encode(text)
        if ids[: len(self.source_ids)] != self.source_ids:
            raise SegmentationError(
                f"the tokenizer re-merged already read source tokens when {text[-40:]!r} arrived; streaming needs a "
                f"tokenizer whose merges stop at spaces (byte-level BPE or SentencePiece with whitespace split)")
        if self.lookahead is not None and self.target_ids:  # a finished word's last token waits for this read
            self._drop_last_target()
        self.lookahead = None
        self._append_source(ids[len(self.source_ids):], unit)

    def _drop_last_target(self) -> None:
        self.cache.crop(-1)
        self.unfed = self.target_ids.pop()
        self.target_word.pop()

    def _append_source(self, ids: Sequence[int], unit: int) -> None:
        if not ids:
            return
        start = len(self.source_ids)
        self._record("s", start, self._forward(ids, self.prompt_cache))
        self.source_ids.extend(ids)
        self.source_unit.extend([unit] * len(ids))

    # ----- writes --------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def write_word(self) -> str | None:
        """Generate the next target word greedily with the source read so far; None once the target has ended."""
        if self.finished:
            return None
        if not self.target_ids and self.unfed is None:
            logits = self._append_target(self.lm.encode(self.lm.template.target_prefix), word=0)
            first = int(torch.argmax(logits[-1]))  # the first word follows p2: any token may start it
        elif self.unfed is not None:
            token, self.unfed = self.unfed, None
            logits = self._append_target([token], word=self.words_written)
            allowed = self.lm.word_start.to(logits.device).clone()
            allowed[list(self.lm.stop_token_ids)] = True
            first = int(torch.argmax(logits[-1].masked_fill(~allowed, float("-inf"))))
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
        return self.lm.tokenizer.decode(word, skip_special_tokens=True).strip()

    def _append_target(self, ids: Sequence[int], word: int) -> torch.Tensor:
        if self.cache is None or self.spliced_prompt_length != len(self.source_ids):  # source was read: re-splice
            self.cache = splice(self.prompt_cache, self.cache, self.spliced_prompt_length)
            self.spliced_prompt_length = len(self.source_ids)
        start = len(self.target_ids)
        logits = self._forward(ids, self.cache)
        self._record("t", start, logits)
        self.target_ids.extend(ids)
        self.target_word.extend([word] * len(ids))
        return logits

    # ----- the model -----------------------------------------------------------------------------------------
    @torch.inference_mode()
    def _forward(self, ids: Sequence[int], cache: DynamicCache) -> torch.Tensor:
        """Append `ids` to `cache` with the stock model: causal over the cache, ALiBi by cache index. Returns float32
        logits [len(ids), V] (only the last row unless recording)."""
        output = self.lm.model(input_ids=torch.tensor([list(ids)], device=self.lm.device), past_key_values=cache,
                               use_cache=True, logits_to_keep=0 if self.record_logits else 1)
        self.forward_calls += 1
        return output.logits[0].float()

    def _record(self, kind: str, start: int, logits: torch.Tensor) -> None:
        if self.record_logits:
            for offset in range(logits.shape[0]):
                self.row_logits[(kind, start + offset)] = logits[offset].cpu()


class RecomputingDecoder(SimulMaskDecoder):
    """Baseline without SimulMask's cache reuse: after every read, the next write re-encodes p2 and the whole target
    so far over the new prompt cache, so every target token sees all the source read (causal fine-tuning's view)."""

    def _drop_last_target(self) -> None:
        self.unfed = self.target_ids.pop()  # its KV goes with the rest of the prediction cache at the next write
        self.target_word.pop()

    def _append_target(self, ids: Sequence[int], word: int) -> torch.Tensor:
        if self.cache is None or self.spliced_prompt_length != len(self.source_ids):
            self.cache = splice(self.prompt_cache)
            self.spliced_prompt_length = len(self.source_ids)
            logits = self._forward(self.target_ids + list(ids), self.cache)  # recomputed: the whole prediction
        else:
            logits = self._forward(ids, self.cache)
        self.target_ids.extend(ids)
        self.target_word.extend([word] * len(ids))
        return logits
