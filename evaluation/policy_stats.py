"""How often a run's policy held back (the AlignAtt gate, a wait-k floor) and each draft filter or rule fired, counted
from the events its LLM translator wrote (`agents.systems.events`): one row per finished segment, `policy.jsonl`."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, fields
from pathlib import Path

from policies.degenerate import DEGENERATE_CUTS, DRAFT_FILTERS, LineEnd

# What a row counts as fired_RULE: the draft filters and the rules a step reports (`events.RuleFired`).
COUNTED_RULES = (*DRAFT_FILTERS, "final_retries", "final_budget", "sentence_end", "min_accessible_words",
                 "waitk_floor")


@dataclass
class PolicyStats:
    """Counts over a stream's steps (the drafts that were committed from; a draft made again at once is not a step).

    gate_fired: live steps where the AlignAtt gate rejected a token, split by the rule that did in
    gate_source_frontier (the attention peak), gate_argmax_mass_weak (tau_argmax), gate_provenance_weak (tau_src)
    and gate_nonfinite; gate_stopped_tokens: draft tokens withheld by it; degenerate: drafts cut because they
    stopped being a translation (`DEGENERATE_CUTS`); line_breaks: drafts that ended their line (how a one-line
    translation ends); skipped: steps whose source could not be mapped; final_retries: final drafts made again after
    a cut (counted apart from final_steps), final_retries_degenerate: those cut as degenerate; copied, final_copied
    and final_retries_copied: live drafts, final drafts and retries that copied the source; floor_steps and
    floor_tokens: live steps where a wait-k floor committed past where the gate stopped, and the tokens it accepted
    there. fired: per filter or rule (`COUNTED_RULES`), the drafts or steps where it found something.
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
    fired: Counter = field(default_factory=Counter)

    def add(self, event: dict) -> None:
        """Count one event (an `agents.systems.events` event's `summary()`)."""
        if event["event"] == "rule":
            self.fired[event["rule"]] += 1
        if event["event"] != "step":
            return
        self.fired.update(event["found"])
        degenerate, line_break = event["cut"] in DEGENERATE_CUTS, event["cut"] == LineEnd.name
        if event["dropped"]:
            return
        if event["skipped"]:
            self.skipped += 1
        elif event["retry"]:
            self.final_retries += 1
            self.final_retries_degenerate += degenerate
            self.final_retries_copied += event["copied"]
        elif event["final"]:
            self.final_steps += 1
            self.final_degenerate += degenerate
            self.final_copied += event["copied"]
            self.final_line_breaks += line_break
        else:
            self.live_steps += 1
            self.draft_tokens += event["draft_tokens"]
            if event["gate_failure"] is not None:
                self.gate_fired += 1
                name = f"gate_{event['gate_failure']}"
                setattr(self, name, getattr(self, name) + 1)
            self.gate_stopped_tokens += event["gate_stopped_tokens"]
            self.floor_steps += event["floor_tokens"] > 0
            self.floor_tokens += event["floor_tokens"]
            self.degenerate += degenerate
            self.line_breaks += line_break
            self.copied += event["copied"]

    def row(self) -> dict:
        """The counts as one `policy.jsonl` row: every field, and fired_RULE for each of `COUNTED_RULES`."""
        counts = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "fired"}
        return {**counts, **{f"fired_{rule}": self.fired[rule] for rule in COUNTED_RULES}}


class PolicyCounter:
    """An observer of one translator (`LLMTranslator(observers=[...])`): its counts since it was attached."""

    def __init__(self):
        self.stats = PolicyStats()

    def __call__(self, event) -> None:
        self.stats.add(event.summary())


def policy_rows(events: Path) -> list[dict]:
    """The rows of an event log: one per finished segment (events after the last segment's end are left out)."""
    rows, stats = [], PolicyStats()
    for line in events.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event["event"] == "segment_end":
            rows.append(stats.row())
            stats = PolicyStats()
        else:
            stats.add(event)
    return rows


EVENT_LOG = "events.jsonl"  # what a run's LLM translator did (its `event_log` knob)
POLICY_LOG = "policy.jsonl"  # its counts, one row per finished segment (`write_policy_log`)


def write_policy_log(run_dir: Path) -> Path | None:
    """Count a run's event log into its `policy.jsonl`; None where the run wrote no event log."""
    events = run_dir / EVENT_LOG
    if not events.is_file():
        return None
    log = run_dir / POLICY_LOG
    log.write_text("".join(json.dumps(row) + "\n" for row in policy_rows(events)), encoding="utf-8")
    return log
