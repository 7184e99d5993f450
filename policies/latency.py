"""Sentence-level latency from per-token delays d_i (source time consumed when token i was written, e.g. ms of
audio): AL, LAAL and DAL with SimulEval 1.1.4's conventions, for scoring outside SimulEval (e.g. STAR's offline
streaming evaluation).

AL   = (1/τ) Σ_{i≤τ} (d_i − (i−1)/γ),  γ = |Y_ref| / |X|,  τ = the first i with d_i ≥ |X|
LAAL = AL with γ = max(|Y|, |Y_ref|) / |X|
DAL  = (1/|Y|) Σ_i (d′_i − (i−1)/γ),  γ = |Y| / |X|,  d′_1 = d_1,  d′_i = max(d_i, d′_{i−1} + 1/γ)
"""
from __future__ import annotations

from typing import Sequence


def _check(delays: Sequence[float], source_length: float) -> None:
    if not delays:
        raise ValueError("no delays: latency is undefined for an empty output")
    if source_length <= 0:
        raise ValueError(f"source_length must be > 0, got {source_length}")


def _lagging(delays: Sequence[float], source_length: float, gamma: float) -> float:
    if delays[0] > source_length:
        return float(delays[0])
    total, tau = 0.0, 0
    for index, delay in enumerate(delays):
        total += delay - index / gamma
        tau = index + 1
        if delay >= source_length:
            break
    return total / tau


def average_lagging(delays: Sequence[float], source_length: float, reference_length: int | None = None) -> float:
    """AL; γ uses the reference length when given, else the output length."""
    _check(delays, source_length)
    target_length = reference_length if reference_length is not None else len(delays)
    return _lagging(delays, source_length, target_length / source_length)


def length_adaptive_average_lagging(delays: Sequence[float], source_length: float,
                                    reference_length: int | None = None) -> float:
    """LAAL: AL with γ from the longer of the output and the reference (over-generation is not rewarded)."""
    _check(delays, source_length)
    target_length = max(len(delays), reference_length or 0)
    return _lagging(delays, source_length, target_length / source_length)


def differentiable_average_lagging(delays: Sequence[float], source_length: float) -> float:
    """DAL (Cherry and Foster 2019; Arivazhagan et al. 2019), γ = output length / source length."""
    _check(delays, source_length)
    step = source_length / len(delays)  # 1/γ
    total, previous = 0.0, None
    for index, delay in enumerate(delays):
        adjusted = delay if previous is None else max(delay, previous + step)
        total += adjusted - index * step
        previous = adjusted
    return total / len(delays)
