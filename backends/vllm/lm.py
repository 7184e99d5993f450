"""Greedy drafting on a vLLM engine with run-time q/k capture, behind the transformers backend's interface:
`VLLMCausalLM.session(heads).draft(prompt_ids, budget, stop=...)` returns the same `Draft`, and its
`source_attention` runs the same replay (backends/replay.py) on the rows this engine captured.

One engine serves any number of streams; drafts run one at a time (a lock), and each draft takes its own copy of
the captured rows, so streams never see each other's q/k.
"""
from __future__ import annotations

import gc
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Collection, Sequence

import torch

from backends.draft import Draft, check_draft_request, stop_token_ids
from backends.recorder import LayerGeometry
from backends.models import load_tokenizer, resolve_model
from backends.vllm.observer import LayerLayout, key_heads_by_layer
from backends.vllm.worker import CONFIG_KEY
from policies.ssbd import common_prefix_length

WORKER = "backends.vllm.worker.CaptureWorker"
DTYPES = ("float32", "bfloat16", "float16")
DEFAULT_MAX_MODEL_LEN = 4096  # positions per request (prompt + draft); sizes the KV cache and the capture buffers


def refuse_capture_under_cuda_graphs(capture_heads, enforce_eager: bool, cuda: bool,
                                     opted_in: bool = False) -> None:
    """Capture inside CUDA graphs is graph-safe by design (the op writes with a fixed shape and no host sync, and
    padding rows go to a trash row) but has not yet run on a GPU (docs/vllm.md, "GPU / CUDA graphs"). So it is
    refused unless asked for with `capture_with_cuda_graphs=True` (`make gpu-check` does, and compares the rows
    with an eager engine's); compiled capture without graphs (CPU) and capture on an eager CUDA engine run."""
    if capture_heads and cuda and not enforce_eager and not opted_in:
        raise ValueError(
            "q/k capture under CUDA graphs is not supported yet: it has not been verified on a GPU (see "
            "docs/vllm.md, 'GPU / CUDA graphs'). Load the capturing engine with enforce_eager=True (the default), "
            "or opt in with capture_with_cuda_graphs=True and check it against an eager engine (make gpu-check); "
            "an engine without capture_heads may use graphs"
        )


