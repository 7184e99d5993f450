"""Simultaneous translation with a decoder-only LLM: re-prompt with the source so far and the committed target,
draft greedily, let the draft filters and a policy decide how much of the draft to commit (AlignAtt, wait-k, ...).

A stream is a sequence of segments (sentences): `flush`/`finish_segment` completes one, and the next starts with a
fresh prompt, so a long talk costs per step what its current sentence costs."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Callable, Sequence

from agents.core import StreamingTranslator
from agents.systems.config import AlignAttConfig, LLMTranslatorConfig, LocalAgreementConfig, WaitkConfig
from agents.systems.events import Event, EventLog, Observer, RuleFired, SegmentEnd, Step
from backends.choice import lm_weights
from backends.draft import Draft
from backends.heads import HeadSet, default_heads, load_heads
from backends.prompt import PromptBuilder, PromptError, TranslationPrompt
from backends.models import stream_tokenizer
from common.stream import Emission, SourceWord
from policies.acceptance import Acceptance, AlignAtt, DraftJudge, DraftReader, LocalAgreement, Waitk, WaitkFloor
from policies.budget import token_budget
from policies.degenerate import (
    CUT,
    DEGENERATE_CUTS,
    DraftText,
    FilterSettings,
    Verdict,
    judge,
    make_filters,
)
from policies.frontier import accessible_word_count
from policies.transcript import ends_sentence
from policies.units import (
    REPLACEMENT_CHARACTER,
    committable_prefix_length,
    continues_last_unit,
    join_units,
    split_units,
    target_unit_for,
)
from policies.waitk import default_units_per_word

if TYPE_CHECKING:  # any runtime's LM: backends.hf.lm, backends.llama_cpp.lm, backends.vllm.lm
    from backends.hf.lm import CausalLM


@dataclass(frozen=True)
class Attempt:
    """What a step drafts next (one variable, as faster-whisper's temperature fallback): the first draft; the same
    again without its first token (`banned`); or a final draft's retry from where the last one was cut, after its
    `kept` text, with the `budget` left and the first draft's text as the `fallback` where every retry copies.
    `committed`: the step is over and commits this."""

    banned: tuple[int, ...] = ()
    kept: str = ""
    fallback: str = ""
    budget: int | None = None
    retry: bool = False
    committed: str | None = None


class LLMTranslator(StreamingTranslator):
    """The shared step of every LLM policy. `policy` makes, from the stream's `DraftReader`, the policy that says how
    much of a live draft may be committed (`policies.acceptance`); `observers` receive what the translator
    does (`agents.systems.events`)."""

    def __init__(self, lm: CausalLM, config: LLMTranslatorConfig, policy: Callable[[DraftReader], Acceptance],
                 heads: Sequence[tuple[int, int]] | None = None, observers: Sequence[Observer] = ()):
        super().__init__(target_unit_for(config.target_lang))
        self.lm = lm
        self.config = config
        self.tokenizer = stream_tokenizer(lm.tokenizer)  # this stream's own: server threads share no tokenizer state
        self.decodes_leading_space = decodes_leading_space(self.tokenizer)
        self.reader = DraftReader(self._decode, self.target_unit)
        self.acceptance = policy(self.reader)
        self.prompts = PromptBuilder(self.tokenizer, config.source_lang, config.target_lang,
                                     config.instruction_position, style=config.prompt_style)
        self.filters = make_filters(config.draft_filters, FilterSettings(
            self.target_unit, config.source_lang, config.target_lang, config.copy_guard_words,
            config.language_turn_words))
        self.observers: list[Observer] = [*observers, *([EventLog(config.event_log)] if config.event_log else [])]
        self.session = lm.session(heads)
        self.source_words: list[SourceWord] = []  # of the current segment
        self.segment_start = 0  # index in emitted_units where the current segment's target begins
        self._last_step_key: tuple | None = None

    def reset(self) -> None:
        super().reset()
        self.session.reset()
        self.acceptance.finish_segment()
        self.source_words = []
        self.segment_start = 0
        self._last_step_key = None

    def _report(self, event: Event) -> None:
        for observer in self.observers:
            observer(event)

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
        if now is None:  # text: every word read, less `hold_back_words`
            accessible = max(0, len(self.source_words) - self.config.hold_back_words)
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
        self.acceptance.finish_segment()
        self._report(SegmentEnd())
        return emission

    def _step(self, accessible: int, final: bool) -> Emission:
        """One step in five moves: build the prompt, draft, filter (the preset's `draft_filters`), accept (the
        policy; a final draft is accepted whole), emit. A draft the step cannot use as it is, is drafted again
        (`_next_attempt`): one bounded loop over one variable."""
        source = [w.text for w in self.source_words]
        if not self._may_step(source, accessible, final):
            return Emission()
        attempt = Attempt()
        for _ in range(2 + self.config.final_retries):
            prompt = self._prompt(source, attempt.kept, accessible, final)
            if prompt is None:
                return Emission()
            prefix = [*self.segment_units, *split_units(attempt.kept, self.target_unit,
                                                        continues=bool(self.segment_units))]
            draft, judged, budget = self._draft(prompt, prefix, accessible, final, attempt)
            text = self._text(draft, final)
            verdict = judge(self.filters, DraftText(text, prefix, source, live=not final))
            if verdict.redraft and not attempt.banned:  # drafted again at once without its first token
                self._report(Step(prompt, draft, text, "", accessible, final=final, found=verdict.found, dropped=True))
                attempt = Attempt(banned=(draft.tokens[0],))
                continue
            accepted = judged.accepted(draft, verdict.length)
            committed = self._commit_text(draft, text, accepted, verdict, final)
            copied = None if verdict.copied is None else min(verdict.copied, len(committed))
            self._report(Step(prompt, draft, text, committed[:copied], accessible, judged.scan, final, verdict.cut,
                              retry=attempt.retry, copied=copied is not None, floor_tokens=judged.floor_tokens,
                              found=verdict.found))
            if judged.floor_used:
                self._report(RuleFired("waitk_floor"))
            attempt = self._next_attempt(attempt, draft, budget, verdict, committed, copied, final)
            if attempt.committed is not None:
                break
        return self._emission(attempt.committed, accessible, final)

    def _may_step(self, source: list[str], accessible: int, final: bool) -> bool:
        """Whether this step drafts at all: a live one not before `min_accessible_words` accessible words nor where
        the policy may not write; none where the same source, frontier and target prefix were decided already
        (greedy drafting is deterministic: they decide the same again)."""
        if not final and (accessible < max(1, self.config.min_accessible_words)
                          or not self.acceptance.may_write(accessible, self.segment_units)):
            if 1 <= accessible < self.config.min_accessible_words:
                self._report(RuleFired("min_accessible_words"))
            return False
        step_key = (tuple(source), accessible, join_units(self.segment_units, self.target_unit), final)
        if step_key == self._last_step_key:
            return False
        self._last_step_key = step_key
        return True

    def _prompt(self, source: list[str], kept: str, accessible: int, final: bool) -> TranslationPrompt | None:
        """The prompt: the source so far, the segment's committed target and `kept`. A live step needs the source
        map, a final draft does not (so it never fails on one); a source the prompt cannot map (a recognised "word"
        that owns no token) skips the step and keeps the stream."""
        try:
            return self.prompts.build(source, join_units(self.segment_units, self.target_unit) + kept,
                                      map_source=not final, live=not final)
        except PromptError as error:
            self._report(Step(None, None, "", "", accessible, final=final, skipped=str(error)))
            return None

    def _draft(self, prompt: TranslationPrompt, prefix: list[str], accessible: int, final: bool, attempt: Attempt
               ) -> tuple[Draft, DraftJudge, int]:
        """A draft from `prompt` (its first token not one of `attempt.banned`), the policy's judge of it (a final
        draft's accepts it whole) and its budget: a final draft's (`_final_budget`, or what a retry has left), a live
        one's (`_live_budget`; a final draft's for a policy that drafts the whole translation). Drafting stops where
        a draft filter cuts it (its line ended, or it stopped being a translation) or where the policy's judge says
        so."""
        # a prompt may hold fewer words than were read: the reference style drops a live source's trailing "."
        judged = DraftJudge() if final else self.acceptance.judge(prompt, min(accessible, prompt.word_count),
                                                                  self.segment_units)
        budget = attempt.budget or (self._final_budget() if final or self.acceptance.whole_drafts
                                    else self._live_budget())

        def stop(draft: Draft) -> bool:
            text = self._decode(draft.tokens)
            return judged.stop(draft, text) or self._cut(text, prefix)

        draft = self.session.draft(prompt.token_ids, budget, capture=not final and self.acceptance.capture,
                                   stop=stop, banned_first_tokens=attempt.banned,
                                   repetition_penalty=self.config.repetition_penalty)
        if final and self._budget_below_cap(budget) and len(draft.tokens) >= budget:
            self._report(RuleFired("final_budget"))
        return draft, judged, budget

    def _text(self, draft: Draft, final: bool) -> str:
        """A draft's text; a final one without the byte fragments that never completed a character (U+FFFD): a live
        draft rounds back to its last complete unit anyway."""
        text = self._decode(draft.tokens)
        return text.replace(REPLACEMENT_CHARACTER, "") if final else text

    def _cut(self, text: str, prefix: Sequence[str]) -> bool:
        """Whether a draft filter that cuts (`policies.degenerate.CUT`) found where the draft ends."""
        return bool(judge([f for f in self.filters if f.kind == CUT], DraftText(text, prefix, ())).cut)

    def _next_attempt(self, attempt: Attempt, draft: Draft, budget: int, verdict: Verdict, committed: str,
                      copied: int | None, final: bool) -> Attempt:
        """After a draft: the step is over (`committed` set), or what to draft next. A final draft cut where it
        stops being a translation (a copy, a loop, a foreign script) is made again from the cut up to `final_retries`
        times, banning the token the cut began with and the first token of each copying retry; where all copy, the
        first stands (an untranslated sentence says more than none)."""
        if attempt.retry:
            if copied is not None and committed.strip() and len(attempt.banned) < self.config.final_retries:
                return replace(attempt, banned=(*attempt.banned, draft.tokens[0]))
            return replace(attempt, committed=attempt.kept + committed if copied is None and committed.strip()
                           else attempt.fallback)
        if not final or (copied is None and verdict.cut not in DEGENERATE_CUTS):
            return Attempt(committed=committed[:copied])  # a live step commits nothing from where its draft copies
        kept = committed[:copied]
        if self.config.final_retries:
            self._report(RuleFired("final_retries"))
        kept_tokens = tokens_within(self._decode, draft.tokens, len(kept))
        if not self.config.final_retries or kept_tokens == len(draft.tokens) or budget - kept_tokens < 1:
            return Attempt(committed=committed)
        return Attempt((draft.tokens[kept_tokens],), kept, committed, budget - kept_tokens, retry=True)

    def _commit_text(self, draft: Draft, text: str, accepted: int, verdict: Verdict, final: bool) -> str:
        """What of a draft a step commits: a final draft up to its usable length (`verdict`), a live one up to the
        policy's `accepted` tokens, both rounded back to the last complete unit."""
        if final or verdict.cut:  # only a final draft's last unit is complete where its usable text ends
            length = committable_prefix_length(text[:verdict.length], "" if final else None, self.target_unit)
        else:
            length = len(text)
        return text[:length if final else min(length, self._committable_length(draft, accepted))]

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

    def _emission(self, committed: str, accessible: int, final: bool) -> Emission:
        """The committed text as new units: a live step withholds a sentence end (`withhold_sentence_end`), the
        policy caps them (wait-k's schedule), and a piece that goes on inside the last emitted word joins it."""
        units = tuple(split_units(committed, self.target_unit, continues=bool(self.segment_units)))
        if not final and self.config.withhold_sentence_end:
            held = units_before_sentence_end(units, self.config.target_lang)
            if held != units:
                self._report(RuleFired("sentence_end"))
            units = held
        limit = self.acceptance.limit
        if units and self.segment_units and self.decodes_leading_space \
                and continues_last_unit(committed, self.target_unit):
            # The draft goes on inside the word a step committed ("Open" + "AI eine", "Decoder" + "-Module"): the
            # model wrote one word, so it is emitted as one; the piece is no new word for a wait-k budget.
            return Emission(new_units=units[:1] + limit(units[1:], accessible, final, self.segment_units),
                            joins_last_unit=True)
        return Emission(new_units=limit(units, accessible, final, self.segment_units))

    def _source_tokens(self) -> int:
        source = " ".join(w.text for w in self.source_words)
        return len(self.tokenizer(source, add_special_tokens=False)["input_ids"])

    def _live_budget(self) -> int:
        """A live draft's budget: `max_new_tokens`, or proportional to the source (`policies.budget.token_budget`)."""
        config = self.config
        if not config.live_budget_ratio:
            return config.max_new_tokens
        return token_budget(self._source_tokens(), config.live_budget_ratio, config.live_budget_slack,
                            config.live_budget_floor, config.max_new_tokens)

    def _final_budget(self) -> int:
        """A whole translation's budget, proportional to the source (`policies.budget.token_budget`), less what the
        segment committed already (`final_budget_less_committed`)."""
        config = self.config
        target_prefix = join_units(self.segment_units, self.target_unit)
        committed = len(self.tokenizer(target_prefix, add_special_tokens=False)["input_ids"]) \
            if target_prefix and config.final_budget_less_committed else 0
        return token_budget(self._source_tokens(), config.final_budget_ratio, config.final_budget_slack,
                            config.final_budget_floor, config.final_max_new_tokens, committed)

    def _budget_below_cap(self, budget: int) -> bool:
        return budget < self.config.final_max_new_tokens

    def _decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)


