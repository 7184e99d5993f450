"""Qwen3-ASR speech recogniser with word times from Qwen3-ForcedAligner, on transformers' own `qwen3_asr` models:
the ASR model transcribes with the language forced, the aligner times the transcript, the times go onto its words."""
from __future__ import annotations

import difflib
import json
import math
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType

import numpy as np
import torch

from backends.asr.base import SAMPLE_RATE, RecognizerError, SpeechRecognizer, new_tokens_after_prefix
from backends.models import DTYPES, torch_dtype_of
from backends.sources import local_snapshot
from common.stream import TimedWord

# ISO 639 code -> the language name Qwen3-ASR was trained with; the prompt forces it as "language <NAME><asr_text>".
ASR_LANGUAGES = MappingProxyType({
    "ar": "Arabic", "yue": "Cantonese", "zh": "Chinese", "cs": "Czech", "da": "Danish", "nl": "Dutch",
    "en": "English", "fil": "Filipino", "fi": "Finnish", "fr": "French", "de": "German", "el": "Greek",
    "hi": "Hindi", "hu": "Hungarian", "id": "Indonesian", "it": "Italian", "ja": "Japanese", "ko": "Korean",
    "mk": "Macedonian", "ms": "Malay", "fa": "Persian", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian",
    "ru": "Russian", "es": "Spanish", "sv": "Swedish", "th": "Thai", "tr": "Turkish", "vi": "Vietnamese",
})
# The languages Qwen3-ForcedAligner was trained on. The others are aligned too, with the aligner's default word split
# (whitespace words, CJK characters one by one): its input is then exactly what a trained language would give, but
# its times are less tested.
ALIGNER_LANGUAGES = frozenset({
    "Chinese", "English", "Cantonese", "French", "German", "Italian", "Japanese", "Korean", "Portuguese", "Russian",
    "Spanish",
})

ASR_ARCHITECTURE = "Qwen3ASRForConditionalGeneration"
ALIGNER_ARCHITECTURE = "Qwen3ASRForTokenClassification"
EXAMPLE_MODEL = "Qwen/Qwen3-ASR-1.7B-hf"
EXAMPLE_ALIGNER = "Qwen/Qwen3-ForcedAligner-0.6B-hf"

SILENCE_PEAK = 1e-4  # audio whose samples all stay below this (-80 dBFS) is digital silence: no words, no model call
# Generation budget: generous for any speech rate (~5 tokens/s in English), short enough to stop a repetition loop.
BASE_NEW_TOKENS = 32
NEW_TOKENS_PER_SECOND = 20
MAX_NEW_TOKENS = 512
# A compiled recogniser's static cache: the prompt of 30 s of audio (about 41 + 13 tokens per second: 431) plus the
# largest budget.
COMPILED_CACHE_TOKENS = 1024


