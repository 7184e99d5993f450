"""What an LLM translator reports as it works (a step drafted, a rule that fired, a segment finished), to observers
that keep or write it; counting lives with the evaluation (`evaluation.policy_stats`), never on the serving path."""
from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from policies.degenerate import DEGENERATE_CUTS

if TYPE_CHECKING:
    from backends.draft import Draft
    from backends.prompt import TranslationPrompt
    from policies.alignatt import ScanResult


@dataclass(frozen=True)
class Step:
    """One draft of a step and what came of it.

    cut: the draft filter that ended the draft ("" where none did): `line_end` (the translation's line ended) or a
    degenerate cut (`DEGENERATE_CUTS`: a loop, a foreign script).
    retry: a final draft made again after the previous one was cut (a copy, a loop).
    copied: the draft's usable text copies the source from some point on (a copy filter found it): a live step
    commits nothing from there, a final one is made again from there.
    floor_tokens: draft tokens a live step accepted past the gate's first rejected one because a wait-k floor asked
    for them (0 where the gate allowed as much, or there is no floor).
    found: the draft filters that found something in it, in their order.
    dropped: drafted again at once without its first token (the `opening_word` filter); nothing of it is committed.
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
    found: tuple[str, ...] = ()
    dropped: bool = False

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

    def summary(self) -> dict:
        """The step as one JSON-able record, without its prompt, tokens and attention."""
        return {"event": "step", "final": self.final, "retry": self.retry, "skipped": bool(self.skipped),
                "dropped": self.dropped, "draft_tokens": len(self.draft.tokens) if self.draft else 0,
                "gate_failure": self.gate_failure, "gate_stopped_tokens": self.gate_stopped_tokens, "cut": self.cut,
                "copied": self.copied, "floor_tokens": self.floor_tokens, "found": list(self.found)}


@dataclass(frozen=True)
class RuleFired:
    """A rule outside the draft filters changed what a step did: `min_accessible_words` (a live step wrote nothing),
    `sentence_end` (a live step held a sentence end back), `waitk_floor`, `final_retries` (a final draft is made
    again from its cut), `final_budget` (a final draft used the whole of a budget below the cap)."""

    rule: str

    def summary(self) -> dict:
        return {"event": "rule", "rule": self.rule}


@dataclass(frozen=True)
class SegmentEnd:
    """A segment's source was complete and its translation is emitted."""

    def summary(self) -> dict:
        return {"event": "segment_end"}


Event = Step | RuleFired | SegmentEnd
Observer = Callable[[Event], None]

MAX_KEPT_STEPS = 512  # steps a `StepLog` keeps: bounded, so a one-hour talk does not grow memory


class StepLog:
    """An observer that keeps a stream's last MAX_KEPT_STEPS steps (those committed from; diagnostics, tests)."""

    def __init__(self, maxlen: int = MAX_KEPT_STEPS):
        self.steps: deque[Step] = deque(maxlen=maxlen)

    def __call__(self, event: Event) -> None:
        if isinstance(event, Step) and not event.dropped:
            self.steps.append(event)


class EventLog:
    """An observer that appends each event as one JSON line (`Step.summary`) to a file: `event_log`."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, event: Event) -> None:
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(json.dumps(event.summary()) + "\n")
