"""Greedy drafting with a decoder-only transformers model, reusing the KV cache of the unchanged prompt prefix.

`CausalLM` wraps loaded weights (shareable, read-only); each stream opens its own `DecodeSession`, which owns the
KV cache and the q/k recorder, so no state passes between streams.
"""
from __future__ import annotations

from typing import Callable, Collection, Sequence

import torch
from transformers.cache_utils import DynamicCache

from backends.draft import Draft, check_draft_request, greedy_picker, stop_token_ids
from backends.hf.cache_keyword import cache_kwargs
from backends.hf.capture import CAPTURE_IMPLEMENTATION, RECORDER_KWARG
from backends.hf.compiled_step import COMPILED_CACHE_TOKENS, CompiledStep, static_cache
from backends.recorder import QKRecorder


class CausalLM:
    """A loaded decoder-only model and tokenizer, switched to the capturing SDPA implementation. `compiled`: sessions
    decode with one compiled single-token step (`backends.hf.compiled_step`), compiled here on a few warm-up steps
    so that no stream waits for it."""

    def __init__(self, model, tokenizer, compiled: bool = False):
        if getattr(model.config, "attn_logit_softcapping", None):
            raise ValueError(
                f"{model.config.model_type} softcaps attention logits, which SDPA cannot do; "
                f"q/k capture for it needs an eager kernel (not supported yet)"
            )
        self.model = model
        self.tokenizer = tokenizer
        # Capture wraps stock SDPA and records nothing unless a recorder is passed: outputs are unchanged.
        model.set_attn_implementation(CAPTURE_IMPLEMENTATION)
        self.device = next(model.parameters()).device
        self.stop_token_ids = frozenset(stop_token_ids(model, tokenizer))
        self.compiled_step = None
        if compiled:
            self.compiled_step = CompiledStep(model)
            self.compiled_step.warm_up(model)

    @classmethod
    def load(cls, spec: str, *, dtype: str = "float32", device: str = "cpu", compiled: bool = False) -> "CausalLM":
        from backends.models import load_causal_lm

        model, tokenizer = load_causal_lm(spec, dtype=dtype, device=device)
        return cls(model, tokenizer, compiled=compiled)

    def session(self, heads: Sequence[tuple[int, int]] | None = None) -> "DecodeSession":
        return DecodeSession(self, heads)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


def without_tokens(logits: torch.Tensor, banned: Collection[int]) -> torch.Tensor:
    """A copy of one row of `logits` on which greedy decoding cannot choose the `banned` token ids."""
    if not banned:
        return logits
    logits = logits.clone()
    logits[list(banned)] = float("-inf")
    return logits