class Qwen3Recognizer(SpeechRecognizer):
    """Qwen3-ASR plus Qwen3-ForcedAligner. Holds only weights and processors; a lock serialises the processors'
    tokenizers (fast tokenizers must not be called from two threads at once), the models run unlocked. `compiled`
    decodes into one static cache with a compiled step (`CompiledDecoder`: same tokens, no per-token launch overhead
    on a GPU; calls are then serialised), compiled here on a second of noise so no stream waits for it."""

    def __init__(self, asr_model, asr_processor, aligner_model, aligner_processor, compiled: bool = False):
        self.asr_model = asr_model
        self.asr_processor = asr_processor
        self.aligner_model = aligner_model
        self.aligner_processor = aligner_processor
        self._tokenizer_lock = threading.Lock()
        self._compiled = None
        if compiled:
            from backends.asr.compiled_decode import CompiledDecoder

            self._compiled = CompiledDecoder(asr_model, COMPILED_CACHE_TOKENS)
            noise = np.random.default_rng(0).normal(0.0, 0.01, SAMPLE_RATE).astype(np.float32)
            self._recognise(noise, "English", exact_new_tokens=2)

    @classmethod
    def load(cls, model: str, aligner: str, *, device: str = "cpu", dtype: str = "float32",
             compiled: bool = False) -> Qwen3Recognizer:
        """Load the ASR checkpoint `model` and the forced-aligner checkpoint `aligner`: local directories (as written
        by save_pretrained) or Hugging Face repo ids already in the local cache. Nothing is downloaded."""
        from transformers import Qwen3ASRForConditionalGeneration, Qwen3ASRForTokenClassification

        torch_dtype = _torch_dtype(dtype)
        device = _checked_device(device)
        asr_dir = _checkpoint_dir(model, "ASR model", ASR_ARCHITECTURE, EXAMPLE_MODEL)
        aligner_dir = _checkpoint_dir(aligner, "forced aligner", ALIGNER_ARCHITECTURE, EXAMPLE_ALIGNER)
        return cls(
            _load_model(Qwen3ASRForConditionalGeneration, asr_dir, "ASR model", torch_dtype, device),
            _load_processor(asr_dir, "ASR model"),
            _load_model(Qwen3ASRForTokenClassification, aligner_dir, "forced aligner", torch_dtype, device),
            _load_processor(aligner_dir, "forced aligner"),
            compiled=compiled,
        )

    forces_prefix = True

    def transcribe(self, audio: np.ndarray, language: str, context: str = "", prefix: str = "") -> list[TimedWord]:
        """See `SpeechRecognizer.transcribe`. `context` is not used: the audio alone is transcribed. `prefix` is
        forced after the prompt's "language <NAME><asr_text>" (how Qwen3-ASR's own streaming mode continues its
        previous output); the aligner times the whole transcript."""
        language_name = asr_language_name(language)
        samples = _mono_samples(audio)
        if samples.size == 0 or float(np.max(np.abs(samples))) < SILENCE_PEAK:
            return []
        transcript = self._recognise(samples, language_name, prefix=prefix.strip())
        words = transcript.split()
        if not words:
            return []
        aligned = self._align(samples, transcript, language_name)
        return attach_times(words, aligned, duration=samples.size / SAMPLE_RATE)

    def _recognise(self, samples: np.ndarray, language_name: str, exact_new_tokens: int | None = None,
                   prefix: str = "") -> str:
        """The transcript of `samples` (greedy), in `language_name`: `prefix` (forced) and the tokens decoded after
        it. `exact_new_tokens` decodes exactly that many tokens, end-of-sequence suppressed before
        (benchmarks/trained_lengths.py: random weights doing a trained model's work)."""
        with self._tokenizer_lock:
            if prefix:
                # The processor's own prompt as text (the audio placeholders unexpanded), the prefix after it, then
                # the processor's call on both: what `apply_transcription_request` does, with the prefix added.
                prompt = self.asr_processor.apply_transcription_request(
                    audio=samples, language=language_name, tokenize=False)[0]
                inputs = self.asr_processor(text=[prompt + prefix], audio=[samples], return_tensors="pt")
                forced_tokens = len(self.asr_processor.tokenizer(prefix, add_special_tokens=False)["input_ids"])
            else:
                forced_tokens = 0
                inputs = self.asr_processor.apply_transcription_request(audio=samples, language=language_name)
        inputs = inputs.to(self.asr_model.device, self.asr_model.dtype)
        prompt_length = inputs["input_ids"].shape[1]
        budget = {"max_new_tokens": new_tokens_after_prefix(max_new_tokens_for(samples.size), forced_tokens)} \
            if exact_new_tokens is None else {
            "min_new_tokens": exact_new_tokens, "max_new_tokens": exact_new_tokens}
        generate = self.asr_model.generate
        if self._compiled is not None and self._compiled.fits(prompt_length, budget["max_new_tokens"]):
            generate = self._compiled.generate
        with torch.inference_mode():
            output = generate(**inputs, do_sample=False, num_beams=1, **budget)
        with self._tokenizer_lock:
            # What `decode(..., return_format="transcription_only")` does, on the prefix and the decoded tokens
            # together (so its strip and repetition fix see the whole transcript).
            decoded = self.asr_processor.decode(output[:, prompt_length:], skip_special_tokens=True)[0]
            return self.asr_processor.extract_transcription([prefix + decoded])[0]

    def _align(self, samples: np.ndarray, transcript: str, language_name: str) -> list[tuple[str, float, float]]:
        """The aligner's words of `transcript` (punctuation removed, CJK one character each) with start and end
        times in seconds."""
        aligner_language = language_name if language_name in ALIGNER_LANGUAGES else None
        try:
            with self._tokenizer_lock:
                inputs, word_lists = self.aligner_processor.prepare_forced_aligner_inputs(
                    audio=samples, transcript=transcript, language=aligner_language
                )
        except ImportError as err:  # Japanese needs nagisa, Korean soynlp, to split words
            raise RecognizerError(f"cannot align {language_name} words: {err}") from None
        if not word_lists[0]:
            return []
        inputs = inputs.to(self.aligner_model.device, self.aligner_model.dtype)
        with torch.inference_mode():
            logits = self.aligner_model(**inputs).logits
        timed = self.aligner_processor.decode_forced_alignment(
            logits, inputs["input_ids"], word_lists, timestamp_token_id=self.aligner_model.config.timestamp_token_id
        )[0]
        return [(item["text"], item["start_time"], item["end_time"]) for item in timed]


