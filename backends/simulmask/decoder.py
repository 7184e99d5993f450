"""The SimulMask wait-k decoder for ALiBi models: a prompt cache (p1 + source read so far) and a prediction cache
(p2 + target), spliced as [prompt ‖ prediction] for writes, so no key or value is ever recomputed.

ALiBi is not baked into keys: over the splice, stock ALiBi gives each key its index, which is exactly its rank among
the keys a SimulMask row sees in training (unread source is simply absent). `RecomputingDecoder` is the baseline that
re-encodes p2 + target after every read (the paper's "falcon-causal-rec", Table 1)."""
from __future__ import annotations

from typing import Sequence

import torch
from transformers.cache_utils import DynamicCache

from backends.hf.cache_keyword import cache_kwargs
from backends.simulmask.prompt import source_text
from backends.streaming_masks.decoder import StreamingLM
from backends.streaming_masks.word_decoder import WordDecoder


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


class SimulMaskDecoder(WordDecoder):
    """SimulMask: a prompt cache (p1 + source read) and a prediction cache (p2 + target), spliced for every write after
    a read; rows are computed when the token they predict is generated (alignment "predicted")."""

    def _reset_cache(self) -> None:
        self.prompt_cache = DynamicCache()
        self.cache: DynamicCache | None = None  # the splice [prompt ‖ prediction]; None before the first write
        self.spliced_prompt_length = 0  # prompt entries at the front of self.cache

    def _source_text(self, end: bool) -> str:
        text = source_text(self.lm.template, self.source_words)
        return text + self.lm.template.source_suffix if end else text

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
        output = self.lm.model(input_ids=torch.tensor([list(ids)], device=self.lm.device),
                               **cache_kwargs(self.lm.model, cache), use_cache=True,
                               logits_to_keep=0 if self.record_logits else 1)
        self.forward_calls += 1
        return output.logits[0].float()


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
