"""SSBD decision logic: biased verification (Algorithm 1), display-only mask-k, revisions and the paper's measures."""
from __future__ import annotations

import numpy as np
import pytest

from policies.ssbd import (
    SSBDStats,
    accepted_draft_length,
    biased_distribution,
    displayed_units,
    draft_token_survives,
    predicted_speedup,
    revision,
    verification_cost_for,
)


def logits_for(probabilities) -> np.ndarray:
    return np.log(np.asarray(probabilities, dtype=np.float64))


def test_biased_distribution_is_eq3_and_sums_to_one():
    probabilities = np.array([0.5, 0.3, 0.2])
    biased = biased_distribution(logits_for(probabilities), draft_token=2, beta=0.2)
    np.testing.assert_allclose(biased, [0.4, 0.24, 0.16 + 0.2])
    assert biased.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("beta, survives", [(0.0, False), (0.1, False), (0.15, True), (0.2, True)])
def test_draft_token_survives_when_the_bias_lifts_it_over_the_greedy_token(beta, survives):
    # P(draft) = 0.35, P(greedy) = 0.5: kept iff (1-b) 0.35 + b > (1-b) 0.5, i.e. b > 0.15/1.15 = 0.1304.
    row = logits_for([0.5, 0.35, 0.15])
    assert draft_token_survives(row, 1, beta) is survives


def test_greedy_token_always_survives_and_beta_half_accepts_every_draft():
    row = logits_for([0.6, 0.3, 0.1])
    assert all(draft_token_survives(row, 0, beta) for beta in (0.0, 0.2, 1.0))
    # beta >= 0.5: (1-b) p + b >= 0.5 >= (1-b)(1-p) for any other token (the paper's "converges to CD" regime).
    assert draft_token_survives(logits_for([0.98, 0.01, 0.01]), 2, 0.5)


def test_ties_follow_greedy_argmax_at_beta_zero():
    row = np.array([1.0, 1.0, 0.0])
    assert draft_token_survives(row, 0, 0.0)  # argmax takes the first maximum, as greedy decoding does
    assert not draft_token_survives(row, 1, 0.0)


def test_accepted_draft_length_stops_at_the_first_mismatch():
    rows = np.stack([logits_for(p) for p in ([0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.5, 0.4, 0.1], [0.1, 0.1, 0.8])])
    draft = [0, 1, 1, 2]  # row 2 prefers token 0 (0.5 vs 0.4); row 3 would accept token 2
    assert accepted_draft_length(draft, rows, beta=0.0) == 2
    assert accepted_draft_length(draft, rows, beta=0.2) == 4  # 0.8*0.4+0.2 = 0.52 > 0.4
    assert accepted_draft_length([], rows, beta=0.2) == 0
    assert accepted_draft_length([2, 1], rows, beta=0.0) == 0


def test_bad_arguments_are_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="beta must be in"):
        accepted_draft_length([0], np.zeros((1, 3)), beta=1.5)
    with pytest.raises(ValueError, match="logit rows"):
        accepted_draft_length([0, 1], np.zeros((1, 3)), beta=0.2)
    with pytest.raises(ValueError, match="mask_k"):
        displayed_units(["a"], -1, False)


def test_display_only_mask_k_hides_the_tail_of_intermediate_outputs_only():
    units = ["Das", "ist", "ein", "Beispiel"]
    assert displayed_units(units, 0, final=False) == units
    assert displayed_units(units, 3, final=False) == ["Das"]
    assert displayed_units(units, 5, final=False) == []
    assert displayed_units(units, 3, final=True) == units


def test_revision_retracts_an_exact_suffix_then_appends():
    shown = ["Das", "ist", "ein", "Test"]
    retract, new = revision(shown, ["Das", "ist", "kein", "Beispiel", "."])
    assert (retract, new) == (2, ["kein", "Beispiel", "."])
    replayed = shown[: len(shown) - retract] + new
    assert replayed == ["Das", "ist", "kein", "Beispiel", "."]
    assert revision(shown, shown) == (0, [])
    assert revision([], ["a"]) == (0, ["a"])


def test_stats_ratios_follow_the_paper_definitions():
    stats = SSBDStats()
    stats.add_update(draft_tokens=0, accepted_tokens=0, output_tokens=4, generation_seconds=1.0, prompt_seconds=0.5,
                     erased_units=0)
    stats.add_update(draft_tokens=4, accepted_tokens=3, output_tokens=6, generation_seconds=1.0, prompt_seconds=0.5,
                     erased_units=1)
    stats.final_units = 5
    assert stats.acceptance_over_draft == pytest.approx(75.0)
    assert stats.acceptance_over_output == pytest.approx(30.0)
    assert stats.tokens_per_second == pytest.approx(5.0)
    assert stats.end_to_end_tokens_per_second == pytest.approx(10 / 3)
    assert stats.normalized_erasure == pytest.approx(0.2)
    total = SSBDStats()
    total.merge(stats)
    total.merge(stats)
    assert total.accepted_tokens == 6 and total.acceptance_over_draft == pytest.approx(75.0)


def test_cost_model_of_the_speedup():
    # Counting decodes by hand: 10 output tokens, 8 draft tokens verified at 0.5 decode each, 6 accepted, 4 decoded.
    assert predicted_speedup(0.5, 8 / 10, 6 / 10) == pytest.approx(10 / (8 * 0.5 + 4))
    assert predicted_speedup(0.0, 0.8, 0.6) == pytest.approx(1 / 0.4)  # free verification: only decoding counts
    assert predicted_speedup(1.0, 0.0, 0.0) == 1.0  # no draft: re-translation
    r = verification_cost_for(1.5, 0.81, 0.59)
    assert predicted_speedup(r, 0.81, 0.59) == pytest.approx(1.5)
