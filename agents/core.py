"""The harness-neutral streaming contract: feed source words, flush, receive emissions of retracted and new units.

Every system is a `StreamingTranslator`; harness adapters (SimulEval, simulstream) only translate this contract.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, Sequence

from common.stream import Emission, SourceWord
from policies.units import Unit as TargetUnit
from policies.units import join_units


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
        """Record `emission` in `emitted_units` (its first unit joined to the last one where it says so),
        enforcing append-only and exact-suffix retraction."""
        if emission.retract_units:
            if self.append_only:
                raise RuntimeError(f"{type(self).__name__} is append-only but tried to retract {emission.retract_units} units")
            if emission.retract_units > len(self.emitted_units):
                raise RuntimeError(
                    f"cannot retract {emission.retract_units} units: only {len(self.emitted_units)} were emitted"
                )
            del self.emitted_units[len(self.emitted_units) - emission.retract_units :]
        new_units = list(emission.new_units)
        if emission.joins_last_unit:
            if not self.emitted_units:
                raise RuntimeError(f"{type(self).__name__} joined a unit to an empty output")
            self.emitted_units[-1] += new_units.pop(0)
        self.emitted_units.extend(new_units)
        return emission


class SpeechStreamingTranslator(StreamingTranslator):
    """A streaming translator fed audio: 16 kHz mono float32 in [-1, 1]; stream time = samples fed / 16000."""

    SAMPLE_RATE = 16_000

    @abstractmethod
    def feed_audio(self, samples) -> Emission:
        """Add the next audio samples (a 1-D float32 array at 16 kHz) and return what can now be emitted."""

    def feed(self, words: Sequence[SourceWord]) -> Emission:
        raise TypeError(f"{type(self).__name__} reads audio: call feed_audio(samples)")



class SegmentTranslator(Protocol):
    """What the speech cascade drives, one source segment (a committed sentence) at a time: AlignAtt, wait-k,
    LocalAgreement, SSBD and GPE wait-k all fit it; the cascade does not know which policy it runs."""

    target_unit: TargetUnit
    append_only: bool

    def reset(self) -> None:
        """Start a new stream."""

    def revise(self, words: Sequence[SourceWord], now: float | None = None, hold_back: float = 0.0) -> Emission:
        """The live segment's source is now `words` (its tail may have changed): one step. With `now`, a word is
        accessible once it ended `hold_back` seconds before it."""

    def finish_segment(self, words: Sequence[SourceWord]) -> Emission:
        """The segment's source is complete and is `words`: emit the rest of its translation, start the next."""
