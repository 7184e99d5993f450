"""LocalAgreement (Liu et al., 2020; whisper_streaming's LocalAgreement-2): commit what consecutive hypotheses of
a growing input agree on. One rule for recognised words and translated units alike.
"""

from __future__ import annotations

from collections.abc import Sequence


def agreed_prefix(hypotheses: Sequence[Sequence[str]]) -> int:
    """Length of the longest common prefix of all `hypotheses` (the last n, oldest first); 0 for fewer than 2."""
    if len(hypotheses) < 2:
        return 0
    length = 0
    for items in zip(*hypotheses):
        if any(item != items[0] for item in items[1:]):
            break
        length += 1
    return length