class DecodeSession:
    """One stream's decoding state: a KV cache for the last prompt+draft and, with heads, their captured q/k.

    On a compiled `CausalLM` the cache is static and draft tokens come from the compiled step; with capture, the q/k
    rows of the draft come from one batched eager forward over it once it is decoded, and `stop` is then asked token
    by token as in eager decoding (the draft is cut where it says stop). A prompt and draft longer than the static
    cache decode eagerly."""

    def __init__(self, lm: CausalLM, heads: Sequence[tuple[int, int]] | None = None):
        self.lm = lm
        self.heads = tuple(heads) if heads else None
        self.reset()

    def reset(self) -> None:
        self.static = self.lm.compiled_step is not None
        self.cache = self._new_cache()
        self.cached_ids: list[int] = []
        self.recorder = QKRecorder(self.heads) if self.heads else None

    def _new_cache(self):
        return static_cache(self.lm.model, COMPILED_CACHE_TOKENS) if self.static else DynamicCache()

    def _use_static(self, static: bool) -> None:
        """Decode the next draft into a static (compiled) or a dynamic (eager) cache, starting it afresh on a
        change."""
        if static != self.static:
            self.static = static
            self.cache = self._new_cache()
            self.cached_ids = []
            if self.recorder is not None:
                self.recorder.truncate(0)

    @torch.inference_mode()
    def draft(self, prompt_ids: Sequence[int], max_new_tokens: int, capture: bool = True,
              stop: Callable[[Draft], bool] | None = None, banned_first_tokens: Collection[int] = (),
              repetition_penalty: float = 1.0) -> Draft:
        """Greedy continuation of `prompt_ids`, at most `max_new_tokens` tokens.

        With `capture` (and heads), the query row of every draft token (at its own position, as in calibration)
        and the keys of all positions are recorded; a draft cut by the budget gets one extra forward so that its
        last token's query exists too. `stop(draft)`, called once the newest token's row is captured, ends the
        draft early when it returns True (the policy has seen the first token it rejects).
        `banned_first_tokens`: ids the first token may not be (greedy over the others); later tokens are free.
        `repetition_penalty` (>= 1.0; 1.0: none) penalises, before each pick, the float32 logit of every id of the
        prompt and of the draft so far, as `model.generate(repetition_penalty=...)` does (`penalise_repetitions`);
        the compiled step's logits are penalised alike, outside the graph.
        """
        check_draft_request(prompt_ids, max_new_tokens, capture, self.recorder is not None, repetition_penalty)
        prompt_ids = list(prompt_ids)
        if self.lm.compiled_step is not None:
            self._use_static(len(prompt_ids) + max_new_tokens <= COMPILED_CACHE_TOKENS)
        if self.recorder is not None:
            self.recorder.generation += 1
        logits = self._prefill(prompt_ids)
        draft = Draft(prompt_length=len(prompt_ids), recorder=self.recorder if capture else None,
                      generation=self.recorder.generation if self.recorder is not None else 0)
        decode = self._decode_compiled if self.static else self._decode_eager
        pick = greedy_picker(draft, prompt_ids, repetition_penalty, as_float32=lambda row: row.float())
        decode(draft, without_tokens(logits[0, -1], banned_first_tokens), max_new_tokens, capture, stop, pick)
        if capture:
            self.recorder.check_complete()
        return draft

    def _decode_eager(self, draft: Draft, logits: torch.Tensor, max_new_tokens: int, capture: bool,
                      stop: Callable[[Draft], bool] | None, pick: Callable[[torch.Tensor], int]) -> None:
        """`draft`'s tokens, one eager forward each (capturing each row as its token is fed)."""
        while True:
            token = pick(logits)
            if token in self.lm.stop_token_ids:
                draft.finished = True
                return
            draft.tokens.append(token)
            if len(draft.tokens) == max_new_tokens and not capture:
                return
            logits = self._forward([token], record_queries=capture)[0, -1]
            if len(draft.tokens) == max_new_tokens or (stop is not None and stop(draft)):
                return

    def _decode_compiled(self, draft: Draft, logits: torch.Tensor, max_new_tokens: int, capture: bool,
                         stop: Callable[[Draft], bool] | None, pick: Callable[[torch.Tensor], int]) -> None:
        """`draft`'s tokens from the compiled step (see the class); the same tokens, rows and stops as eager."""
        while True:
            token = pick(logits)
            if token in self.lm.stop_token_ids:
                draft.finished = True
                break
            draft.tokens.append(token)
            if len(draft.tokens) == max_new_tokens:
                break
            logits = self.lm.compiled_step(token, self.cache)
            self.cached_ids.append(token)
            if not capture and stop is not None and stop(draft):
                return
        if not capture or not draft.tokens:
            return
        self._truncate(draft.prompt_length)
        self._forward(draft.tokens, record_queries=True)  # every draft row's q/k at its own position, in one pass
        if stop is None:
            return
        decoded, draft.tokens = draft.tokens, []
        for token in decoded:
            draft.tokens.append(token)
            # Eager decoding asks `stop` after each token but the one that fills the budget.
            if len(draft.tokens) == max_new_tokens:
                return
            if stop(draft):
                draft.finished = False  # cut before any end-of-sequence it would have read
                return

    def _prefill(self, prompt_ids: list[int]) -> torch.Tensor:
        """Reuse the cached longest common prefix (always re-feeding at least the last prompt token; with heads, only
        positions whose keys were recorded: a compiled step records none)."""
        reuse = 0
        limit = min(len(self.cached_ids), len(prompt_ids) - 1)
        if self.recorder is not None:
            limit = min(limit, self.recorder.recorded_positions)
        while reuse < limit and self.cached_ids[reuse] == prompt_ids[reuse]:
            reuse += 1
        self._truncate(reuse)
        return self._forward(prompt_ids[reuse:], record_queries=False)

    def _truncate(self, length: int) -> None:
        """Forget the cached positions from `length` on (KV cache, recorded q/k, ids)."""
        if length < len(self.cached_ids):
            self.cache.crop(length - len(self.cached_ids))  # negative: drop that many positions
            del self.cached_ids[length:]
        if self.recorder is not None:
            self.recorder.truncate(length)

    def _forward(self, new_ids: list[int], record_queries: bool) -> torch.Tensor:
        kwargs = {}
        if self.recorder is not None:
            # Keys are recorded on every forward so that they stay in step with the KV cache.
            self.recorder.begin(len(self.cached_ids), len(new_ids), record_queries)
            kwargs[RECORDER_KWARG] = self.recorder
        input_ids = torch.tensor([new_ids], dtype=torch.long, device=self.lm.device)
        # Recording several query rows needs every row computed: Gemma-4 computes its KV-shared layers only for the
        # rows whose logits are kept.
        keep = 0 if record_queries and len(new_ids) > 1 else 1
        output = self.lm.model(input_ids=input_ids, **cache_kwargs(self.lm.model, self.cache), use_cache=True,
                               logits_to_keep=keep, **kwargs)
        self.cached_ids.extend(new_ids)
        return output.logits
