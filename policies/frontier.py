"""Source frontier: how many leading source words are accessible to the translation policy.
A word is accessible once its end time lies at least `hold_back` seconds behind the audio received so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def accessible_word_count(end_times: Sequence[float | None], now: float, hold_back: float) -> int:
    """Number of leading source words whose end time is <= ``now - hold_back``.

    The scan stops at the first word that is not accessible, so the result is always a prefix length.
    A word whose end time is None (text input, no timestamps) is accessible.

    All times are seconds on ONE absolute time base: convert ASR word times, which are often relative to the
    re-transcribed audio tail, to the stream's absolute time before calling (the reference implementation
    compared tail-relative end times with absolute `now`, so its hold-back only worked before the first commit).
    A NaN end time is never accessible.
    """
    if math.isnan(hold_back) or hold_back < 0:
        raise ValueError(f"hold_back must be >= 0 seconds, got {hold_back!r}; use 0.0 to disable the hold-back")
    if math.isnan(now):
        raise ValueError("now is NaN; pass the stream time received so far, in seconds")
    cutoff = now - hold_back
    count = 0
    for end_time in end_times:
        if end_time is not None and not end_time <= cutoff:
            break
        count += 1
    return count
