"""The words every layer speaks: source words with end times, recognised words with time spans, and emissions of
retracted and new target units. Imports nothing of the package (agents, policies and backends all use it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SourceWord:
    """One source word; `end_time` in seconds on the stream's absolute time base (None for text input)."""

    text: str
    end_time: float | None = None


@dataclass(frozen=True)
class TimedWord:
    """One recognised word as written (with its punctuation, no surrounding spaces) and its time span in seconds
    from the start of the audio passed to `transcribe`."""

    text: str
    start: float
    end: float


@dataclass(frozen=True)
class Emission:
    """What a translator says after a feed: retract the last `retract_units` emitted units, then append `new_units`.

    Units are words for spacing scripts and characters for CJK targets (`policies.units`).
    """

    retract_units: int = 0
    new_units: tuple[str, ...] = ()

    @property
    def is_empty(self) -> bool:
        return self.retract_units == 0 and not self.new_units

    def then(self, later: "Emission") -> "Emission":
        """This emission followed by `later`, as one (`later` may retract into this one's new units)."""
        overlap = min(later.retract_units, len(self.new_units))
        return Emission(self.retract_units + later.retract_units - overlap,
                        self.new_units[: len(self.new_units) - overlap] + tuple(later.new_units))
