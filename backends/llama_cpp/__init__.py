"""llama.cpp (llama-cpp-python) as a runtime: GGUF files (the embedded model, re-quantized copies) and one context
per stream with prefix reuse and roll-back. This module is SSBD's backend: the draft is evaluated as one batch with
logits for each of its rows (a prompt asks for its last row only), and the context is rolled back to the first
divergence. `backends.llama_cpp.lm` drafts for AlignAtt and wait-k on the same sessions, with q/k captured through
llama.cpp's eval callback (`backends.llama_cpp.capture`).

Prompts are token ids from the Hugging Face tokenizer of the same model (fed to llama.cpp directly), so both backends
see identical ids; each stream owns one llama.cpp context (the weights file is memory-mapped and shared).
"""
from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import numpy as np

from backends.speculative import SpeculativeSession, reusable_prefix

INSTALL_HINT = ("llama-cpp-python is not installed: pip install llama-cpp-python==0.3.36 (builds from source, about "
                "8 minutes on 2 cores; pip caches the wheel; on x86-64 with CFLAGS and CXXFLAGS set to "
                "'-mno-amx-tile -mno-amx-int8 -mno-amx-bf16', as `make install` does)")
# Weight types a GGUF can be re-quantized to (llama.cpp's file types). bf16 keeps a Q4_K_M model's values (they are
# dequantized, then rounded to bf16) and makes batched verification cheap on CPUs with AVX512-BF16: see docs/ssbd.md.
# f32 (every tensor dequantized) is the reference for the capture parity with transformers float32.
AUTO_WEIGHTS = "auto"  # the weight format this CPU runs best: backends.cpu.preferred_gguf_weights
WEIGHT_TYPES = {"bf16": "LLAMA_FTYPE_MOSTLY_BF16", "f16": "LLAMA_FTYPE_MOSTLY_F16", "q8_0": "LLAMA_FTYPE_MOSTLY_Q8_0",
                "q4_0": "LLAMA_FTYPE_MOSTLY_Q4_0", "f32": "LLAMA_FTYPE_ALL_F32"}
LLAMA_FTYPE_ALL_F32 = "0"  # general.file_type of an all-f32 GGUF, as llama.cpp's metadata strings spell it
FLOAT_FILE_TYPES = (LLAMA_FTYPE_ALL_F32, "1", "32")  # f32, f16 and bf16 weights (what llama.cpp never runs on AMX)
GGML_TYPE_F32 = 0
# llama.cpp built with -march=native on a CPU with AMX multiplies quantized weights with AMX tiles, which crash
# (`check_no_amx_matmul`); `make install` builds without them, and these flags are the fix for other builds.
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def gguf_path_for(spec: str) -> Path:
    """The GGUF file llama.cpp runs for `spec`: an embedded model ('embedded', the PyPI Qwen2.5-Coder-0.5B-Instruct,
    or 'embedded:<name>') or a .gguf file."""
    from backends.models import embedded_gguf_path, embedded_model

    if embedded_model(spec) is not None:
        return embedded_gguf_path(spec)
    path = Path(spec).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path
    raise ValueError(f"the llama_cpp backend runs GGUF files: model must be 'embedded', 'embedded:<name>' or a .gguf "
                     f"file, got {spec!r} (use backend: transformers for a Hugging Face directory)")


def weights_file(spec: str, weight_type: str = "") -> Path:
    """The GGUF file a model runs from: `spec`'s own, or its copy re-quantized to `weight_type` (a WEIGHT_TYPES key;
    "auto": bf16 where this CPU and this llama.cpp build have bf16 kernels, else q8_0), made once into the cache."""
    from backends.cpu import preferred_gguf_weights

    if weight_type == AUTO_WEIGHTS:
        weight_type = preferred_gguf_weights(build_features=build_features())
    if not weight_type:
        return gguf_path_for(spec)
    target = requantized_path(spec, weight_type)
    return target if target.is_file() else requantized_gguf(gguf_path_for(spec), weight_type, target)


