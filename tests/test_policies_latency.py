"""Tests for policies.latency: AL, LAAL and DAL against hand computations and SimulEval's own scorers."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from policies.latency import average_lagging, differentiable_average_lagging, length_adaptive_average_lagging


def test_dal_by_hand() -> None:
    # 4 tokens over 2000 ms: 1/γ = 500. d' = 600, max(700, 1100) = 1100, max(900, 1600) = 1600, max(2000, 2100) = 2100
    # DAL = ((600 - 0) + (1100 - 500) + (1600 - 1000) + (2100 - 1500)) / 4 = 600
    assert differentiable_average_lagging([600, 700, 900, 2000], 2000) == pytest.approx(600.0)


def test_al_and_laal_by_hand() -> None:
    delays = [600, 700, 900, 2000, 2000]
    # AL with a 4-word reference: 1/γ = 500; τ = 4 (first delay reaching 2000 ms)
    # ((600 - 0) + (700 - 500) + (900 - 1000) + (2000 - 1500)) / 4 = 300
    assert average_lagging(delays, 2000, reference_length=4) == pytest.approx(300.0)
    # LAAL uses max(5 output, 4 reference) = 5 words: 1/γ = 400 -> (600 + 300 + 100 + 800) / 4 = 450
    assert length_adaptive_average_lagging(delays, 2000, reference_length=4) == pytest.approx(450.0)


def test_first_delay_past_the_source_is_the_lag() -> None:
    assert average_lagging([2500, 2600], 2000, 2) == 2500


@pytest.mark.parametrize("delays, source, reference", [
    ([105.0, 145.0, 145.0, 300.0, 820.0, 1000.0], 1000.0, 5),
    ([40.0, 80.0, 400.0], 1200.0, 6),
    ([900.0, 900.0, 900.0, 900.0], 900.0, 3),
])
def test_equal_to_simuleval_scorers(delays, source, reference) -> None:
    scorers = pytest.importorskip("simuleval.evaluator.scorers.latency_scorer")
    instance = SimpleNamespace(delays=delays, source_length=source, reference="x", reference_length=reference)
    for scorer, ours in ((scorers.ALScorer, average_lagging(delays, source, reference)),
                         (scorers.LAALScorer, length_adaptive_average_lagging(delays, source, reference)),
                         (scorers.DALScorer, differentiable_average_lagging(delays, source))):
        assert scorer().compute(instance) == pytest.approx(ours)


def test_empty_output_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty output"):
        differentiable_average_lagging([], 1000)
