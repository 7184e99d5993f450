"""How many of a live draft's tokens a policy lets a step commit: the AlignAtt gate, wait-k, LocalAgreement, and a
wait-k floor wrapped around another policy. One object per stream; `judge` gives one draft's judge."""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from policies.alignatt import AlignAttParams, DraftScanner, ScanResult
from policies.local_agreement import agreed_prefix
from policies.units import Unit, split_units
from policies.waitk import default_units_per_word, waitk_target_budget


class Draft(Protocol):
    """A draft as a policy reads it (any runtime's `backends.draft.Draft`)."""

    tokens: list[int]

    def source_attention(self, source_positions: Any, first: int, stop: int) -> Any:
        """[stop - first, H, S] attention of draft rows first..stop-1 over the source tokens."""


class TranslationPrompt(Protocol):
    """Where the source sits in a prompt (`backends.prompt.TranslationPrompt`)."""

    source_positions: np.ndarray
    source_token_word: np.ndarray
    source_token_punct: np.ndarray


@dataclass(frozen=True)
class DraftReader:
    """A stream's draft tokens as text and target units."""

    decode: Callable[[Sequence[int]], str]
    unit: Unit

    def units(self, text: str) -> list[str]:
        return split_units(text, self.unit)

    def whole_tokens_within(self, tokens: Sequence[int], allowed: int) -> int:
        """The longest token prefix whose text holds at most `allowed` units. One token may hold several
        characters ("我们"); a budget that ends inside one left the next prompt ending in a lone "我", after which the
        model wrote "我开发了" where it writes "我们开发了". A word target's tokens begin with its words' spaces, so
        the prefix ends with a whole word."""
        accepted = len(tokens)
        while accepted and len(self.units(self.decode(tokens[:accepted]))) > allowed:
            accepted -= 1
        return accepted

    def tokens_for_units(self, tokens: Sequence[int], count: int) -> int:
        """The fewest tokens whose text holds `count` complete units (the next character starts another)."""
        if count == 0:
            return 0
        for length in range(1, len(tokens) + 1):
            if len(self.units(self.decode(tokens[:length]))) > count:
                return length - 1
        return len(tokens)


class DraftJudge:
    """A policy's view of one live draft: `stop` while drafting (the newest token is in), `accepted` once it is done."""

    scan: ScanResult | None = None  # the AlignAtt gate's scan, for the step's record
    floor_used: bool = False  # a wait-k floor decided: the inner policy stopped before the end of the draft
    floor_tokens: int = 0  # tokens the floor accepted past where the inner policy stopped

    def stop(self, draft: Draft, text: str) -> bool:
        """Whether drafting may stop now: nothing after this token can be committed."""
        return False

    def accepted(self, draft: Draft, usable_length: int) -> int:
        """How many leading draft tokens may be committed (`usable_length`: characters the draft filters left)."""
        return len(draft.tokens)


class Acceptance:
    """A policy: whether a live step may write, and a judge for each live draft."""

    capture = False  # its drafts need their attention captured
    whole_drafts = False  # each live step drafts the whole translation (a final draft's budget)

    def may_write(self, accessible: int, emitted: Sequence[str]) -> bool:
        """Whether a live draft is worth computing with `accessible` source words and `emitted` segment units."""
        return True

    def judge(self, prompt: TranslationPrompt, accessible: int, emitted: Sequence[str]) -> DraftJudge:
        return DraftJudge()

    def limit(self, units: tuple[str, ...], accessible: int, final: bool, emitted: Sequence[str]) -> tuple[str, ...]:
        """Cap a step's new units (wait-k's schedule does); by default keep all."""
        return units

    def finish_segment(self) -> None:
        """The segment is done: forget what was kept of it."""


class AlignAtt(Acceptance):
    """The AlignAtt gate (paper §4): the longest draft prefix whose replayed attention stays on accessible source.
    Scanning while drafting and stopping at the first rejected token gives the same decisions as drafting the whole
    budget and scanning afterwards (the z-scores use earlier rows only), with fewer decode steps."""

    capture = True

    def __init__(self, reader: DraftReader, params: AlignAttParams, stop_at_first_failure: bool = True):
        self.reader, self.params, self.stop_at_first_failure = reader, params, stop_at_first_failure

    def judge(self, prompt, accessible, emitted):
        scanner = DraftScanner(prompt.source_token_word, accessible, self.params, prompt.source_token_punct)
        return GateJudge(self.reader, scanner, prompt.source_positions, self.stop_at_first_failure)


