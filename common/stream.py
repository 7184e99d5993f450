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

    Units are words for spacing scripts and characters for CJK targets (`policies.units`). With `joins_last_unit`
    the first new unit goes on inside the last unit emitted before it, with no space between them: a draft that
    continues the word a step committed ("Open" + "AI", "Decoder" + "-Module", "Marker" + ", die"). It appends
    text, so append-only translators may join; it never comes with a retraction.
    """

    retract_units: int = 0
    new_units: tuple[str, ...] = ()
    joins_last_unit: bool = False

    def __post_init__(self) -> None:
        if self.joins_last_unit and (self.retract_units or not self.new_units):
            raise ValueError("an emission that joins the last unit appends at least one unit and retracts none")

    @property
    def is_empty(self) -> bool:
        return self.retract_units == 0 and not self.new_units

    def then(self, later: "Emission") -> "Emission":
        """This emission followed by `later`, as one (`later` may retract into this one's new units, or join the
        last of them)."""
        if later.retract_units and self.joins_last_unit:
            raise ValueError("cannot retract after an emission that joined the last unit")
        overlap = min(later.retract_units, len(self.new_units))
        units = self.new_units[: len(self.new_units) - overlap]
        retract = self.retract_units + later.retract_units - overlap
        if later.joins_last_unit and units:
            return Emission(retract, units[:-1] + (units[-1] + later.new_units[0],) + tuple(later.new_units[1:]),
                            self.joins_last_unit)
        return Emission(retract, units + tuple(later.new_units),
                        self.joins_last_unit if units else later.joins_last_unit)
