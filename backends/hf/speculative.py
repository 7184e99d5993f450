"""SSBD on transformers: the draft is verified in one batched forward on top of the cached prompt prefix, and the
DynamicCache is cropped at the first divergence (`backends.speculative` holds the step itself)."""
from __future__ import annotations

import numpy as np
import torch
from transformers.cache_utils import DynamicCache

from backends.hf.cache_keyword import cache_kwargs
from backends.hf.lm import CausalLM
from backends.speculative import SpeculativeSession, reusable_prefix


class HFSpeculativeSession(SpeculativeSession):
    """One stream's KV cache over the last prompt + output of a shared, read-only `CausalLM`."""

    def __init__(self, lm: CausalLM):
        self.lm = lm
        self.stop_token_ids = lm.stop_token_ids
        self.reset()

    def reset(self) -> None:
        self.cache = DynamicCache()
        self.cached_ids: list[int] = []

    def _prefill(self, prompt_ids: list[int]) -> np.ndarray:
        reuse = reusable_prefix(self.cached_ids, prompt_ids)
        self._truncate(reuse)
        return self._forward(prompt_ids[reuse:], all_rows=False)[-1]

    def _evaluate(self, token_ids: list[int]) -> np.ndarray:
        return self._forward(token_ids, all_rows=True)

    def _truncate(self, length: int) -> None:
        if length < len(self.cached_ids):
            self.cache.crop(length - len(self.cached_ids))  # negative: drop that many positions
            del self.cached_ids[length:]

    @torch.inference_mode()
    def _forward(self, new_ids: list[int], all_rows: bool) -> np.ndarray:
        input_ids = torch.tensor([new_ids], dtype=torch.long, device=self.lm.device)
        output = self.lm.model(input_ids=input_ids, **cache_kwargs(self.lm.model, self.cache), use_cache=True,
                               logits_to_keep=0 if all_rows else 1)
        self.cached_ids.extend(new_ids)
        return output.logits[0].float().cpu().numpy()
