"""Simultaneous translation with a decoder-only LLM: re-prompt with the source so far and the committed target,
draft greedily, and let a policy decide how much of the draft to commit (AlignAtt, wait-k).

A stream is a sequence of segments (sentences): `flush`/`finish_segment` completes one, and the next starts with a
fresh prompt, so a long talk costs per step what its current sentence costs."""
from __future__ import annotations

import dataclasses
import json
from abc import abstractmethod
from collections import Counter, deque
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from common.stream import Emission, SourceWord
from agents.core import StreamingTranslator
from agents.systems.config import DRAFT_RULES, KNOB_RULES, AlignAttConfig, LLMTranslatorConfig, LocalAgreementConfig, WaitkConfig
from backends.choice import load_lm
from backends.heads import HeadSet, default_heads, load_heads
from backends.draft import Draft
from backends.hf.prompt import PromptBuilder, PromptError, TranslationPrompt
from backends.models import stream_tokenizer
from policies.alignatt import AlignAttParams, DraftScanner, ScanResult
from policies.degenerate import (
    DEGENERATE_CUTS,
    LINE_BREAK,
    Decision,
    DraftGuard,
    final_budget,
)
from policies.frontier import accessible_word_count
from policies.local_agreement import agreed_prefix
from policies.transcript import ends_sentence
from policies.units import (
    REPLACEMENT_CHARACTER,
    committable_prefix_length,
    continues_last_unit,
    join_units,
    split_units,
    target_unit_for,
)
from policies.waitk import default_units_per_word, waitk_target_budget

if TYPE_CHECKING:  # any runtime's LM: backends.hf.lm, backends.llama_cpp.lm, backends.vllm.lm
    from backends.hf.lm import CausalLM


MAX_KEPT_STEPS = 512  # diagnostics kept per stream: bounded, so a one-hour talk does not grow memory


@dataclass(frozen=True)
class Step:
    """What one policy call saw and decided (kept for diagnostics and tests).

    cut: the rule of `policies.degenerate.DraftGuard` that ended the draft ("" where none did): a line break (the
    translation's line ended) or a degenerate cut (a loop, a foreign script).
    retry: a final draft made again after the previous one was cut (a copy, a loop: `LLMTranslator._step`).
    copied: the draft's usable text copies the source from some unit on (`DraftGuard.copy_length`): a live step
    commits nothing from there, a final one is made again from there. A live draft that opens the segment in the
    source language (`policies.degenerate.opens_in_source_language`) counts as copied from its start.
    floor_tokens: draft tokens a live step accepted past the gate's first rejected one because the wait-k floor
    (`waitk_floor`) asked for them (0 where the gate allowed as much, or there is no gate).
    """

    prompt: TranslationPrompt | None
    draft: Draft | None
    draft_text: str
    committed_text: str
    accessible_words: int
    scan: ScanResult | None = None
    final: bool = False
    cut: str = ""
    skipped: str = ""  # why no draft was made (a source the prompt cannot map), else empty
    retry: bool = False
    copied: bool = False
    floor_tokens: int = 0

    @property
    def degenerate(self) -> bool:
        """Whether the draft stopped being a translation (a cut other than the end of its line)."""
        return self.cut in DEGENERATE_CUTS

    @property
    def gate_fired(self) -> bool:
        """Whether the AlignAtt gate rejected a draft token at this step (the draft was not accepted whole)."""
        return self.scan is not None and self.scan.accepted_tokens < len(self.scan.decisions)

    @property
    def gate_failure(self) -> str | None:
        """The gate rule that rejected a draft token at this step (`policies.alignatt.FailureReason`), or None."""
        return self.scan.decisions[-1].failure if self.gate_fired else None

    @property
    def gate_stopped_tokens(self) -> int:
        """Draft tokens the gate withheld: from the first rejected one to the end of the draft."""
        if self.scan is None or self.draft is None:
            return 0
        return len(self.draft.tokens) - self.scan.accepted_tokens if self.gate_fired else 0