def asr_language_name(code: str) -> str:
    """The Qwen3-ASR language name of an ISO 639 code ("en", "zh-CN" -> "English", "Chinese")."""
    primary = code.strip().replace("_", "-").split("-")[0].lower() if isinstance(code, str) else ""
    if primary not in ASR_LANGUAGES:
        raise RecognizerError(
            f"Qwen3-ASR does not support language {code!r}; use one of {', '.join(sorted(ASR_LANGUAGES))} "
            f"(word times are best in {', '.join(_aligner_codes())})"
        )
    return ASR_LANGUAGES[primary]


def max_new_tokens_for(num_samples: int) -> int:
    """The generation budget for `num_samples` of audio."""
    seconds = num_samples / SAMPLE_RATE
    return min(MAX_NEW_TOKENS, BASE_NEW_TOKENS + math.ceil(NEW_TOKENS_PER_SECOND * seconds))


# --- mapping aligner words onto transcript words ---------------------------------------------------------------------


def attach_times(
    transcript_words: Sequence[str], aligned_words: Sequence[tuple[str, float, float]], duration: float | None = None
) -> list[TimedWord]:
    """Give each transcript word (as written, punctuation kept) the times of the aligner words that spell it.

    Both sides are compared by their letters and digits only (NFKC, case-folded), character by character with
    difflib, so splits and merges do not matter: "e.g." matches "eg", "3.5" matches "35" or "3" + "5", "well-known"
    matches "wellknown", a CJK word matches its characters. Each character takes an equal share of its aligner word's
    span, and a transcript word spans its matched characters. Words with no matched character (punctuation only,
    symbols, text the aligner dropped) get times interpolated between their timed neighbours. Finally the times are
    clipped to [0, duration] and made non-decreasing, each word starting no earlier than the previous one ends.
    """
    spans = _matched_spans(transcript_words, aligned_words)
    filled = _interpolate_missing(spans, duration)
    return _ordered_words(transcript_words, filled, duration)


