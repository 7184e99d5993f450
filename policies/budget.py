"""How many tokens a draft may take: ratio x source tokens + slack, less what is committed where asked, within
[floor, cap]. Written once for the live and the final drafts."""
from __future__ import annotations

import math


def token_budget(source_tokens: int, ratio: float, slack: int, floor: int, cap: int, committed_tokens: int = 0) -> int:
    """max(floor, min(cap, ceil(ratio x source_tokens) + slack - committed_tokens)): a budget far beyond the source's
    length only buys room for loops, and one that is too short cuts a translation. The AlignAtt4LLM reference code's
    live budget is (1, 8, 4, 16), its final one (3, 24, 32, 160), neither less what is committed."""
    if ratio < 0 or slack < 0 or not 1 <= floor <= cap:
        raise ValueError(f"need ratio >= 0, slack >= 0 and 1 <= floor <= cap, got {ratio}, {slack}, {floor}, {cap}")
    return max(floor, min(cap, math.ceil(ratio * source_tokens) + slack - committed_tokens))