@dataclass
class PolicyStats:
    """Counts over a stream's steps: how often the policy held back part of a draft.

    gate_fired: steps where the AlignAtt gate rejected a token, split by the rule that did in gate_source_frontier
    (the attention peak), gate_argmax_mass_weak (tau_argmax), gate_provenance_weak (tau_src) and gate_nonfinite;
    gate_stopped_tokens: draft tokens withheld by it;
    degenerate: drafts cut by the DraftGuard because they stopped being a translation; line_breaks: drafts that
    ended their line (the guard cuts them there too, but that is how a one-line translation ends); skipped: steps
    whose source could not be mapped; final_retries: final drafts made again after a cut (counted apart from
    final_steps), final_retries_degenerate: those cut as degenerate; copied, final_copied
    and final_retries_copied: live drafts, final drafts and retries that copied the source (a final draft keeps its
    copy where every retry copies too); floor_steps and floor_tokens: live steps where the wait-k floor committed
    past where the gate stopped, and the draft tokens it accepted there.
    """

    live_steps: int = 0
    draft_tokens: int = 0
    gate_fired: int = 0
    gate_source_frontier: int = 0
    gate_argmax_mass_weak: int = 0
    gate_provenance_weak: int = 0
    gate_nonfinite: int = 0
    gate_stopped_tokens: int = 0
    degenerate: int = 0
    line_breaks: int = 0
    final_steps: int = 0
    final_degenerate: int = 0
    final_line_breaks: int = 0
    final_retries: int = 0
    final_retries_degenerate: int = 0
    copied: int = 0
    final_copied: int = 0
    final_retries_copied: int = 0
    floor_steps: int = 0
    floor_tokens: int = 0
    skipped: int = 0

    def add(self, step: "Step") -> None:
        if step.skipped:
            self.skipped += 1
            return
        if step.retry:
            self.final_retries += 1
            self.final_retries_degenerate += step.degenerate
            self.final_retries_copied += step.copied
            return
        if step.final:
            self.final_steps += 1
            self.final_degenerate += step.degenerate
            self.final_copied += step.copied
            self.final_line_breaks += step.cut == LINE_BREAK
            return
        self.live_steps += 1
        self.draft_tokens += len(step.draft.tokens)
        self.gate_fired += step.gate_fired
        if step.gate_fired:
            name = f"gate_{step.gate_failure}"
            setattr(self, name, getattr(self, name) + 1)
        self.gate_stopped_tokens += step.gate_stopped_tokens
        self.floor_steps += step.floor_tokens > 0
        self.floor_tokens += step.floor_tokens
        self.degenerate += step.degenerate
        self.line_breaks += step.cut == LINE_BREAK
        self.copied += step.copied


