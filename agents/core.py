"""The harness-neutral streaming contract: feed source words, flush, receive emissions of retracted and new units.

Every system is a `StreamingTranslator`; harness adapters (SimulEval, simulstream) only translate this contract.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Sequence

from policies.units import Unit as TargetUnit
from policies.units import join_units


@dataclass(frozen=True)
class SourceWord:
    """One source word; `end_time` in seconds on the stream's absolute time base (None for text input)."""

    text: str
    end_time: float | None = None


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


class StreamingTranslator(ABC):
    """A streaming translator for one stream at a time; `reset()` starts a new stream with no state carried over."""

    #: True when the translator never retracts (AlignAtt, wait-k); re-translation systems set False.
    append_only: bool = True

    def __init__(self, target_unit: TargetUnit):
        self.target_unit = target_unit
        self.emitted_units: list[str] = []

    def reset(self) -> None:
        self.emitted_units = []

    @abstractmethod
    def feed(self, words: Sequence[SourceWord]) -> Emission:
        """Add newly arrived source words (possibly none) and return what can now be emitted."""

    @abstractmethod
    def flush(self, words: Sequence[SourceWord] = ()) -> Emission:
        """The source is complete (after adding `words`): return everything that is left to emit."""

    @property
    def target_text(self) -> str:
        """The emitted target as text: words joined by spaces, characters concatenated."""
        return join_units(self.emitted_units, self.target_unit)

    def _emit(self, emission: Emission) -> Emission:
        """Record `emission` in `emitted_units`, enforcing append-only and exact-suffix retraction."""
        if emission.retract_units:
            if self.append_only:
                raise RuntimeError(f"{type(self).__name__} is append-only but tried to retract {emission.retract_units} units")
            if emission.retract_units > len(self.emitted_units):
                raise RuntimeError(
                    f"cannot retract {emission.retract_units} units: only {len(self.emitted_units)} were emitted"
                )
            del self.emitted_units[len(self.emitted_units) - emission.retract_units :]
        self.emitted_units.extend(emission.new_units)
        return emission


class SpeechStreamingTranslator(StreamingTranslator):
    """A streaming translator fed audio: 16 kHz mono float32 in [-1, 1]; stream time = samples fed / 16000."""

    SAMPLE_RATE = 16_000

    @abstractmethod
    def feed_audio(self, samples) -> Emission:
        """Add the next audio samples (a 1-D float32 array at 16 kHz) and return what can now be emitted."""

    def feed(self, words: Sequence[SourceWord]) -> Emission:
        raise TypeError(f"{type(self).__name__} reads audio: call feed_audio(samples)")