class GateJudge(DraftJudge):
    def __init__(self, reader: DraftReader, scanner: DraftScanner, source_positions, early: bool):
        self.reader, self.scanner, self.source_positions, self.early = reader, scanner, source_positions, early

    def _scan_next(self, draft: Draft) -> None:
        index = len(self.scanner.decisions)
        self.scanner.push(np.asarray(draft.source_attention(self.source_positions, index, index + 1)[0]))

    def stop(self, draft, text):
        if self.early and not self.scanner.failed:
            self._scan_next(draft)
        return self.early and self.scanner.failed and len(self.reader.units(text)) > 0

    def accepted(self, draft, usable_length):
        while not self.scanner.failed and len(self.scanner.decisions) < len(draft.tokens):
            self._scan_next(draft)
        self.scan = self.scanner.result()
        return self.scanner.accepted_tokens


class WaitkFloor(Acceptance):
    """A wait-k schedule under another policy: a live step commits at least the units wait-k with this `k` would
    have written by now (one per accessible word after the first k - 1; Chinese 1.8 characters), less those already
    emitted, whatever the inner policy says; the inner policy's stop waits until those units are drafted."""

    def __init__(self, inner: Acceptance, reader: DraftReader, k: int):
        self.inner, self.reader, self.k = inner, reader, k
        self.capture, self.whole_drafts = inner.capture, inner.whole_drafts

    def may_write(self, accessible, emitted):
        return self.inner.may_write(accessible, emitted)

    def judge(self, prompt, accessible, emitted):
        budget = waitk_target_budget(accessible, self.k, False, default_units_per_word(self.reader.unit))
        return FloorJudge(self.inner.judge(prompt, accessible, emitted), self.reader, max(0, budget - len(emitted)))

    def limit(self, units, accessible, final, emitted):
        return self.inner.limit(units, accessible, final, emitted)

    def finish_segment(self):
        self.inner.finish_segment()


class FloorJudge(DraftJudge):
    def __init__(self, inner: DraftJudge, reader: DraftReader, floor: int):
        self.inner, self.reader, self.floor = inner, reader, floor

    def stop(self, draft, text):
        return self.inner.stop(draft, text) and len(self.reader.units(text)) > self.floor

    def accepted(self, draft, usable_length):
        inner = accepted = self.inner.accepted(draft, usable_length)
        self.scan = self.inner.scan
        if self.floor > 0 and inner < len(draft.tokens):
            self.floor_used = True
            accepted = max(inner, self.reader.whole_tokens_within(draft.tokens, self.floor))
        self.floor_tokens = accepted - inner
        return accepted


class Waitk(Acceptance):
    """Wait-k: after k accessible source words, `units_per_word` target units per accessible word. A live draft
    stops once the units the schedule allows now are complete (the next one has begun): one new word per read costs
    a few tokens, not the whole budget."""

    def __init__(self, reader: DraftReader, k: int, units_per_word: float):
        self.reader, self.k, self.units_per_word = reader, k, units_per_word

    def budget(self, accessible: int, final: bool) -> int | None:
        return waitk_target_budget(accessible, self.k, final, self.units_per_word)

    def may_write(self, accessible, emitted):
        return self.budget(accessible, final=False) > len(emitted)

    def judge(self, prompt, accessible, emitted):
        return WaitkJudge(self.reader, self.budget(accessible, final=False) - len(emitted))

    def limit(self, units, accessible, final, emitted):
        budget = self.budget(accessible, final)
        return units if budget is None else units[: max(0, budget - len(emitted))]


class WaitkJudge(DraftJudge):
    def __init__(self, reader: DraftReader, allowed: int):
        self.reader, self.allowed = reader, allowed

    def stop(self, draft, text):
        return len(self.reader.units(text)) > self.allowed

    def accepted(self, draft, usable_length):
        if self.reader.unit == "char":
            return self.reader.whole_tokens_within(draft.tokens, self.allowed)
        return len(draft.tokens)


class LocalAgreement(Acceptance):
    """LocalAgreement over greedy re-translation (the IWSLT 2026 baseline's MT rule): each live step translates the
    whole source so far after the committed target, and commits the units the last `agreement` translations agree
    on; the window keeps each translation's units after what is committed."""

    whole_drafts = True

    def __init__(self, reader: DraftReader, agreement: int):
        self.reader = reader
        self.hypotheses: deque[list[str]] = deque(maxlen=agreement)

    def judge(self, prompt, accessible, emitted):
        return AgreementJudge(self)

    def finish_segment(self):
        self.hypotheses.clear()


class AgreementJudge(DraftJudge):
    def __init__(self, policy: LocalAgreement):
        self.policy = policy

    def accepted(self, draft, usable_length):
        policy, reader = self.policy, self.policy.reader
        # The last unit may go on, whether the budget cut it or the draft ended on a partial source ("zusammen"
        # before "zusammen,"): as in every live step, it is never agreed on.
        policy.hypotheses.append(reader.units(reader.decode(draft.tokens)[:usable_length])[:-1])
        agreed = agreed_prefix(list(policy.hypotheses))
        policy.hypotheses = deque((h[agreed:] for h in policy.hypotheses), maxlen=policy.hypotheses.maxlen)
        return reader.tokens_for_units(draft.tokens, agreed)