class LLMTranslator(StreamingTranslator):
    """Shared loop; subclasses decide how many draft tokens are acceptable (`_accepted_tokens`)."""

    def __init__(self, lm: CausalLM, config: LLMTranslatorConfig, heads: Sequence[tuple[int, int]] | None = None):
        super().__init__(target_unit_for(config.target_lang))
        self.lm = lm
        if config.rule_off in KNOB_RULES:  # a rule measured off that is a knob already: that knob's off value
            name, off = KNOB_RULES[config.rule_off]
            config = dataclasses.replace(config, **{name: off}) if hasattr(config, name) else config
        self.config = config
        self.rules_off = frozenset({config.rule_off}) - {"", "none"}
        self.tokenizer = stream_tokenizer(lm.tokenizer)  # this stream's own: server threads share no tokenizer state
        self.decodes_leading_space = decodes_leading_space(self.tokenizer)
        self.prompts = PromptBuilder(self.tokenizer, config.source_lang, config.target_lang,
                                     config.instruction_position)
        self.fired: Counter = Counter()  # per draft rule, the times it found something (measurement)
        self._logged_fired: Counter = Counter()
        self.guard = DraftGuard(self.target_unit, config.target_lang, config.copy_guard_words, config.source_lang,
                                config.language_turn_words, self.rules_off)
        self.session = lm.session(heads)
        self.capture = heads is not None
        self.source_words: list[SourceWord] = []  # of the current segment
        self.segment_start = 0  # index in emitted_units where the current segment's target begins
        self.steps: deque[Step] = deque(maxlen=MAX_KEPT_STEPS)
        self.stats = PolicyStats()  # this stream's, since reset
        self._logged_stats = PolicyStats()  # the part of `stats` already written to policy_log
        self._last_step_key: tuple | None = None

    def reset(self) -> None:
        super().reset()
        self.session.reset()
        self.source_words = []
        self.segment_start = 0
        self.steps.clear()
        self.stats = PolicyStats()
        self._logged_stats = PolicyStats()
        self.fired.clear()
        self._logged_fired = Counter()
        self._last_step_key = None

    def _record(self, step: Step) -> None:
        self.steps.append(step)
        self.stats.add(step)

    @property
    def segment_units(self) -> list[str]:
        """Target units emitted for the current segment."""
        return self.emitted_units[self.segment_start:]

    def feed(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Add words; `now` (seconds, the words' time base) makes only words ended by now - hold_back accessible."""
        return self.revise([*self.source_words, *words], now, hold_back)

    def revise(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """Replace the current segment's source (a live ASR hypothesis may change its tail) and take one step."""
        self.source_words = prompt_words(words)
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
        self.source_words = prompt_words(words)
        emission = self._emit(self._step(len(self.source_words), final=True)) if self.source_words else Emission()
        self.source_words = []
        self.segment_start = len(self.emitted_units)
        self._last_step_key = None
        self._write_policy_log()
        return emission

    def _write_policy_log(self) -> None:
        """Append the statistics since the last line to `policy_log` (one JSON line per finished segment), so an
        evaluation can say how often the gate fired. `stats` keeps counting for the whole stream."""
        if self.config.policy_log:
            now, before = asdict(self.stats), asdict(self._logged_stats)
            fired = {f"fired_{rule}": self.fired[rule] - self._logged_fired[rule] for rule in DRAFT_RULES}
            with open(self.config.policy_log, "a", encoding="utf-8") as log:
                log.write(json.dumps({**{name: now[name] - before[name] for name in now}, **fired}) + "\n")
            self._logged_stats = PolicyStats(**now)
            self._logged_fired = Counter(self.fired)

    def _step(self, accessible: int, final: bool) -> Emission:
        """One step, top to bottom: build the prompt, draft, decide how much of the draft is a usable translation
        (`DraftGuard.decide`), apply the policy's acceptance, emit. One bounded loop drafts again: once without its
        first token, a segment's draft that opens with the source's first word ("For | esempio" becomes "Per
        esempio"); up to `final_retries` times after the text before its cut, a final draft cut where it stops being
        one (a copy, a loop, a foreign script), banning the token the cut began with and the first token of each
        copying retry; where all copy, the first stands (an untranslated sentence says more than none)."""
        if not final and (accessible < max(1, self.config.min_accessible_words) or not self._may_write(accessible)):
            self.fired["min_accessible_words"] += 1 <= accessible < self.config.min_accessible_words
            return Emission()
        source = [w.text for w in self.source_words]
        # Greedy drafting is deterministic: the same source, frontier and target prefix decide the same again.
        step_key = (tuple(source), accessible, join_units(self.segment_units, self.target_unit), final)
        if step_key == self._last_step_key:
            return Emission()
        self._last_step_key = step_key
        kept, banned, budget, first, retry = "", [], None, "", False  # what is drafted again: see above
        for _ in range(2 + self.config.final_retries):
            target_prefix = join_units(self.segment_units, self.target_unit) + kept
            try:  # a live step needs the source map; the final draft does not, so it never fails on one
                prompt = self.prompts.build(source, target_prefix, map_source=not final)
            except PromptError as error:  # e.g. a recognised "word" that owns no token: skip this step, keep the stream
                self._record(Step(None, None, "", "", accessible, final=final, skipped=str(error)))
                return Emission()
            prefix = [*self.segment_units, *split_units(kept, self.target_unit, continues=bool(self.segment_units))]
            draft, accepted, scan, budget = self._draft(prompt, accessible, final, target_prefix, prefix, budget,
                                                        banned)
            # Byte fragments that never completed a character (U+FFFD) are dropped from a final draft; a live draft
            # rounds back to the last complete unit anyway.
            draft_text = self._decode(draft.tokens).replace(REPLACEMENT_CHARACTER, "") if final \
                else self._decode(draft.tokens)
            decision = self.guard.decide(draft_text, prefix, source, live=not final)
            self.fired.update(decision.found)
            if decision.redraft and not banned:  # the dropped draft is not recorded; `fired` counts it
                banned = [draft.tokens[0]]
                continue
            committed = self._accept(draft, draft_text, accepted, decision, final)
            copied = None if decision.copied is None else min(decision.copied, len(committed))
            self._record(Step(prompt, draft, draft_text, committed if copied is None else committed[:copied],
                              accessible, scan, final, decision.cut, retry=retry, copied=copied is not None,
                              floor_tokens=max(0, accepted - scan.accepted_tokens) if scan is not None else 0))
            if retry:  # drafted again while it copies and retries are left
                if copied is not None and committed.strip() and len(banned) < self.config.final_retries:
                    banned.append(draft.tokens[0])
                    continue
                committed = kept + committed if copied is None and committed.strip() else first
                break
            if not final or (copied is None and decision.cut not in DEGENERATE_CUTS):
                committed = committed[:copied]  # a live step commits nothing from where its draft copies
                break
            first, kept = committed, committed[:copied]  # a final draft cut: draft again from the cut
            self.fired["final_retries"] += self.config.final_retries > 0
            kept_tokens = tokens_within(self._decode, draft.tokens, len(kept))
            if not self.config.final_retries or kept_tokens == len(draft.tokens) or budget - kept_tokens < 1:
                committed = first
                break
            budget, banned, retry = budget - kept_tokens, [draft.tokens[kept_tokens]], True
        return self._emission(committed, accessible, final)

    def _draft(self, prompt: TranslationPrompt, accessible: int, final: bool, target_prefix: str,
               prefix_units: list[str], budget: int | None, banned: Sequence[int]
               ) -> tuple[Draft, int, ScanResult | None, int]:
        """A draft from `prompt`, the draft tokens the policy accepts, its scan and the budget it had: a live step's
        by the policy (`_draft_and_accept`), a final one whole within `budget` (first: `_final_budget`), its first
        token not one of `banned`."""
        if not final:
            return (*self._draft_and_accept(prompt, self.config.max_new_tokens, accessible, tuple(banned)),
                    self.config.max_new_tokens)
        budget = budget or self._final_budget(prompt, target_prefix)
        draft = self.session.draft(prompt.token_ids, budget, capture=False, banned_first_tokens=tuple(banned),
                                   stop=lambda d: self._translation_over(d, prefix_units))
        self._count_budget(draft, budget)
        return draft, len(draft.tokens), None, budget

    def _accept(self, draft: Draft, draft_text: str, accepted: int, decision: Decision, final: bool) -> str:
        """What of a draft a step commits: a final draft up to its usable length (`decision`), a live one up to the
        policy's `accepted` tokens, both rounded back to the last complete unit."""
        if final or decision.cut:  # only a final draft's last unit is complete where its usable text ends
            length = committable_prefix_length(draft_text[:decision.length], "" if final else None, self.target_unit)
        else:
            length = len(draft_text)
        return draft_text[:length if final else min(length, self._committable_length(draft, accepted))]

    def _emission(self, committed: str, accessible: int, final: bool) -> Emission:
        """The committed text as new units: a live step withholds a sentence end (`withhold_sentence_end`), wait-k
        caps them (`_limit`), and a piece that goes on inside the last emitted word joins it."""
        units = tuple(split_units(committed, self.target_unit, continues=bool(self.segment_units)))
        if not final and self.config.withhold_sentence_end:
            self.fired["sentence_end"] += units_before_sentence_end(units, self.config.target_lang) != units
            units = units_before_sentence_end(units, self.config.target_lang)
        if units and self.segment_units and self.decodes_leading_space \
                and continues_last_unit(committed, self.target_unit):
            # The draft goes on inside the word a step committed ("Open" + "AI eine", "Decoder" + "-Module"): the
            # model wrote one word, so it is emitted as one; the piece is no new word for a wait-k budget.
            return Emission(new_units=units[:1] + self._limit(units[1:], accessible, final), joins_last_unit=True)
        return Emission(new_units=self._limit(units, accessible, final))

    def _final_budget(self, prompt: TranslationPrompt, target_prefix: str) -> int:
        """The final draft's budget, proportional to the source (`policies.degenerate.final_budget`)."""
        tokenize = self.tokenizer
        source_tokens = len(tokenize(" ".join(w.text for w in self.source_words), add_special_tokens=False)["input_ids"])
        prefix_tokens = len(tokenize(target_prefix, add_special_tokens=False)["input_ids"]) if target_prefix else 0
        if "final_budget" in self.rules_off:
            return self.config.final_max_new_tokens
        budget = final_budget(source_tokens, prefix_tokens, self.config.final_budget_ratio,
                              self.config.final_budget_slack, self.config.final_max_new_tokens)
        self._budget_below_cap = budget < self.config.final_max_new_tokens
        return budget

    def _count_budget(self, draft: Draft, budget: int) -> None:
        """Count a final draft that used its whole ratio budget where the cap would have allowed more."""
        self.fired["final_budget"] += getattr(self, "_budget_below_cap", False) and len(draft.tokens) >= budget

    def _decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def _usable_length(self, draft_text: str, prefix_units: Sequence[str] | None = None) -> tuple[int, str]:
        """`DraftGuard.usable_length` after `prefix_units` (default: the segment's emitted units), its finds counted."""
        found: list[str] = []
        prefix = self.segment_units if prefix_units is None else prefix_units
        length = self.guard.usable_length(prefix, draft_text, found=found)
        self.fired.update(found)
        return length

    def _translation_over(self, draft: Draft, prefix_units: Sequence[str] | None = None) -> bool:
        """Stop condition of every draft: the guard cut it, at the end of its line or where it stopped being a
        translation (`policies.degenerate.DraftGuard`; nothing after that point is used)."""
        return self._text_over(self._decode(draft.tokens), prefix_units)

    def _text_over(self, draft_text: str, prefix_units: Sequence[str] | None = None) -> bool:
        """`_translation_over` on a draft already decoded (a policy's stop condition decodes it once per token)."""
        return bool(self._usable_length(draft_text, prefix_units)[1])

    def _committable_length(self, draft: Draft, accepted: int) -> int:
        """Round a live draft's accepted token prefix back to the last complete stability unit. Where the draft
        ends (its budget, or end-of-sequence after a partial source) its last unit may still go on: "zusammen"
        becomes "zusammen," once more source is heard, and a unit committed without its comma would leave
        the comma a unit of its own (" ,")."""
        accepted_text = self._decode(draft.tokens[:accepted])
        if accepted == len(draft.tokens):
            next_char = None
        else:
            next_char = self._decode(draft.tokens[: accepted + 1])[len(accepted_text):][:1] or None
        return committable_prefix_length(accepted_text, next_char, self.target_unit)

    def _whole_tokens_within(self, draft: Draft, allowed: int) -> int:
        """The longest token prefix of a draft whose text holds at most `allowed` units. One token may hold several
        characters ("我们"); a budget that ends inside one left the next prompt ending in a lone "我", after which the
        model wrote "我开发了" where it writes "我们开发了". A word target's tokens begin with its words' spaces, so the
        prefix ends with a whole word."""
        accepted = len(draft.tokens)
        while accepted and len(split_units(self._decode(draft.tokens[:accepted]), self.target_unit)) > allowed:
            accepted -= 1
        return accepted

    def _may_write(self, accessible: int) -> bool:
        """Whether a draft is worth computing now, with `accessible` source words (wait-k may forbid writing)."""
        return True

    def _limit(self, units: tuple[str, ...], accessible: int, final: bool) -> tuple[str, ...]:
        """Cap the committed units (the wait-k schedule does); by default keep all."""
        return units

    @abstractmethod
    def _draft_and_accept(self, prompt: TranslationPrompt, budget: int, accessible: int, banned: tuple[int, ...]
                          ) -> tuple[Draft, int, ScanResult | None]:
        """Draft from `prompt`, its first token not one of `banned`, and say how many leading draft tokens the policy
        accepts."""


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
            frontier_min_mass=config.frontier_min_mass,
            head_vote=config.head_vote,
        )

    @classmethod
    def from_config(cls, config: AlignAttConfig, lm: CausalLM | None = None) -> "AlignAttTranslator":
        heads = resolve_heads(config)  # first: a bad head file fails in milliseconds, not after loading the model
        lm = lm or load_lm(config.backend, config.model, capture_heads=heads.heads, **config.lm_options())
        return cls(lm, config, heads)

    def _draft_and_accept(self, prompt, budget, accessible, banned):
        scanner = DraftScanner(prompt.source_token_word, accessible, self.params)
        floor = self._floor_units(accessible)

        def scan_next(draft: Draft) -> bool:
            """Push the first unscanned row; True once a token is rejected."""
            index = len(scanner.decisions)
            row = np.asarray(draft.source_attention(prompt.source_positions, index, index + 1)[0])
            return scanner.push(row).failure is not None

        def stop(draft: Draft) -> bool:
            if self.stop_at_first_failure and not scanner.failed:
                scan_next(draft)
            text = self._decode(draft.tokens)
            # A rejected token ends the draft only once the floor's units are complete (the next one has begun).
            gate_over = self.stop_at_first_failure and scanner.failed and len(split_units(text, self.target_unit)) > floor
            over = gate_over or self._text_over(text)
            return over

        draft = self.session.draft(prompt.token_ids, budget, stop=stop, banned_first_tokens=banned)
        while not scanner.failed and len(scanner.decisions) < len(draft.tokens):
            scan_next(draft)
        accepted = scanner.accepted_tokens
        if floor > 0 and scanner.failed:
            self.fired["waitk_floor"] += 1
            accepted = max(accepted, self._whole_tokens_within(draft, floor))
        return draft, accepted, scanner.result()

    def _floor_units(self, accessible: int) -> int:
        """How many more of the segment's units this live step commits whatever the gate says: those wait-k with
        k = `waitk_floor` would have written by now, less the ones already emitted (0 with the floor off)."""
        if not self.config.waitk_floor:
            return 0
        budget = waitk_target_budget(accessible, self.config.waitk_floor, False,
                                     default_units_per_word(self.target_unit))
        return max(0, budget - len(self.segment_units))


class WaitkTranslator(LLMTranslator):
    """The wait-k baseline on the same backend: after k accessible source words, `units_per_word` target units per
    accessible source word (text input: every word read; speech: the words that ended `hold_back` before now)."""

    def __init__(self, lm: CausalLM, config: WaitkConfig):
        super().__init__(lm, config, heads=None)
        self.units_per_word = config.units_per_word or default_units_per_word(self.target_unit)

    @classmethod
    def from_config(cls, config: WaitkConfig, lm: CausalLM | None = None) -> "WaitkTranslator":
        return cls(lm or load_lm(config.backend, config.model, **config.lm_options()), config)

    def _draft_and_accept(self, prompt, budget, accessible, banned):
        """Draft only until the units the schedule allows now are complete (the next one has begun): one new word
        per read costs a few tokens, not the whole budget."""
        allowed = self._budget(accessible, final=False) - len(self.segment_units)

        def stop(draft: Draft) -> bool:
            text = self._decode(draft.tokens)
            return len(split_units(text, self.target_unit)) > allowed or self._text_over(text)

        draft = self.session.draft(prompt.token_ids, budget, capture=False, stop=stop, banned_first_tokens=banned)
        if self.target_unit == "char":
            return draft, self._whole_tokens_within(draft, allowed), None
        return draft, len(draft.tokens), None

    def _budget(self, accessible: int, final: bool) -> int | None:
        return waitk_target_budget(accessible, self.config.k, final, self.units_per_word)

    def _may_write(self, accessible):
        return self._budget(accessible, final=False) > len(self.segment_units)

    def _limit(self, units, accessible, final):
        budget = self._budget(accessible, final)
        if budget is None:
            return units
        return units[: max(0, budget - len(self.segment_units))]


class LocalAgreementTranslator(LLMTranslator):
    """The LocalAgreement baseline over greedy re-translation (the IWSLT 2026 baseline's MT rule): each step
    translates the whole source so far after the committed target and commits the units the last `agreement`
    translations agree on."""

    def __init__(self, lm: CausalLM, config: LocalAgreementConfig):
        super().__init__(lm, config, heads=None)
        self.hypotheses: deque[list[str]] = deque(maxlen=config.agreement)
        self._window_before = self.hypotheses.copy()  # the window before this step's draft (`_draft_and_accept`)

    @classmethod
    def from_config(cls, config: LocalAgreementConfig, lm: CausalLM | None = None) -> "LocalAgreementTranslator":
        return cls(lm or load_lm(config.backend, config.model, **config.lm_options()), config)

    def reset(self) -> None:
        super().reset()
        self.hypotheses.clear()

    def finish_segment(self, words: Sequence[SourceWord]) -> Emission:
        emission = super().finish_segment(words)
        self.hypotheses.clear()
        return emission

    def _draft_and_accept(self, prompt, budget, accessible, banned):
        """The whole translation (budget as for a final draft), accepted up to the units every hypothesis of the
        window agrees on; the window keeps each hypothesis' units after what is committed. A draft made again
        (`banned`) replaces the step's dropped one in the window."""
        if banned:
            self.hypotheses = self._window_before
        self._window_before = self.hypotheses.copy()
        draft = self.session.draft(prompt.token_ids, self._final_budget(prompt, join_units(self.segment_units,
                                                                                              self.target_unit)),
                                   capture=False, stop=self._translation_over, banned_first_tokens=banned)
        text = self._decode(draft.tokens)
        text = text[: self._usable_length(text)[0]]
        # The last unit may go on, whether the budget cut it or the draft ended on a partial source ("zusammen"
        # before "zusammen,"): as in every live step, it is never agreed on.
        units = split_units(text, self.target_unit)[:-1]
        self.hypotheses.append(units)
        agreed = agreed_prefix(list(self.hypotheses))
        self.hypotheses = deque((h[agreed:] for h in self.hypotheses), maxlen=self.hypotheses.maxlen)
        return draft, self._tokens_for_units(draft, agreed), None

    def _tokens_for_units(self, draft: Draft, count: int) -> int:
        """The fewest draft tokens whose text holds `count` complete units (the next character starts another)."""
        if count == 0:
            return 0
        for length in range(1, len(draft.tokens) + 1):
            units = split_units(self._decode(draft.tokens[:length]), self.target_unit)
            if len(units) > count:
                return length - 1
        return len(draft.tokens)


def prompt_words(words: Sequence[SourceWord]) -> list[SourceWord]:
    """Source words as the prompt takes them: a recognised "word" holding whitespace becomes several words with its
    end time, and one that is only whitespace is dropped (a recogniser may return either)."""
    cleaned = []
    for word in words:
        cleaned.extend(SourceWord(piece, word.end_time) for piece in word.text.split())
    return cleaned


def decodes_leading_space(tokenizer) -> bool:
    """Whether `tokenizer` decodes a text's first token with its leading space (" und" stays " und"), as byte-level
    BPE (Qwen's) does. A decoder that strips it (Llama-2's SentencePiece) would make every draft look as if it went
    on inside the last word, so with one the translator never joins a draft to that word."""
    return tokenizer.decode(tokenizer(" und", add_special_tokens=False)["input_ids"]).startswith(" ")


def tokens_within(decode: Callable[[Sequence[int]], str], tokens: Sequence[int], length: int) -> int:
    """The most leading `tokens` whose decoded text is at most `length` characters long."""
    count = 0
    while count < len(tokens) and len(decode(tokens[:count + 1])) <= length:
        count += 1
    return count


def units_before_sentence_end(units: tuple[str, ...], lang: str | None = None) -> tuple[str, ...]:
    """The units before the first one that closes a sentence (in `lang`, the target language): an unfinished source
    segment must not get a finished translation (the model would consider it done and never translate the rest)."""
    for index, unit in enumerate(units):
        if ends_sentence(unit, lang):
            return units[:index]
    return units


def resolve_heads(config: AlignAttConfig) -> HeadSet:
    if config.heads:
        return load_heads(config.heads, config.top_k_heads)
    return default_heads(config.model, config.source_lang, config.target_lang, config.top_k_heads)
