"""Text simultaneous translation with a decoder-only LLM: re-prompt with the source so far and the committed
target, draft greedily, and let a policy decide how much of the draft to commit (AlignAtt, wait-k)."""
from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import Sequence

from agents.core import Emission, SourceWord, StreamingTranslator
from agents.systems.config import AlignAttConfig, LLMTranslatorConfig, WaitkConfig
from backends.heads import HeadSet, default_heads, load_heads
from backends.hf.lm import CausalLM, Draft
from backends.hf.prompt import PromptBuilder, TranslationPrompt
from policies.alignatt import AlignAttParams, DraftScanner, ScanResult
from policies.frontier import accessible_word_count
from policies.units import REPLACEMENT_CHARACTER, committable_prefix_length, split_units, target_unit_for
from policies.waitk import waitk_target_budget


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
        self.source_words: list[SourceWord] = []
        self.steps: list[Step] = []

    def reset(self) -> None:
        super().reset()
        self.session.reset()
        self.source_words = []
        self.steps = []

    def feed(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Add words; `now` (seconds, the words' time base) makes only words ended by now - hold_back accessible."""
        self.source_words.extend(words)
        if not self.source_words:
            return Emission()
        if now is None:
            accessible = len(self.source_words)
        else:
            accessible = accessible_word_count([w.end_time for w in self.source_words], now, hold_back)
        return self._emit(self._step(accessible, final=False))

    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        self.source_words.extend(words)
        if not self.source_words:
            return Emission()
        return self._emit(self._step(len(self.source_words), final=True))

    def _step(self, accessible: int, final: bool) -> Emission:
        if not final and not self._may_write():
            return Emission()
        prompt = self.prompts.build([w.text for w in self.source_words], self.target_text)
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
        return Emission(new_units=self._limit(tuple(split_units(committed, self.target_unit)), final))

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
        lm = lm or CausalLM.load(config.model, dtype=config.model_dtype, device=config.model_device)
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
        return cls(lm or CausalLM.load(config.model, dtype=config.model_dtype, device=config.model_device), config)

    def _draft_and_accept(self, prompt, budget, accessible):
        draft = self.session.draft(prompt.token_ids, budget, capture=False)
        return draft, len(draft.tokens), None

    def _may_write(self):
        return waitk_target_budget(len(self.source_words), self.config.k, False) > len(self.emitted_units)

    def _limit(self, units, final):
        budget = waitk_target_budget(len(self.source_words), self.config.k, source_finished=final)
        if budget is None:
            return units
        return units[: max(0, budget - len(self.emitted_units))]


def resolve_heads(config: AlignAttConfig) -> HeadSet:
    if config.heads:
        return load_heads(config.heads, config.top_k_heads)
    return default_heads(config.model, config.source_lang, config.target_lang, config.top_k_heads)
