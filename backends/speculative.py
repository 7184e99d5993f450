"""One SSBD generation step (Algorithm 1) on any backend that can prefill a prompt with prefix reuse, evaluate a
batch of tokens returning every row's logits, and truncate its KV cache; the transformers and llama.cpp sessions
implement those three operations."""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from policies.ssbd import accepted_draft_length, common_prefix_length


@dataclass(frozen=True)
class SpeculativeOutput:
    """The output of one step: `tokens` = the accepted draft prefix + newly decoded tokens (stop token excluded)."""

    tokens: list[int]
    accepted: int  # leading draft tokens kept
    draft_length: int  # draft tokens verified
    finished: bool  # ended with a stop token (not by the budget)
    prompt_seconds: float  # prompt prefill (shared-prefix reuse included), wall clock
    generation_seconds: float  # draft verification + decoding, wall clock
    prompt_cpu_seconds: float = 0.0  # the same in this process's CPU time (robust to other jobs on the machine)
    generation_cpu_seconds: float = 0.0
    verification_cpu_seconds: float = 0.0  # the part of generation_cpu_seconds spent verifying the draft


class SpeculativeSession(ABC):
    """One stream's decoding state (a KV cache over the last prompt + output). Subclasses implement `_prefill`,
    `_evaluate` and `_truncate`; `generate` is the backend-neutral step."""

    stop_token_ids: frozenset[int]

    @abstractmethod
    def reset(self) -> None:
        """Forget the cache (a new stream)."""

    @abstractmethod
    def _prefill(self, prompt_ids: list[int]) -> np.ndarray:
        """Make the cache hold exactly `prompt_ids` (reusing the longest cached prefix, re-feeding at least the last
        token) and return the logits row after the last prompt token, [V]."""

    @abstractmethod
    def _evaluate(self, token_ids: list[int]) -> np.ndarray:
        """Append `token_ids` to the cache in one batch; return the logits after each of them, [len, V]."""

    @abstractmethod
    def _truncate(self, length: int) -> None:
        """Keep the first `length` cached positions only."""

    def generate(self, prompt_ids: Sequence[int], draft_ids: Sequence[int], beta: float,
                 max_new_tokens: int) -> SpeculativeOutput:
        """Verify `draft_ids` after `prompt_ids` with bias `beta`, keep the longest surviving prefix, then decode
        greedily until a stop token or `max_new_tokens` output tokens. With an empty draft this is plain greedy
        decoding (re-translation)."""
        if not prompt_ids:
            raise ValueError("empty prompt")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        prompt_ids = [int(t) for t in prompt_ids]
        draft = [int(t) for t in draft_ids][:max_new_tokens]
        start, start_cpu = time.perf_counter(), time.process_time()
        next_logits = self._prefill(prompt_ids)
        prefilled, prefilled_cpu = time.perf_counter(), time.process_time()
        accepted = 0
        verified_cpu = prefilled_cpu
        if draft:
            rows = np.concatenate([next_logits[None, :], self._evaluate(draft)])  # row i predicts draft[i]
            accepted = accepted_draft_length(draft, rows, beta)
            if accepted < len(draft):
                self._truncate(len(prompt_ids) + accepted)  # Algorithm 1, line 13: clear the cache from d on
            next_logits = rows[accepted]
            verified_cpu = time.process_time()
        tokens = draft[:accepted]
        finished = False
        while len(tokens) < max_new_tokens:
            token = int(np.argmax(next_logits))
            if token in self.stop_token_ids:
                finished = True
                break
            tokens.append(token)
            if len(tokens) == max_new_tokens:
                break
            next_logits = self._evaluate([token])[-1]
        done, done_cpu = time.perf_counter(), time.process_time()
        return SpeculativeOutput(tokens=tokens, accepted=accepted, draft_length=len(draft), finished=finished,
                                 prompt_seconds=prefilled - start, generation_seconds=done - prefilled,
                                 prompt_cpu_seconds=prefilled_cpu - start_cpu,
                                 generation_cpu_seconds=done_cpu - prefilled_cpu,
                                 verification_cpu_seconds=verified_cpu - prefilled_cpu)


def reusable_prefix(cached_ids: Sequence[int], prompt_ids: Sequence[int]) -> int:
    """How many cached positions a new prompt keeps: the common prefix, short of the last prompt token (always fed
    again: its logits row starts the generation)."""
    limit = len(prompt_ids) - 1
    return common_prefix_length(cached_ids[:limit], prompt_ids[:limit])