def _letters_and_digits(text: str) -> str:
    """`text` as compared across transcript and aligner: NFKC, case-folded, letters and digits only."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return "".join(char for char in folded if unicodedata.category(char)[0] in "LN")


def _aligned_characters(aligned_words: Sequence[tuple[str, float, float]]) -> tuple[str, list[tuple[float, float]]]:
    """The aligner's compared characters in order, each with its equal share of its word's span."""
    characters: list[str] = []
    spans: list[tuple[float, float]] = []
    for text, start, end in aligned_words:
        letters = _letters_and_digits(text)
        end = max(end, start)
        step = (end - start) / len(letters) if letters else 0.0
        for index, char in enumerate(letters):
            characters.append(char)
            spans.append((start + index * step, start + (index + 1) * step))
    return "".join(characters), spans


def _matched_spans(
    transcript_words: Sequence[str], aligned_words: Sequence[tuple[str, float, float]]
) -> list[tuple[float, float] | None]:
    """Per transcript word, the span of the aligner characters matched to its characters (None if none matched)."""
    owners = [index for index, word in enumerate(transcript_words) for _ in _letters_and_digits(word)]
    transcript_chars = "".join(_letters_and_digits(word) for word in transcript_words)
    aligned_chars, char_spans = _aligned_characters(aligned_words)
    spans: list[tuple[float, float] | None] = [None] * len(transcript_words)
    matcher = difflib.SequenceMatcher(None, transcript_chars, aligned_chars, autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            owner = owners[block.a + offset]
            start, end = char_spans[block.b + offset]
            known = spans[owner]
            spans[owner] = (start, end) if known is None else (min(known[0], start), max(known[1], end))
    return spans


def _interpolate_missing(
    spans: list[tuple[float, float] | None], duration: float | None
) -> list[tuple[float, float]]:
    """Fill the words without a span: between two timed words, the gap from the earlier one's end to the later one's
    start is shared out evenly; before the first timed word they sit at its start, after the last one at its end.
    With no timed word at all, the words share [0, duration] evenly."""
    timed = [index for index, span in enumerate(spans) if span is not None]
    if not timed:
        total = duration or 0.0
        count = len(spans)
        return [(total * index / count, total * (index + 1) / count) for index in range(count)]
    filled = list(spans)
    first_start, last_end = spans[timed[0]][0], spans[timed[-1]][1]
    for index in range(timed[0]):
        filled[index] = (first_start, first_start)
    for index in range(timed[-1] + 1, len(spans)):
        filled[index] = (last_end, last_end)
    for left, right in zip(timed, timed[1:]):
        missing = right - left - 1
        if missing:
            gap_start = spans[left][1]
            step = max(0.0, spans[right][0] - gap_start) / missing
            for offset in range(missing):
                filled[left + 1 + offset] = (gap_start + offset * step, gap_start + (offset + 1) * step)
    return filled


def _ordered_words(
    words: Sequence[str], spans: Sequence[tuple[float, float]], duration: float | None
) -> list[TimedWord]:
    """The timed words, clipped to [0, duration], each starting no earlier than the previous one ends."""
    upper = math.inf if duration is None else max(0.0, duration)
    timed: list[TimedWord] = []
    previous_end = 0.0
    for word, (start, end) in zip(words, spans):
        start = max(min(max(start, 0.0), upper), previous_end)
        end = max(min(end, upper), start)
        timed.append(TimedWord(word, float(start), float(end)))
        previous_end = end
    return timed


# --- loading ---------------------------------------------------------------------------------------------------------


def _torch_dtype(dtype: str) -> torch.dtype:
    if dtype not in DTYPES:
        raise RecognizerError(f"unknown dtype {dtype!r} for Qwen3-ASR; use one of {', '.join(DTYPES)}")
    return torch_dtype_of(dtype)


def _checked_device(device: str) -> str:
    if not isinstance(device, str) or device.split(":")[0] not in ("cpu", "cuda"):
        raise RecognizerError(f"unknown device {device!r} for Qwen3-ASR; use 'cpu' or 'cuda'")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RecognizerError(f"device {device!r} asked for, but torch sees no CUDA GPU; use device 'cpu'")
    return device


def _checkpoint_dir(name: str, role: str, architecture: str, example: str) -> Path:
    """The checkpoint directory of `name`, checked to hold a converted transformers `qwen3_asr` `architecture`."""
    directory = _resolve_local(name, role, example)
    config = _read_config(directory, role)
    if "thinker_config" in config:
        raise RecognizerError(
            f"the {role} at {directory} is in the original Qwen release layout (thinker_config), which transformers' "
            f"qwen3_asr cannot read; use the converted checkpoint ({example}) or convert this one with transformers' "
            "models/qwen3_asr/convert_qwen3_asr_to_hf.py"
        )
    if config.get("model_type") != "qwen3_asr":
        raise RecognizerError(
            f"the {role} at {directory} is a {config.get('model_type')!r} checkpoint, not Qwen3-ASR (qwen3_asr); "
            f"pass a Qwen3-ASR checkpoint such as {example}"
        )
    architectures = config.get("architectures") or [architecture]
    if architecture not in architectures:
        raise RecognizerError(
            f"the {role} at {directory} is a {', '.join(architectures)}, not a {architecture}: were the ASR model "
            f"({EXAMPLE_MODEL}) and the forced aligner ({EXAMPLE_ALIGNER}) swapped?"
        )
    return directory


def _resolve_local(name: str, role: str, example: str) -> Path:
    """A local directory as given, or the snapshot of a Hugging Face repo id already in the local cache."""
    if not isinstance(name, str) or not name.strip():
        raise RecognizerError(
            f"no {role} given: pass a checkpoint directory or a Hugging Face repo id in the local cache, e.g. {example}"
        )
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if path.exists():
        raise RecognizerError(f"the {role} {name!r} is a file; pass its checkpoint directory (with config.json)")
    snapshot = local_snapshot(name)
    if snapshot is None:  # not a cached repo, or not a repo id at all
        raise RecognizerError(
            f"the {role} {name!r} is neither a directory nor a Hugging Face repo in the local cache (nothing is "
            f"downloaded at run time): fetch it once with `hf download {example}` and pass the repo id, or pass the "
            "directory written by save_pretrained"
        )
    return snapshot


def _read_config(directory: Path, role: str) -> dict:
    config_path = directory / "config.json"
    try:
        return json.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RecognizerError(
            f"the {role} directory {directory} has no config.json: it is not a Hugging Face checkpoint"
        ) from None
    except (OSError, ValueError) as err:
        raise RecognizerError(f"cannot read {config_path}: {_one_line(err)}") from None


def _load_model(model_class, directory: Path, role: str, dtype: torch.dtype, device: str):
    """The model from `directory` on `device` in eval mode; every weight must come from the checkpoint."""
    try:
        model, info = model_class.from_pretrained(directory, dtype=dtype, output_loading_info=True)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError) as err:
        raise RecognizerError(f"cannot load the {role} from {directory}: {_one_line(err)}") from None
    missing = info.get("missing_keys") or []
    if missing:
        raise RecognizerError(
            f"the {role} at {directory} lacks {len(missing)} weights (e.g. {sorted(missing)[0]}): the checkpoint is "
            "incomplete or of another model; download it again"
        )
    return model.to(device).eval()


def _load_processor(directory: Path, role: str):
    from transformers import Qwen3ASRProcessor

    try:
        processor = Qwen3ASRProcessor.from_pretrained(directory)
    except (OSError, ValueError, RuntimeError, KeyError, TypeError, AttributeError) as err:
        raise RecognizerError(
            f"cannot load the {role}'s processor (tokenizer, feature extractor) from {directory}: {_one_line(err)}"
        ) from None
    if not processor.chat_template:
        raise RecognizerError(f"the {role} at {directory} has no chat template; use a converted -hf checkpoint")
    return processor


def _mono_samples(audio: np.ndarray) -> np.ndarray:
    samples = np.asarray(audio, dtype=np.float32)
    if samples.ndim != 1:
        raise RecognizerError(f"audio must be 1-D mono samples at {SAMPLE_RATE} Hz, got shape {samples.shape}")
    return samples


def _aligner_codes() -> list[str]:
    return sorted(code for code, name in ASR_LANGUAGES.items() if name in ALIGNER_LANGUAGES)


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}"
