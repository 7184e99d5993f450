"""SSBD re-translation: at every source update the whole target is translated again from a fresh prompt, with the
previous output as a self-speculative draft (`backends.speculative`); the display is revised by retracting an exact
suffix, with display-only mask-k. Drives the same `revise`/`finish_segment` interface as the AlignAtt translator,
so the speech cascade can run it on a live ASR transcript."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

from agents.core import StreamingTranslator
from agents.systems.llm import units_before_sentence_end
from agents.systems.ssbd_config import SSBDConfig
from backends.prompt import PromptBuilder
from backends.models import stream_tokenizer
from backends.speculative import SpeculativeOutput
from common.stream import Emission, SourceWord
from common.weights import WeightLoad
from policies.frontier import accessible_word_count
from policies.ssbd import SSBDStats, displayed_units, revision
from policies.units import REPLACEMENT_CHARACTER, split_units, target_unit_for

MAX_KEPT_UPDATES = 512  # diagnostics kept per stream: bounded, so a one-hour talk does not grow memory


@dataclass(frozen=True)
class Update:
    """One re-translation: the source it saw, the model's output tokens and what was displayed."""

    source_words: tuple[str, ...]
    output: SpeculativeOutput
    text: str
    displayed: tuple[str, ...]
    final: bool


def ssbd_model_load(config: SSBDConfig) -> WeightLoad:
    """The load of the shared, read-only model of `config.backend` (it has `.tokenizer`, `.decode(ids)` and
    `.session()`), with only the knobs that backend reads."""
    loader = _llama_cpp_ssbd_model if config.backend == "llama_cpp" else _transformers_ssbd_model
    return WeightLoad.taking(loader, config.model, **config.lm_options())


def load_ssbd_model(config: SSBDConfig):
    return ssbd_model_load(config).load()


def _llama_cpp_ssbd_model(model: str, n_ctx: int, n_threads: int, gguf_weights: str):
    from backends.llama_cpp import LlamaCppLM

    return LlamaCppLM.load(model, n_ctx=n_ctx, n_threads=n_threads, weight_type=gguf_weights)


def _transformers_ssbd_model(model: str, dtype: str, device: str) -> "TransformersSSBDModel":
    from backends.hf.lm import CausalLM

    return TransformersSSBDModel(CausalLM.load(model, dtype=dtype, device=device))


class TransformersSSBDModel:
    """A `CausalLM` seen through the SSBD model interface (sessions verify drafts in one batched forward)."""

    def __init__(self, lm):
        self.lm = lm
        self.tokenizer = lm.tokenizer

    def session(self):
        from backends.hf.speculative import HFSpeculativeSession

        return HFSpeculativeSession(self.lm)

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.lm.decode(token_ids)


class SSBDTranslator(StreamingTranslator):
    """Re-translation with self-speculative biased decoding; retracts (exact suffixes) as the translation changes."""

    append_only = False

    def __init__(self, model, config: SSBDConfig):
        super().__init__(target_unit_for(config.target_lang))
        self.model = model
        self.config = config
        self.tokenizer = stream_tokenizer(model.tokenizer)  # this stream's own: server threads share no tokenizer state
        self.prompts = PromptBuilder(self.tokenizer, config.source_lang, config.target_lang,
                                     config.instruction_position)
        self.session = model.session()
        self.stats = SSBDStats()
        self.updates: deque[Update] = deque(maxlen=MAX_KEPT_UPDATES)
        self.reset()

    @classmethod
    def from_config(cls, config: SSBDConfig, model=None) -> "SSBDTranslator":
        return cls(model or load_ssbd_model(config), config)

    def reset(self) -> None:
        super().reset()
        self.session.reset()
        self.stats = SSBDStats()
        self.updates.clear()
        self.source_words: list[SourceWord] = []  # of the current segment
        self.segment_start = 0  # index in emitted_units where the current segment's target begins
        self.translated_source: tuple[str, ...] = ()  # the source of the last update in this segment
        self.draft: list[int] = []  # the last output of this segment: the next update's draft

    @property
    def segment_units(self) -> list[str]:
        return self.emitted_units[self.segment_start:]

    # ---- the streaming contract ---------------------------------------------------------------------------------
    def feed(self, words: Sequence[SourceWord]) -> Emission:
        """Text input: re-translate once `step_words` new words have arrived since the last update."""
        self.source_words.extend(words)
        if len(self.source_words) - len(self.translated_source) < self.config.step_words:
            return Emission()
        return self._update(self.source_words, final=False)

    def revise(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Live input (a transcript whose tail may change): re-translate the accessible words if they changed."""
        self.source_words = list(words)
        accessible = len(self.source_words) if now is None else accessible_word_count(
            [w.end_time for w in self.source_words], now, hold_back)
        source = self.source_words[:accessible]
        if not source or tuple(w.text for w in source) == self.translated_source:
            return Emission()
        return self._update(source, final=False)

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        return self.finish_segment([*self.source_words, *words])

    def finish_segment(self, words: Sequence[SourceWord]) -> Emission:
        """The segment's source is complete: translate it in full, show everything, start a new segment."""
        words = list(words)
        emission = self._update(words, final=True) if words else self._emit(Emission(len(self.segment_units)))
        self.stats.final_units += len(self.segment_units)
        self.source_words = []
        self.translated_source = ()
        self.draft = []
        self.segment_start = len(self.emitted_units)
        return emission

    # ---- one re-translation -------------------------------------------------------------------------------------
    def _update(self, words: Sequence[SourceWord], final: bool) -> Emission:
        source = tuple(w.text for w in words)
        prompt = self.prompts.build(list(source))
        budget = self.config.final_max_new_tokens if final else self.config.max_new_tokens
        draft = self.draft if self.config.speculative else []
        output = self.session.generate(prompt.token_ids, draft, self.config.beta, budget)
        self.draft = output.tokens
        self.translated_source = source
        text = self.tokenizer.decode(list(output.tokens), skip_special_tokens=True).replace(REPLACEMENT_CHARACTER, "")
        shown = displayed_units(split_units(text, self.target_unit), self.config.mask_k, final)
        if not final and self.config.withhold_sentence_end:
            shown = list(units_before_sentence_end(tuple(shown), self.config.target_lang))
        retract, new = revision(self.segment_units, shown)
        self.stats.add_update(output.draft_length, output.accepted, len(output.tokens), output.generation_seconds,
                              output.prompt_seconds, retract, output.generation_cpu_seconds, output.prompt_cpu_seconds,
                              output.verification_cpu_seconds)
        self.updates.append(Update(source, output, text, tuple(shown), final))
        return self._emit(Emission(retract, tuple(new)))