def build_features() -> frozenset[str]:
    """The CPU features this llama.cpp library was compiled for ("AVX2", "AVX512_BF16", ...), from its system info
    line "CPU : SSE3 = 1 | AVX2 = 1 | AVX512 = 0 | ..."."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    pairs = (item.partition("=") for item in info.split("|"))
    return frozenset(name.split(":")[-1].strip() for name, _, value in pairs if value.strip() == "1")


def check_no_amx_matmul(file_type: str | None, gguf_path: Path, features: frozenset[str] | None = None) -> None:
    """RuntimeError, not a SIGILL later: quantized weights (`file_type`, the GGUF's general.file_type) on a llama.cpp
    build that multiplies them with AMX tiles (`features`: its build features, default this library's). The AMX
    code of the llama.cpp that llama-cpp-python 0.3.36 vendors dies with "Illegal instruction" at the first decode
    (seen on an Intel Xeon VM with amx_tile; upstream llama.cpp PR #26954: a tile configuration the compiler
    optimises away, tile permission asked on the main thread only). f32, f16 and bf16 weights never use it."""
    features = build_features() if features is None else features
    if file_type in FLOAT_FILE_TYPES or "AMX_INT8" not in features:
        return
    raise RuntimeError(
        f"{gguf_path} holds quantized weights, which this llama.cpp build multiplies with AMX tiles (it was compiled "
        "with -march=native on a CPU with AMX), and that code dies with 'Illegal instruction' (llama.cpp PR #26954). "
        "Run bf16 weights (gguf_weights: bf16, or auto, which picks bf16 on every CPU with AMX), or rebuild "
        f"llama-cpp-python without AMX, as `make install` does: CFLAGS='{NO_AMX_FLAGS}' CXXFLAGS='{NO_AMX_FLAGS}' "
        "pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python==0.3.36")


def requantized_path(spec: str | Path, weight_type: str) -> Path:
    """Where the copy of `spec` (an embedded model or a .gguf file) re-quantized to `weight_type` lives in the cache:
    named after the model, plus a digest of what it is made from: an embedded model's content hash, so the copy is
    found without the model's parts (the container image keeps the copy alone); a file's absolute path, size and
    modification time, so two files with one name (or a file replaced in place) never share a copy."""
    import hashlib

    from backends.models import embedded_model
    from backends.sources import cache_dir

    model = embedded_model(str(spec))
    if model is not None:
        name, identity = model.name, model.gguf_sha256
    else:
        source = gguf_path_for(str(spec)).resolve()
        stat = source.stat()
        name, identity = source.stem, f"{source}:{stat.st_size}:{stat.st_mtime_ns}"
    digest = hashlib.sha1(identity.encode()).hexdigest()[:12]
    return cache_dir() / "gguf" / f"{name}.{digest}.{weight_type}.gguf"


def requantized_gguf(source: Path, weight_type: str, target: Path | None = None) -> Path:
    """`source` re-quantized to `weight_type` (a WEIGHT_TYPES key) by llama.cpp's own quantizer, written once to
    `target` (default: `requantized_path(source, ...)` in the cache; atomically: concurrent streams never read a
    partial file) and reused."""
    if weight_type not in WEIGHT_TYPES:
        raise ValueError(f"unknown GGUF weight type {weight_type!r}: use one of {', '.join(WEIGHT_TYPES)} "
                         f"(or leave it empty to run the file as it is)")
    import ctypes

    import llama_cpp
    from llama_cpp._utils import suppress_stdout_stderr

    target = target or requantized_path(source, weight_type)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, WEIGHT_TYPES[weight_type])
    params.allow_requantize = True  # the source is usually quantized already
    with suppress_stdout_stderr(disable=False):  # llama.cpp logs every tensor
        status = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params))
    if status != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp could not re-quantize {source} to {weight_type} (status {status}); check that "
                           f"the file is a complete GGUF and that {target.parent} has room")
    partial.replace(target)
    return target


class LlamaCppLM:
    """A GGUF model for llama.cpp plus the Hugging Face tokenizer of the same weights (prompt rendering, decoding)."""

    default_n_ctx = 1024  # positions per stream when `load` is given none

    def __init__(self, gguf_path: Path, tokenizer, n_ctx: int = 1024, n_threads: int = 0):
        try:
            import llama_cpp  # noqa: F401
        except ImportError as error:
            raise ImportError(INSTALL_HINT) from error
        self.gguf_path = Path(gguf_path)
        self.tokenizer = tokenizer
        self.n_ctx = n_ctx
        self.n_threads = n_threads or None

    @classmethod
    def load(cls, spec: str, n_ctx: int = 0, n_threads: int = 0, weight_type: str = ""):
        """`weight_type` (a WEIGHT_TYPES key, or "auto": bf16 where the CPU has native bf16, else q8_0) runs the GGUF
        re-quantized to that type; empty runs the file as it is; `n_ctx` 0 is the class's `default_n_ctx`."""
        from transformers import AutoTokenizer

        from backends.models import resolve_tokenizer

        return cls(weights_file(spec, weight_type), AutoTokenizer.from_pretrained(resolve_tokenizer(spec)),
                   n_ctx or cls.default_n_ctx, n_threads)

    def session(self) -> "LlamaCppSession":
        return LlamaCppSession(self)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


class LlamaCppSession(SpeculativeSession):
    """One stream's llama.cpp context. Each batch asks llama.cpp for the logits of the rows it reads only: a prompt
    needs its last row, a draft every row. (`Llama(logits_all=True)` would compute the vocabulary projection for
    every prompt row too, about a quarter of a small model's cost per row, and keep n_ctx × vocabulary floats.)"""

    def __init__(self, lm: LlamaCppLM, eval_callback=None):
        """`eval_callback` (a `llama_cpp.ggml_backend_sched_eval_callback`, kept alive by the caller) is installed in
        the context: llama.cpp then offers it every graph node (`backends.llama_cpp.capture`)."""
        from llama_cpp import Llama

        from backends.draft import stop_token_ids

        self.lm = lm
        # Batches (prompt, draft verification) must use the same threads as decoding: llama-cpp-python's default
        # n_threads_batch is every core, and its spinning threads made a batch cost more than one-token steps.
        # n_batch bounds one llama.cpp batch (longer inputs go in several) and sizes llama-cpp-python's unused
        # `scores` buffer (n_batch x vocabulary floats: 155 MB for Qwen2.5 at 256, per stream).
        self.llama = Llama(model_path=str(lm.gguf_path), n_ctx=lm.n_ctx, n_batch=min(256, lm.n_ctx),
                           n_threads=lm.n_threads, n_threads_batch=lm.n_threads, logits_all=False, verbose=False)
        file_type = self.llama.metadata.get("general.file_type")
        check_no_amx_matmul(file_type, lm.gguf_path)
        overrides = {"cb_eval": eval_callback} if eval_callback is not None else {}
        if file_type == LLAMA_FTYPE_ALL_F32:
            # f32 weights are run as the exact reference: the KV cache keeps f32 too (llama.cpp's default is f16).
            overrides.update(type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)
        if overrides:
            rebuild_context(self.llama, overrides)
        self.max_positions = lm.n_ctx
        gguf_eos = SimpleNamespace(config=SimpleNamespace(eos_token_id=self.llama.token_eos()))
        self.stop_token_ids = frozenset(stop_token_ids(gguf_eos, lm.tokenizer))

    def reset(self) -> None:
        self._truncate(0)

    def _prefill(self, prompt_ids: list[int]) -> np.ndarray:
        cached = self.llama.input_ids[: self.llama.n_tokens].tolist()
        self._truncate(reusable_prefix(cached, prompt_ids))
        return self._decode(prompt_ids[self.llama.n_tokens:], every_row=False)[-1]

    def _evaluate(self, token_ids: list[int]) -> np.ndarray:
        return self._decode(token_ids, every_row=True)

    def _decode(self, token_ids: list[int], every_row: bool) -> np.ndarray:
        """Append `token_ids` to the context (in batches of at most n_batch) and return the logits of every row, or
        of the last row only, [rows, V]. This is `Llama.eval` with the logits request made per batch."""
        llama = self.llama
        if llama.n_tokens + len(token_ids) > self.lm.n_ctx:
            raise ValueError(f"prompt + output need {llama.n_tokens + len(token_ids)} positions but n_ctx is "
                             f"{self.lm.n_ctx}: raise n_ctx (or lower max_new_tokens)")
        llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)  # positions past n_tokens belong to a rolled-back draft
        rows = []
        for start in range(0, len(token_ids), llama.n_batch):
            batch = token_ids[start: start + llama.n_batch]
            last_batch = start + llama.n_batch >= len(token_ids)
            llama._batch.set_batch(batch=batch, n_past=llama.n_tokens, logits_all=every_row)  # last row always
            self._batch_starts(llama.n_tokens, len(batch))
            llama._ctx.decode(llama._batch)
            llama.input_ids[llama.n_tokens: llama.n_tokens + len(batch)] = batch
            llama.n_tokens += len(batch)
            if every_row or last_batch:
                count = len(batch) if every_row else 1
                logits = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(count, llama.n_vocab()))
                rows.append(np.array(logits, dtype=np.float32))  # copied: llama.cpp reuses the buffer
        return np.concatenate(rows)

    def _batch_starts(self, start: int, count: int) -> None:
        """Positions [start, start + count) are about to be computed (one llama.cpp graph: n_ubatch = n_batch)."""

    def _truncate(self, length: int) -> None:
        if length < self.llama.n_tokens:
            self.llama.n_tokens = length


def rebuild_context(llama, overrides: dict) -> None:
    """Rebuild `llama`'s context with some context parameters changed (`Llama` takes no eval callback, and llama.cpp
    reads the parameters only when a context is created). The old context (empty, just built) is freed first."""
    import contextlib

    from llama_cpp import _internals

    params = llama.context_params
    for name, value in overrides.items():
        setattr(params, name, value)
    llama._ctx.close()
    llama._ctx = llama._stack.enter_context(contextlib.closing(
        _internals.LlamaContext(model=llama._model, params=params, verbose=False)))
