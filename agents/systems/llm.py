"""Simultaneous translation with a decoder-only LLM: re-prompt with the source so far and the committed target,
draft greedily, and let a policy decide how much of the draft to commit (AlignAtt, wait-k).

A stream is a sequence of segments (sentences): `flush`/`finish_segment` completes one, and the next starts with a
fresh prompt, so a long talk costs per step what its current sentence costs."""
from __future__ import annotations

from abc import abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from agents.core import Emission, SourceWord, StreamingTranslator
from agents.systems.config import AlignAttConfig, LLMTranslatorConfig, WaitkConfig
from backends.choice import load_lm
from backends.heads import HeadSet, default_heads, load_heads
from backends.hf.lm import CausalLM, Draft
from backends.hf.prompt import PromptBuilder, TranslationPrompt
from policies.alignatt import AlignAttParams, DraftScanner, ScanResult
from policies.frontier import accessible_word_count
from policies.transcript import ends_sentence
from policies.units import (
    REPLACEMENT_CHARACTER,
    committable_prefix_length,
    join_units,
    split_units,
    target_unit_for,
)
from policies.waitk import waitk_target_budget


MAX_KEPT_STEPS = 512  # diagnostics kept per stream: bounded, so a one-hour talk does not grow memory


@dataclass(frozen=True)
class Step:
    """What one policy call saw and decided (kept for diagnostics and tests)."""

    prompt: TranslationPrompt
    draft: Draft
    draft_text: str
    committed_text: str
    accessible_words: int
    scan: ScanResult | None = None