@dataclass
class CapturedRows:
    """One draft's captured rows, read by `backends.replay.replay_attention` (the `QKRecorder` interface)."""

    heads: tuple[tuple[int, int], ...]
    layouts: dict[int, LayerLayout]
    queries_by_layer: dict[int, torch.Tensor]  # [selected query heads, positions, head_dim]
    keys_by_layer: dict[int, torch.Tensor]  # [captured KV heads, positions, head_dim], by key-owning layer
    key_heads: dict[int, tuple[int, ...]]
    generation: int = 0  # a draft's rows are its own copy: never overwritten
    geometry: dict[int, LayerGeometry] = field(init=False)

    def __post_init__(self):
        self.geometry = {layer: layout.geometry for layer, layout in self.layouts.items()}

    def queries(self, layer: int, head: int, positions: slice) -> torch.Tensor:
        rows = self.queries_by_layer[layer]
        if positions.stop > rows.shape[1]:
            raise RuntimeError(f"no captured query rows up to position {positions.stop} (have {rows.shape[1]})")
        return rows[self.layouts[layer].query_heads.index(head), positions]

    def keys(self, layer: int, head: int, length: int) -> torch.Tensor:
        layout = self.layouts[layer]
        rows = self.keys_by_layer[layout.key_layer]
        if length > rows.shape[1]:
            raise RuntimeError(f"captured keys cover {rows.shape[1]} positions, replay needs {length}")
        return rows[self.key_heads[layout.key_layer].index(head // layout.group), :length]


class VLLMCausalLM:
    """A vLLM engine (one model) with capture installed for `capture_heads`, and the model's own tokenizer."""

    def __init__(self, llm, tokenizer, capture_heads: Sequence[tuple[int, int]] | None, stop_ids: set[int]):
        self.llm = llm
        self.tokenizer = tokenizer
        self.capture_heads = frozenset(tuple(h) for h in capture_heads or ())
        self.stop_token_ids = frozenset(stop_ids)
        self._lock = threading.Lock()
        # Token ids whose keys the capture buffers hold, position by position (prefix caching skips computing a
        # cached prefix: its keys must already be there, see `_generate`).
        self._captured_ids: list[int] = []
        self.last_cached_tokens = 0  # prompt tokens the last draft took from vLLM's prefix cache (diagnostics)
        self.prefix_cache_retries = 0  # drafts recomputed because a cache hit had no captured keys
        self.layouts: dict[int, LayerLayout] = llm.collective_rpc("capture_layout")[0] if capture_heads else {}
        self.key_heads = key_heads_by_layer(self.layouts)

    @classmethod
    def load(cls, spec: str, *, dtype: str = "float32", device: str = "cpu",
             capture_heads: Sequence[tuple[int, int]] | None = None, max_model_len: int | None = None,
             enforce_eager: bool = True, enable_prefix_caching: bool = False, capture_with_cuda_graphs: bool = False,
             **engine_args) -> "VLLMCausalLM":
        """Build the engine for `spec` (resolved like every backend: 'embedded', a .gguf, a directory, an HF id).

        `capture_heads` are installed before vLLM profiles or compiles the model; sessions may use any subset.
        `device` is decided by the vLLM build (its platform). The capture buffers hold `max_model_len` positions
        (default: the model's maximum, at most DEFAULT_MAX_MODEL_LEN).
        The engine core runs in this process (captured rows are read without serialisation, and no spawn guard is
        needed). On CPU the KV cache gets VLLM_CPU_KVCACHE_SPACE GiB (default here: 1), instead of vLLM's 92% of
        the machine's memory. A capturing engine with `enforce_eager=False` on CUDA is refused unless
        `capture_with_cuda_graphs=True` (not yet verified on a GPU, see `refuse_capture_under_cuda_graphs`).
        """
        if dtype not in DTYPES:
            raise ValueError(f"the vLLM backend runs {', '.join(DTYPES)} models, not {dtype!r}")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        from vllm import LLM
        from vllm.platforms import current_platform

        refuse_capture_under_cuda_graphs(capture_heads, enforce_eager, current_platform.is_cuda_alike(),
                                         capture_with_cuda_graphs)

        from transformers import AutoConfig

        path = resolve_model(spec)
        tokenizer = load_tokenizer(spec, path)
        config = AutoConfig.from_pretrained(path)
        if max_model_len is None:
            longest = getattr(config.get_text_config(), "max_position_embeddings", None) or DEFAULT_MAX_MODEL_LEN
            max_model_len = min(longest, DEFAULT_MAX_MODEL_LEN)
        additional = {CONFIG_KEY: {"heads": [list(h) for h in capture_heads]}} if capture_heads else {}
        llm = LLM(str(path), tokenizer=str(path), dtype=dtype, max_model_len=max_model_len,
                  enforce_eager=enforce_eager, enable_prefix_caching=enable_prefix_caching, worker_cls=WORKER,
                  additional_config=additional, seed=0, **engine_args)
        return cls(llm, tokenizer, capture_heads, _stop_ids(path, config, tokenizer))

    def close(self) -> None:
        """Stop the engine and free its KV cache (an engine otherwise lives as long as the process)."""
        self.llm.llm_engine.engine_core.shutdown()
        del self.llm
        gc.collect()

    def session(self, heads: Sequence[tuple[int, int]] | None = None) -> "VLLMDecodeSession":
        return VLLMDecodeSession(self, heads)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def generate(self, prompt_ids: list[int], max_tokens: int, heads: tuple[tuple[int, int], ...] | None,
                 repetition_penalty: float = 1.0) -> tuple[list[int], CapturedRows | None]:
        """Greedy tokens (stop token included when one ends the text) and, with heads, a copy of the rows
        captured for every position fed to the model."""
        with self._lock:
            tokens = list(self._generate(prompt_ids, max_tokens, repetition_penalty=repetition_penalty).token_ids)
            fed = prompt_ids + tokens[:-1]  # the last sampled token is never fed back
            self._captured_ids = fed
            if not heads:
                return tokens, None
            rows = self.llm.collective_rpc("read_captured_rows", args=(len(fed),))[0]
        return tokens, CapturedRows(heads, {l: self.layouts[l] for l, _ in heads}, rows["queries"], rows["keys"],
                                    self.key_heads)

    def first_token(self, prompt_ids: list[int], banned: Collection[int], repetition_penalty: float = 1.0) -> int:
        """The greedy next token of `prompt_ids` among those not in `banned`: the best of the top len(banned) + 1
        log-probabilities of one generated token (ties to the lower id, as argmax).

        vLLM's logprobs are those of the raw logits, before any penalty, so a penalised pick is instead the greedy
        token of one request whose `banned` logits get a bias of -inf (SamplingParams built directly: only
        `SamplingParams.from_optional` clamps a bias to +-100); -inf stays -inf under the penalty."""
        if repetition_penalty != 1.0:
            with self._lock:
                output = self._generate(prompt_ids, 1, repetition_penalty=repetition_penalty,
                                        logit_bias={token: float("-inf") for token in banned})
                self._captured_ids = list(prompt_ids)
            token = output.token_ids[0]
            if token in banned:
                raise RuntimeError(f"vLLM sampled banned first token {token} despite its -inf logit bias")
            return token
        with self._lock:
            output = self._generate(prompt_ids, 1, logprobs=len(banned) + 1)
            self._captured_ids = list(prompt_ids)
        ranked = output.logprobs[0]
        return max((token for token in ranked if token not in banned), key=lambda t: (ranked[t].logprob, -t))

    def _generate(self, prompt_ids: list[int], max_tokens: int, logprobs: int | None = None,
                  repetition_penalty: float = 1.0, logit_bias: dict[int, float] | None = None):
        """One greedy request; its completion (token ids and, when asked, the top `logprobs` of each).

        `repetition_penalty` is vLLM's own (vLLM 0.32, v1/sample/sampler.py: `apply_logits_processors` applies
        penalties, the prompt's ids included, to the float32 logits before `greedy_sample`), the semantics of
        `backends.draft.penalise_repetitions`."""
        from vllm import SamplingParams, TokensPrompt

        def run(skip_prefix_cache: bool):
            params = SamplingParams(temperature=0.0, max_tokens=max_tokens, stop_token_ids=sorted(self.stop_token_ids),
                                    detokenize=False, skip_reading_prefix_cache=skip_prefix_cache, logprobs=logprobs,
                                    repetition_penalty=repetition_penalty, logit_bias=logit_bias)
            return self.llm.generate([TokensPrompt(prompt_token_ids=prompt_ids)], params, use_tqdm=False)[0]

        output = run(skip_prefix_cache=False)
        if self.capture_heads and (output.num_cached_tokens or 0) > common_prefix_length(self._captured_ids,
                                                                                          prompt_ids):
            # The engine reused cached KV for positions whose keys this engine's buffers do not hold (another
            # stream's prefix): recompute this prompt without reading the prefix cache, so every key is captured.
            self.prefix_cache_retries += 1
            output = run(skip_prefix_cache=True)
        self.last_cached_tokens = output.num_cached_tokens or 0
        return output.outputs[0]


class VLLMDecodeSession:
    """One stream's view of the engine. Stateless between drafts: vLLM's prefix cache (if enabled) is the
    engine's, and every draft carries its own captured rows."""

    def __init__(self, lm: VLLMCausalLM, heads: Sequence[tuple[int, int]] | None = None):
        self.lm = lm
        self.heads = tuple((int(l), int(h)) for l, h in heads) if heads else None
        missing = set(self.heads or ()) - lm.capture_heads
        if missing:
            raise ValueError(f"heads {sorted(missing)} are not captured by this vLLM engine (it captures "
                             f"{sorted(lm.capture_heads)}); build it with capture_heads covering the head set")

    def reset(self) -> None:
        pass

    def draft(self, prompt_ids: Sequence[int], max_new_tokens: int, capture: bool = True,
              stop: Callable[[Draft], bool] | None = None, banned_first_tokens: Collection[int] = (),
              repetition_penalty: float = 1.0) -> Draft:
        """Greedy continuation with the transformers backend's semantics (see `backends.hf.lm.DecodeSession`).

        With capture, one token more than the budget is sampled so that the last kept token is fed back and its
        query row exists; `stop(draft)` is applied to the growing draft afterwards, giving the same draft the
        transformers backend stops at (the decisions depend on earlier rows only). A draft whose first token may
        not be one of `banned_first_tokens` takes that token from one request and the rest from a second, which
        feeds it as the prompt's last position; with capture that request's rows (every position fed) hold the first
        token's query too, at the index a draft without a ban has it.
        `repetition_penalty` is vLLM's, which penalises the ids of the prompt and of the output alike: the second
        request's prompt ends with the first token, so it penalises the same ids as one request would.
        """
        check_draft_request(prompt_ids, max_new_tokens, capture, self.heads is not None, repetition_penalty)
        prompt_ids = list(prompt_ids)
        if banned_first_tokens:
            first = self.lm.first_token(prompt_ids, frozenset(banned_first_tokens), repetition_penalty)
            tokens, rows = [first], None
            if first not in self.lm.stop_token_ids and (max_new_tokens > 1 or capture):
                rest, rows = self.lm.generate(prompt_ids + [first], max_new_tokens - 1 + (1 if capture else 0),
                                              self.heads if capture else None, repetition_penalty)
                tokens += rest
        else:
            tokens, rows = self.lm.generate(prompt_ids, max_new_tokens + (1 if capture else 0),
                                            self.heads if capture else None, repetition_penalty)
        draft = Draft(prompt_length=len(prompt_ids), recorder=rows)
        for token in tokens[:max_new_tokens]:
            if token in self.lm.stop_token_ids:
                draft.finished = True
                break
            draft.tokens.append(token)
            if stop is not None and stop(draft):
                break
        return draft


def _stop_ids(path: Path, config, tokenizer) -> set[int]:
    from transformers import GenerationConfig

    try:
        generation = GenerationConfig.from_pretrained(path)
    except OSError:
        generation = None
    return stop_token_ids(SimpleNamespace(config=config, generation_config=generation), tokenizer)
