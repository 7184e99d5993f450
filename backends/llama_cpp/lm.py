"""Greedy drafting on llama.cpp behind the transformers backend's interface: `LlamaCppCausalLM.session(heads)
.draft(prompt_ids, budget, capture, stop)` returns the same `Draft`, whose `source_attention` runs the same replay
(`backends.replay`) on q/k captured through llama.cpp's eval callback (`backends.llama_cpp.capture`).

Each session owns one llama.cpp context (prefix reuse and roll-back of SSBD's `LlamaCppSession`); a session without
heads installs no callback at all (plain llama.cpp decoding).
"""
from __future__ import annotations

from typing import Callable, Collection, Sequence

import numpy as np

from backends.draft import Draft, check_draft_request, greedy_picker
from backends.llama_cpp import LlamaCppLM, LlamaCppSession
from backends.llama_cpp.capture import EvalCallbackCapture
from backends.recorder import QKRecorder


class LlamaCppCausalLM(LlamaCppLM):
    """A GGUF model for AlignAtt and wait-k drafting (`load(spec, n_ctx, n_threads, weight_type)` as for SSBD)."""

    default_n_ctx = 2048  # positions per stream (prompt + draft); a sentence's prompt plus its final budget fits

    def session(self, heads: Sequence[tuple[int, int]] | None = None) -> "LlamaCppDecodeSession":
        return LlamaCppDecodeSession(self, heads)


class LlamaCppDecodeSession(LlamaCppSession):
    """One stream's llama.cpp context and, with heads, the recorder its eval callback fills (keys of every position
    fed, queries of draft rows), truncated with the context."""

    def __init__(self, lm: LlamaCppLM, heads: Sequence[tuple[int, int]] | None = None):
        self.heads = tuple((int(l), int(h)) for l, h in heads) if heads else None
        self.recorder = QKRecorder(self.heads) if self.heads else None
        self.capture: EvalCallbackCapture | None = None
        self._record_queries = False  # whether the next batch's query rows are recorded (draft rows)
        if self.recorder is None:
            super().__init__(lm)
            return
        self.capture = EvalCallbackCapture(self.recorder)
        super().__init__(lm, eval_callback=self.capture.callback)
        self.capture.configure(self.llama)

    def reset(self) -> None:
        super().reset()
        if self.recorder is not None:
            self.recorder = self.capture.recorder = QKRecorder(self.heads)

    def draft(self, prompt_ids: Sequence[int], max_new_tokens: int, capture: bool = True,
              stop: Callable[[Draft], bool] | None = None, banned_first_tokens: Collection[int] = (),
              repetition_penalty: float = 1.0) -> Draft:
        """Greedy continuation of `prompt_ids` with the semantics of `backends.hf.lm.DecodeSession.draft`: the query
        of every draft token at its own position, one extra step for the last token when capturing, `stop(draft)`
        called once the newest token's row is captured, a first token that is none of `banned_first_tokens`, each
        pick made on logits penalised for the prompt's and the draft's ids when `repetition_penalty` is not 1.0."""
        check_draft_request(prompt_ids, max_new_tokens, capture, self.recorder is not None, repetition_penalty)
        prompt_ids = [int(t) for t in prompt_ids]
        if self.recorder is not None:
            self.recorder.generation += 1
        self._record_queries = False
        logits = self._prefill(prompt_ids)
        if banned_first_tokens:
            logits = logits.copy()
            logits[list(banned_first_tokens)] = -np.inf
        draft = Draft(prompt_length=len(prompt_ids), recorder=self.recorder if capture else None,
                      generation=self.recorder.generation if self.recorder is not None else 0)
        pick = greedy_picker(draft, prompt_ids, repetition_penalty)  # rows are float32 copies (`_decode`)
        while True:
            token = pick(logits)
            if token in self.stop_token_ids:
                draft.finished = True
                break
            draft.tokens.append(token)
            if len(draft.tokens) == max_new_tokens and not capture:
                break
            self._record_queries = capture
            logits = self._decode([token], every_row=False)[-1]
            if len(draft.tokens) == max_new_tokens or (stop is not None and stop(draft)):
                break
        if capture:
            self.recorder.check_complete()
        return draft

    def _batch_starts(self, start: int, count: int) -> None:
        if self.capture is not None:
            self.capture.begin(start, count, self._record_queries)

    def _decode(self, token_ids: list[int], every_row: bool) -> np.ndarray:
        rows = super()._decode(token_ids, every_row)
        if self.capture is not None:
            self.capture.raise_error()
        return rows

    def _truncate(self, length: int) -> None:
        super()._truncate(length)
        if self.recorder is not None:
            self.recorder.truncate(length)