class LLMTranslator(StreamingTranslator):
    """Shared loop; subclasses decide how many draft tokens are acceptable (`_accepted_tokens`)."""

    def __init__(self, lm: CausalLM, config: LLMTranslatorConfig, heads: Sequence[tuple[int, int]] | None = None):
        super().__init__(target_unit_for(config.target_lang))
        self.lm = lm
        self.config = config
        self.prompts = PromptBuilder(lm.tokenizer, config.source_lang, config.target_lang)
        self.session = lm.session(heads)
        self.capture = heads is not None
        self.source_words: list[SourceWord] = []  # of the current segment
        self.segment_start = 0  # index in emitted_units where the current segment's target begins
        self.steps: deque[Step] = deque(maxlen=MAX_KEPT_STEPS)
        self._last_step_key: tuple | None = None

    def reset(self) -> None:
        super().reset()
        self.session.reset()
        self.source_words = []
        self.segment_start = 0
        self.steps.clear()
        self._last_step_key = None

    @property
    def segment_units(self) -> list[str]:
        """Target units emitted for the current segment."""
        return self.emitted_units[self.segment_start:]

    def feed(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Add words; `now` (seconds, the words' time base) makes only words ended by now - hold_back accessible."""
        return self.revise([*self.source_words, *words], now, hold_back)

    def revise(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Replace the current segment's source (a live ASR hypothesis may change its tail) and take one step."""
        self.source_words = list(words)
        if not self.source_words:
            return Emission()
        if now is None:
            accessible = len(self.source_words)
        else:
            accessible = accessible_word_count([w.end_time for w in self.source_words], now, hold_back)
        return self._emit(self._step(accessible, final=False))

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        return self.finish_segment([*self.source_words, *words])

    def finish_segment(self, words: Sequence[SourceWord]) -> Emission:
        """The current segment's source is complete and is `words`: emit the rest of its translation, then start a
        new segment."""
        self.source_words = list(words)
        emission = self._emit(self._step(len(self.source_words), final=True)) if self.source_words else Emission()
        self.source_words = []
        self.segment_start = len(self.emitted_units)
        self._last_step_key = None
        return emission

    def _step(self, accessible: int, final: bool) -> Emission:
        if not final and (accessible == 0 or not self._may_write()):
            return Emission()
        # Greedy drafting is deterministic: the same source, frontier and target prefix decide the same again.
        step_key = (tuple(w.text for w in self.source_words), accessible, len(self.emitted_units), final)
        if step_key == self._last_step_key:
            return Emission()
        self._last_step_key = step_key
        prompt = self.prompts.build([w.text for w in self.source_words], join_units(self.segment_units,
                                                                                      self.target_unit))
        budget = self.config.final_max_new_tokens if final else self.config.max_new_tokens
        scan = None
        if final:
            draft = self.session.draft(prompt.token_ids, budget, capture=False)
            # Byte fragments that never completed a character (U+FFFD) are dropped; everything else is final.
            draft_text = self.lm.decode(draft.tokens).replace(REPLACEMENT_CHARACTER, "")
            committed_length = committable_prefix_length(draft_text, "", self.target_unit)
        else:
            draft, accepted, scan = self._draft_and_accept(prompt, budget, accessible)
            draft_text = self.lm.decode(draft.tokens)
            committed_length = self._committable_length(draft, accepted)
        committed = draft_text[:committed_length]
        self.steps.append(Step(prompt, draft, draft_text, committed, accessible, scan))
        units = tuple(split_units(committed, self.target_unit))
        if not final and self.config.withhold_sentence_end:
            units = units_before_sentence_end(units)
        return Emission(new_units=self._limit(units, final))

    def _committable_length(self, draft: Draft, accepted: int) -> int:
        """Round the accepted token prefix back to the last complete stability unit."""
        accepted_text = self.lm.decode(draft.tokens[:accepted])
        if accepted == len(draft.tokens):
            next_char = "" if draft.finished else None
        else:
            next_char = self.lm.decode(draft.tokens[: accepted + 1])[len(accepted_text):][:1] or None
        return committable_prefix_length(accepted_text, next_char, self.target_unit)

    def _may_write(self) -> bool:
        """Whether a draft is worth computing now (the wait-k schedule may forbid writing)."""
        return True

    def _limit(self, units: tuple[str, ...], final: bool) -> tuple[str, ...]:
        """Cap the committed units (the wait-k schedule does); by default keep all."""
        return units

    @abstractmethod
    def _draft_and_accept(self, prompt: TranslationPrompt, budget: int, accessible: int
                          ) -> tuple[Draft, int, ScanResult | None]:
        """Draft from `prompt` and say how many leading draft tokens the policy accepts."""


class AlignAttTranslator(LLMTranslator):
    """AlignAtt for decoder-only LLMs: accept the longest draft prefix whose replayed attention stays on
    accessible source (paper §4)."""

    def __init__(self, lm: CausalLM, config: AlignAttConfig, heads: HeadSet, stop_at_first_failure: bool = True):
        super().__init__(lm, config, heads.heads)
        self.head_set = heads
        # Scanning while drafting and stopping at the first rejected token gives the same decisions as drafting
        # the whole budget and scanning afterwards (the z-scores use earlier rows only), with fewer decode steps.
        self.stop_at_first_failure = stop_at_first_failure
        self.params = AlignAttParams(
            border=config.border,
            argmax_mass_threshold=config.argmax_mass_threshold,
            source_mass_threshold=config.source_mass_threshold,
            median_width=config.median_width,
        )

    @classmethod
    def from_config(cls, config: AlignAttConfig, lm: CausalLM | None = None) -> "AlignAttTranslator":
        heads = resolve_heads(config)  # first: a bad head file fails in milliseconds, not after loading the model
        lm = lm or load_lm(config.backend, config.model, capture_heads=heads.heads, **config.lm_options())
        return cls(lm, config, heads)

    def _draft_and_accept(self, prompt, budget, accessible):
        scanner = DraftScanner(prompt.source_token_word, accessible, self.params)

        def scan_next(draft: Draft) -> bool:
            """Push the first unscanned row; True once a token is rejected."""
            index = len(scanner.decisions)
            row = draft.source_attention(prompt.source_positions, index, index + 1)[0].numpy()
            return scanner.push(row).failure is not None

        draft = self.session.draft(prompt.token_ids, budget, stop=scan_next if self.stop_at_first_failure else None)
        while not scanner.failed and len(scanner.decisions) < len(draft.tokens):
            scan_next(draft)
        return draft, scanner.accepted_tokens, scanner.result()


class WaitkTranslator(LLMTranslator):
    """The wait-k baseline on the same backend: after k source words, one target unit per source word."""

    def __init__(self, lm: CausalLM, config: WaitkConfig):
        super().__init__(lm, config, heads=None)

    @classmethod
    def from_config(cls, config: WaitkConfig, lm: CausalLM | None = None) -> "WaitkTranslator":
        return cls(lm or load_lm(config.backend, config.model, **config.lm_options()), config)

    def _draft_and_accept(self, prompt, budget, accessible):
        draft = self.session.draft(prompt.token_ids, budget, capture=False)
        return draft, len(draft.tokens), None

    def _may_write(self):
        return waitk_target_budget(len(self.source_words), self.config.k, False) > len(self.segment_units)

    def _limit(self, units, final):
        budget = waitk_target_budget(len(self.source_words), self.config.k, source_finished=final)
        if budget is None:
            return units
        return units[: max(0, budget - len(self.segment_units))]


def units_before_sentence_end(units: tuple[str, ...]) -> tuple[str, ...]:
    """The units before the first one that closes a sentence: an unfinished source segment must not get a finished
    translation (the model would consider it done and never translate the rest)."""
    for index, unit in enumerate(units):
        if ends_sentence(unit):
            return units[:index]
    return units


def resolve_heads(config: AlignAttConfig) -> HeadSet:
    if config.heads:
        return load_heads(config.heads, config.top_k_heads)
    return default_heads(config.model, config.source_lang, config.target_lang, config.top_k_heads)