class AlignAttTranslator(LLMTranslator):
    """AlignAtt for decoder-only LLMs: accept the longest draft prefix whose replayed attention stays on
    accessible source (paper §4), under a wait-k floor where `waitk_floor` sets one."""

    def __init__(self, lm: CausalLM, config: AlignAttConfig, heads: HeadSet, stop_at_first_failure: bool = True,
                 observers: Sequence[Observer] = ()):
        def acceptance(reader: DraftReader) -> Acceptance:
            gate = AlignAtt(reader, config.gate_params(), stop_at_first_failure)
            return WaitkFloor(gate, reader, config.waitk_floor) if config.waitk_floor else gate

        super().__init__(lm, config, acceptance, heads.heads, observers)
        self.head_set = heads

    @classmethod
    def from_config(cls, config: AlignAttConfig, lm: CausalLM | None = None) -> "AlignAttTranslator":
        heads = resolve_heads(config)  # first: a bad head file fails in milliseconds, not after loading the model
        lm = lm or lm_weights(config.backend, config.model, capture_heads=heads.heads,
                              **config.lm_options()).load()
        return cls(lm, config, heads)


class WaitkTranslator(LLMTranslator):
    """The wait-k baseline on the same backend: after k accessible source words, `units_per_word` target units per
    accessible source word (text input: every word read; speech: the words that ended `hold_back` before now)."""

    def __init__(self, lm: CausalLM, config: WaitkConfig, observers: Sequence[Observer] = ()):
        units_per_word = config.units_per_word or default_units_per_word(target_unit_for(config.target_lang))
        super().__init__(lm, config, lambda reader: Waitk(reader, config.k, units_per_word), None, observers)

    @classmethod
    def from_config(cls, config: WaitkConfig, lm: CausalLM | None = None) -> "WaitkTranslator":
        return cls(lm or lm_weights(config.backend, config.model, **config.lm_options()).load(), config)


class LocalAgreementTranslator(LLMTranslator):
    """The LocalAgreement baseline over greedy re-translation (the IWSLT 2026 baseline's MT rule): each step
    translates the whole source so far after the committed target and commits the units the last `agreement`
    translations agree on."""

    def __init__(self, lm: CausalLM, config: LocalAgreementConfig, observers: Sequence[Observer] = ()):
        super().__init__(lm, config, lambda reader: LocalAgreement(reader, config.agreement), None, observers)

    @classmethod
    def from_config(cls, config: LocalAgreementConfig, lm: CausalLM | None = None) -> "LocalAgreementTranslator":
        return cls(lm or lm_weights(config.backend, config.model, **config.lm_options()).load(), config)


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
