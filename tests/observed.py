"""What a test watches of an LLM translator: the steps it kept and its counts, through the observers the evaluation
attaches (`agents.systems.events.StepLog`, `evaluation.policy_stats.PolicyCounter`)."""
from __future__ import annotations

from evaluation.policy_stats import PolicyCounter
from agents.systems.events import StepLog


class Observed:
    """One observer holding both: `steps` (the last steps), `stats` (the counts), `fired` (per filter or rule)."""

    def __init__(self):
        self.log, self.counter = StepLog(), PolicyCounter()

    def __call__(self, event) -> None:
        self.log(event)
        self.counter(event)

    @property
    def steps(self):
        return self.log.steps

    @property
    def stats(self):
        return self.counter.stats

    @property
    def fired(self):
        return self.counter.stats.fired


def observe(translator) -> Observed:
    """Attach an `Observed` to `translator` (an LLM translator, or a cascade around one) and return it."""
    translator = getattr(translator, "translator", translator)
    seen = Observed()
    translator.observers.append(seen)
    return seen
