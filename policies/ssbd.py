"""Self-Speculative Biased Decoding (SSBD, Zeng et al.): the previous output is the draft for the new source, verified
with P' = (1-beta)*P + beta*delta(draft token) up to the first mismatch (Algorithm 1), shown with display-only mask-k.

Pure decision logic on logit rows (numpy) and target units, plus the paper's measures (NE, A/D, A/O, TPS).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

DEFAULT_BETA = 0.2


def check_beta(beta: float) -> float:
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"the SSBD bias beta must be in [0, 1] (paper default {DEFAULT_BETA}), got {beta}")
    return float(beta)


def biased_distribution(logits_row: np.ndarray, draft_token: int, beta: float) -> np.ndarray:
    """P' = (1 - beta) * softmax(logits) + beta * one_hot(draft_token)   (paper Eq. 3)."""
    logits = np.asarray(logits_row, dtype=np.float64)
    probabilities = np.exp(logits - logits.max())
    probabilities /= probabilities.sum()
    biased = (1.0 - beta) * probabilities
    biased[draft_token] += beta
    return biased


def draft_token_survives(logits_row: np.ndarray, draft_token: int, beta: float) -> bool:
    """Algorithm 1, line 7: the draft token is kept iff it is the argmax of P'.

    The greedy token (argmax of the logits, first index on ties, as greedy decoding picks it) is always kept: the
    bias only adds mass to it. Only otherwise is P' computed, so beta = 0 decides exactly as greedy decoding does.
    """
    logits = np.asarray(logits_row)
    if int(np.argmax(logits)) == draft_token:
        return True
    if beta == 0.0:
        return False
    return int(np.argmax(biased_distribution(logits, draft_token, beta))) == draft_token


def accepted_draft_length(draft_tokens: Sequence[int], logit_rows: np.ndarray, beta: float) -> int:
    """How many leading draft tokens survive biased verification (Algorithm 1, lines 4-11).

    `logit_rows[i]` is the model's next-token logits after the prompt and draft[:i] (row 0: after the prompt alone);
    verification stops at the first draft token that is not the argmax of P'.
    """
    check_beta(beta)
    if len(logit_rows) < len(draft_tokens):
        raise ValueError(f"{len(draft_tokens)} draft tokens need at least as many logit rows, got {len(logit_rows)}")
    for index, token in enumerate(draft_tokens):
        if not draft_token_survives(logit_rows[index], int(token), beta):
            return index
    return len(draft_tokens)


def displayed_units(units: Sequence[str], mask_k: int, final: bool) -> list[str]:
    """Display-only mask-k: an intermediate output hides its last k units (they stay in the draft); a final one
    shows everything."""
    if mask_k < 0:
        raise ValueError(f"mask_k must be >= 0, got {mask_k}")
    units = list(units)
    if final or mask_k == 0:
        return units
    return units[: max(0, len(units) - mask_k)]


def common_prefix_length(a: Sequence, b: Sequence) -> int:
    length = 0
    for left, right in zip(a, b):
        if left != right:
            break
        length += 1
    return length


def revision(shown: Sequence[str], displayed: Sequence[str]) -> tuple[int, list[str]]:
    """From `shown` to `displayed`: retract the shown units after the common prefix (an exact suffix), then append
    the rest of `displayed`. Returns (units to retract, new units)."""
    keep = common_prefix_length(shown, displayed)
    return len(shown) - keep, list(displayed[keep:])


@dataclass
class SSBDStats:
    """Running totals of one or more streams; ratios follow the paper's definitions (§4.1).

    erased_units: units retracted from the display (sum over updates of |shown| - |common prefix|);
    final_units: units of the final outputs; draft_tokens / accepted_tokens: verified and accepted draft tokens;
    output_tokens: tokens of all outputs (accepted + decoded); generation_seconds: draft verification + decoding
    (wall clock; the *_cpu_seconds fields are the same spans in process CPU time, robust to a shared machine);
    verification_cpu_seconds: the draft-verification part of generation_cpu_seconds.
    """

    updates: int = 0
    erased_units: int = 0
    final_units: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    output_tokens: int = 0
    generation_seconds: float = 0.0
    prompt_seconds: float = 0.0
    generation_cpu_seconds: float = 0.0
    prompt_cpu_seconds: float = 0.0
    verification_cpu_seconds: float = 0.0

    def add_update(self, draft_tokens: int, accepted_tokens: int, output_tokens: int, generation_seconds: float,
                   prompt_seconds: float, erased_units: int, generation_cpu_seconds: float = 0.0,
                   prompt_cpu_seconds: float = 0.0, verification_cpu_seconds: float = 0.0) -> None:
        self.updates += 1
        self.draft_tokens += draft_tokens
        self.accepted_tokens += accepted_tokens
        self.output_tokens += output_tokens
        self.generation_seconds += generation_seconds
        self.prompt_seconds += prompt_seconds
        self.erased_units += erased_units
        self.generation_cpu_seconds += generation_cpu_seconds
        self.prompt_cpu_seconds += prompt_cpu_seconds
        self.verification_cpu_seconds += verification_cpu_seconds

    def merge(self, other: "SSBDStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def normalized_erasure(self) -> float:
        """NE (Arivazhagan et al. 2020): erased units per unit of final output."""
        return self.erased_units / self.final_units if self.final_units else 0.0

    @property
    def acceptance_over_draft(self) -> float:
        """A/D in percent: accepted draft tokens over verified draft tokens."""
        return 100.0 * self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def acceptance_over_output(self) -> float:
        """A/O in percent: accepted draft tokens over output tokens."""
        return 100.0 * self.accepted_tokens / self.output_tokens if self.output_tokens else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of generation (verification + decoding; prompt prefill excluded, as the paper)."""
        return self.output_tokens / self.generation_seconds if self.generation_seconds else 0.0

    @property
    def cpu_tokens_per_second(self) -> float:
        """Output tokens per CPU second of generation (verification + decoding)."""
        return self.output_tokens / self.generation_cpu_seconds if self.generation_cpu_seconds else 0.0

    @property
    def end_to_end_tokens_per_second(self) -> float:
        """Output tokens per second including the prompt prefill of every update."""
        total = self.generation_seconds + self.prompt_seconds
        return self.output_tokens / total if total else 0.0


def predicted_speedup(verification_cost: float, draft_share: float, accepted_share: float) -> float:
    """SSBD's generation speedup over re-translation from its costs: per output token, re-translation decodes one
    token; SSBD verifies `draft_share` = D/O draft tokens at `verification_cost` = r decodes each and decodes the
    rest, 1 - A/O. Speedup = 1 / (r * D/O + 1 - A/O)."""
    return 1.0 / (verification_cost * draft_share + 1.0 - accepted_share)


def verification_cost_for(speedup: float, draft_share: float, accepted_share: float) -> float:
    """The verification cost r (in decodes per draft token) at which `predicted_speedup` reaches `speedup`."""
    return (1.0 / speedup - (1.0 - accepted_share)) / draft_share
