"""Tests for policies.alignatt: online z-score, median filter and the first-failure AlignAtt scan."""

from __future__ import annotations

import numpy as np
import pytest

from policies.alignatt import AlignAttParams, OnlineZScore, ScanResult, TokenDecision, median_filter, scan_draft

NO_FILTER = AlignAttParams(median_width=1)  # golden cases with one-token peaks: width 7 would smooth them away


# --- independent references -------------------------------------------------------------------------------------------

def batch_zscore(previous_rows: np.ndarray, row: np.ndarray) -> np.ndarray:
    """z-score of ``row`` against the batch mean/std of ``previous_rows`` [n, H, S]; raw row while n < 2."""
    if len(previous_rows) < 2:
        return row.copy()
    std = np.maximum(previous_rows.std(axis=0), 1e-6)
    return (row - previous_rows.mean(axis=0)) / std


def naive_median_filter(x: np.ndarray, width: int) -> np.ndarray:
    half = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="edge")
    out = np.empty_like(x, dtype=np.float64)
    for position in range(x.shape[-1]):
        out[..., position] = np.median(padded[..., position : position + width], axis=-1)
    return out


def reference_scan(rows: np.ndarray, token_word: np.ndarray, accessible_words: int,
                   params: AlignAttParams) -> tuple[int, list[tuple]]:
    """Loop-by-loop reimplementation of the scan with batch statistics; decisions as plain tuples."""
    decisions: list[tuple] = []
    for t in range(rows.shape[0]):
        row = rows[t]
        if not np.isfinite(row).all():
            decisions.append((t, None, "nonfinite"))
            return t, decisions
        z = batch_zscore(rows[:t], row)
        if params.head_vote == "mean":
            filtered = naive_median_filter(z.mean(axis=0), params.median_width)
            peak_token = int(np.flatnonzero(filtered == filtered.max())[0])
        else:  # the reference code's vote: each head's first argmax, then sorted[(n - 1) // 2]
            head_peaks = []
            for head in z:
                filtered = naive_median_filter(head, params.median_width)
                head_peaks.append(int(np.flatnonzero(filtered == filtered.max())[0]))
            peak_token = sorted(head_peaks)[(len(head_peaks) - 1) // 2]
        word = int(token_word[peak_token])
        mean_row = row.mean(axis=0)
        accessible = sum(mean_row[s] for s in range(len(token_word)) if token_word[s] < accessible_words)
        inaccessible = sum(mean_row[s] for s in range(len(token_word)) if token_word[s] >= accessible_words)
        argmax_mass = sum(mean_row[s] for s in range(len(token_word)) if token_word[s] == word)
        frontier = accessible_words + params.border
        frontier_mass = sum(mean_row[s] for s in range(len(token_word)) if token_word[s] >= frontier)
        failure = None
        if word >= frontier and frontier_mass >= params.frontier_min_mass:
            failure = "source_frontier"
        elif argmax_mass < params.argmax_mass_threshold:
            failure = "argmax_mass_weak"
        elif accessible < params.source_mass_threshold:
            failure = "provenance_weak"
        decisions.append((t, word, failure, accessible, inaccessible, argmax_mass))
        if failure:
            return t, decisions
    return rows.shape[0], decisions


def peak_rows(peaks: list[int | list[int]], n_source: int, n_heads: int = 2,
              peak: float = 0.1, background: float = 0.01) -> np.ndarray:
    """Draft rows where every head of token t puts ``peak`` on the source token(s) peaks[t], background elsewhere."""
    rows = np.full((len(peaks), n_heads, n_source), background)
    for t, columns in enumerate(peaks):
        rows[t, :, columns] = peak
    return rows


# --- OnlineZScore -----------------------------------------------------------------------------------------------------

def test_online_zscore_matches_batch_statistics_at_every_step() -> None:
    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(20), size=(12, 3))[:, :, :9]  # [T, H, S] source slice of full rows
    stats = OnlineZScore(3, 9)
    for t, row in enumerate(rows):
        z = stats.normalize(row)
        np.testing.assert_allclose(z, batch_zscore(rows[:t], row), rtol=1e-9, atol=1e-9)
        assert stats.count == t
        stats.update(row)


def test_online_zscore_raw_rule_for_first_two_rows() -> None:
    rows = np.array([[[0.2, 0.1]], [[0.4, 0.3]], [[0.6, 0.1]]])
    stats = OnlineZScore(1, 2)
    np.testing.assert_array_equal(stats.normalize(rows[0]), rows[0])
    stats.update(rows[0])
    np.testing.assert_array_equal(stats.normalize(rows[1]), rows[1])  # one previous row: still raw
    stats.update(rows[1])
    # two previous rows: mean [0.3, 0.2], std [0.1, 0.1]
    np.testing.assert_allclose(stats.normalize(rows[2]), [[3.0, -1.0]])


def test_online_zscore_clamps_std_of_constant_columns() -> None:
    stats = OnlineZScore(1, 2)
    for _ in range(3):
        stats.update(np.array([[0.5, 0.25]]))
    z = stats.normalize(np.array([[0.5, 0.25 + 1e-3]]))
    assert z[0, 0] == 0.0  # unchanged constant column: exactly 0, no division by zero
    np.testing.assert_allclose(z[0, 1], 1e-3 / 1e-6)


def test_online_zscore_normalize_does_not_update() -> None:
    stats = OnlineZScore(1, 1)
    for value in (0.1, 0.3):
        stats.update(np.array([[value]]))
    first = stats.normalize(np.array([[0.9]]))
    second = stats.normalize(np.array([[0.9]]))
    np.testing.assert_array_equal(first, second)
    assert stats.count == 2


def test_online_zscore_rejects_wrong_shape() -> None:
    stats = OnlineZScore(2, 3)
    with pytest.raises(ValueError, match="shape"):
        stats.normalize(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="shape"):
        stats.update(np.zeros(3))


# --- median_filter ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [1, 3, 5, 7, 9])
@pytest.mark.parametrize("shape", [(1,), (2,), (6,), (7,), (13,), (3, 8), (2, 3, 5)])
def test_median_filter_matches_naive(width: int, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(width * 100 + sum(shape))
    x = rng.normal(size=shape)
    np.testing.assert_array_equal(median_filter(x, width), naive_median_filter(x, width))


def test_median_filter_golden() -> None:
    x = np.array([5.0, 0.0, 0.0, 9.0, 0.0, 1.0, 1.0])
    np.testing.assert_array_equal(median_filter(x, 3), [5.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    # edge padding: [5,5,5 | 5,0,0,9,0,1,1 | 1,1,1]
    np.testing.assert_array_equal(median_filter(x, 7), [5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0])


def test_median_filter_width_one_is_identity_copy() -> None:
    x = np.array([[3.0, 1.0, 2.0]])
    out = median_filter(x, 1)
    np.testing.assert_array_equal(out, x)
    out[0, 0] = -1.0
    assert x[0, 0] == 3.0


def test_median_filter_removes_single_spikes_and_keeps_wide_peaks() -> None:
    spike = np.zeros(15)
    spike[7] = 1.0
    assert median_filter(spike, 7).max() == 0.0
    plateau = np.zeros(15)
    plateau[6:10] = 1.0  # 4 wide: survives a width-7 window
    np.testing.assert_array_equal(median_filter(plateau, 7) == 1.0, plateau == 1.0)


@pytest.mark.parametrize("width", [0, -1, 2, 8, 3.0, True])
def test_median_filter_rejects_bad_width(width: int) -> None:
    with pytest.raises(ValueError, match="odd integer"):
        median_filter(np.zeros(5), width)


# --- AlignAttParams ---------------------------------------------------------------------------------------------------

def test_params_defaults_gate_on_words_not_yet_accessible() -> None:
    assert AlignAttParams() == AlignAttParams(border=0, argmax_mass_threshold=0.0, source_mass_threshold=0.0,
                                              median_width=7)


@pytest.mark.parametrize("border", [1, 0, -1, -2])
def test_the_frontier_rule_is_one_equation_for_every_border(border: int) -> None:
    """Token t fails iff the word of its peak >= N_acc + b, for every peak word and every N_acc (text: N_acc = all
    words read; speech: the words that ended hold_back before now)."""
    n_words = 6
    for accessible in range(n_words + 1):
        for peak_word in range(n_words):
            result = scan_draft(peak_rows([peak_word], n_source=n_words), np.arange(n_words), accessible,
                                AlignAttParams(border=border, median_width=1))
            assert (result.accepted_tokens == 0) == (peak_word >= accessible + border)


def test_border_one_never_fires_with_one_inaccessible_word_and_border_zero_does() -> None:
    """The speech cascade's usual state: only the last live word is inside the hold-back. Random drafts over 10
    source words: border 1 (in words) can reject nothing, border 0 rejects every token whose peak is on the last
    word, border -1 also those on the last accessible word."""
    rng = np.random.default_rng(3)
    n_words, accessible = 10, 9
    rejected = {1: 0, 0: 0, -1: 0}
    peaks_on_last, peaks_on_last_two = 0, 0
    for _ in range(300):
        rows = rng.dirichlet(np.ones(n_words), size=(1, 2))
        peak = int(np.argmax(rows[0].mean(axis=0)))
        peaks_on_last += peak == n_words - 1
        peaks_on_last_two += peak >= n_words - 2
        for border in rejected:
            result = scan_draft(rows, np.arange(n_words), accessible, AlignAttParams(border=border, median_width=1))
            rejected[border] += result.accepted_tokens == 0
    assert rejected[1] == 0
    assert rejected[0] == peaks_on_last > 0
    assert rejected[-1] == peaks_on_last_two > peaks_on_last


@pytest.mark.parametrize("kwargs, message", [
    ({"median_width": 4}, "median_width"),
    ({"median_width": 0}, "median_width"),
    ({"border": 1.5}, "border"),
    ({"border": True}, "border"),
    ({"argmax_mass_threshold": float("nan")}, "argmax_mass_threshold"),
    ({"source_mass_threshold": float("inf")}, "source_mass_threshold"),
    ({"frontier_min_mass": float("nan")}, "frontier_min_mass"),
    ({"head_vote": "median"}, "head_vote must be one of"),
])
def test_params_validation(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AlignAttParams(**kwargs)


def test_params_are_frozen() -> None:
    with pytest.raises(AttributeError):
        AlignAttParams().border = 2  # type: ignore[misc]


# --- scan_draft golden cases ------------------------------------------------------------------------------------------

def test_third_token_peaking_on_inaccessible_word_stops_the_scan_at_two() -> None:
    token_word = np.arange(6)  # one token per word
    rows = peak_rows([0, 1, 5, 2], n_source=6)  # token 2 looks at word 5; only words 0..2 are accessible
    result = scan_draft(rows, token_word, accessible_words=3, params=NO_FILTER)
    assert result.accepted_tokens == 2
    assert [d.failure for d in result.decisions] == [None, None, "source_frontier"]
    assert [d.source_word for d in result.decisions] == [0, 1, 5]
    assert [d.index for d in result.decisions] == [0, 1, 2]


def test_third_token_stop_with_default_median_filter_and_multi_token_words() -> None:
    token_word = np.repeat(np.arange(6), 4)  # 6 words of 4 tokens: word peaks are 4 tokens wide
    word_columns = [list(range(4 * w, 4 * w + 4)) for w in range(6)]
    rows = peak_rows([word_columns[0], word_columns[1], word_columns[5]], n_source=24, peak=0.05, background=0.005)
    result = scan_draft(rows, token_word, accessible_words=3)  # default params: b=0, width 7
    assert result.accepted_tokens == 2
    assert [d.source_word for d in result.decisions] == [0, 1, 5]
    assert result.decisions[-1].failure == "source_frontier"


@pytest.mark.parametrize("peak_word, accepted", [(2, True), (3, True), (4, False), (5, False)])
def test_border_one_lets_the_first_inaccessible_word_through(peak_word: int, accepted: bool) -> None:
    rows = peak_rows([peak_word], n_source=6)
    result = scan_draft(rows, np.arange(6), accessible_words=3, params=AlignAttParams(border=1, median_width=1))
    assert result.accepted_tokens == (1 if accepted else 0)
    assert result.decisions[0].failure == (None if accepted else "source_frontier")


@pytest.mark.parametrize("border, last_accepted_word", [(0, 2), (1, 3), (2, 4), (-1, 1), (-3, -1)])
def test_border_moves_the_frontier_in_words(border: int, last_accepted_word: int) -> None:
    params = AlignAttParams(border=border, median_width=1)
    for peak_word in range(6):
        result = scan_draft(peak_rows([peak_word], n_source=6), np.arange(6), accessible_words=3, params=params)
        assert (result.accepted_tokens == 1) == (peak_word <= last_accepted_word), peak_word


def test_negative_border_reproduces_original_alignatt_on_text_input() -> None:
    """Fully accessible source (text), b = -f: stop when attention falls on the last f = 2 words."""
    params = AlignAttParams(border=-2, median_width=1)
    rows = peak_rows([0, 1, 2, 3, 0], n_source=5)  # token 3 looks at word 3, one of the last two
    result = scan_draft(rows, np.arange(5), accessible_words=5, params=params)
    assert result.accepted_tokens == 3
    assert result.decisions[-1].source_word == 3
    assert result.decisions[-1].failure == "source_frontier"
    assert result.decisions[-1].inaccessible_mass == 0.0  # nothing is inaccessible in text input


HELLO_TOKENS = ["Hello", ",", " world", ",", " how", " are", " you"]
HELLO_TOKEN_WORD = np.array([0, 0, 1, 1, 2, 3, 4])  # words: "Hello," "world," "how" "are" "you"


@pytest.mark.parametrize("border", [0, 1])
def test_frontier_counts_words_not_tokens(border: int) -> None:
    """Notes §9.1: with 3 accessible words ("Hello, world, how"), the reference compared the peak's TOKEN index (4,
    ' how') with the count of accessible tokens (3) and blocked ' how' even with b=1. In words, ' how' is word 2,
    inside the frontier (2 < 3 + b), and its mass is accessible."""
    how = HELLO_TOKENS.index(" how")
    rows = peak_rows([how], n_source=len(HELLO_TOKENS), n_heads=4, peak=0.3, background=0.02)
    params = AlignAttParams(border=border, median_width=1)
    result = scan_draft(rows, HELLO_TOKEN_WORD, accessible_words=3, params=params)
    decision = result.decisions[0]
    assert result.accepted_tokens == 1 and decision.failure is None
    assert decision.source_word == 2
    np.testing.assert_allclose(decision.accessible_mass, 4 * 0.02 + 0.3)  # Hello , world , how
    np.testing.assert_allclose(decision.inaccessible_mass, 2 * 0.02)  # are you
    np.testing.assert_allclose(decision.argmax_mass, 0.3)


@pytest.mark.parametrize("border, peak_token, accepted", [
    (0, " are", False), (1, " are", True), (1, " you", False), (2, " you", True),
])
def test_hello_world_frontier_beyond_the_accessible_words(border: int, peak_token: str, accepted: bool) -> None:
    rows = peak_rows([HELLO_TOKENS.index(peak_token)], n_source=len(HELLO_TOKENS))
    params = AlignAttParams(border=border, median_width=1)
    result = scan_draft(rows, HELLO_TOKEN_WORD, accessible_words=3, params=params)
    assert (result.accepted_tokens == 1) == accepted


def test_argmax_mass_sums_the_tokens_of_the_peak_word() -> None:
    rows = np.zeros((1, 1, 7))
    rows[0, 0, :] = [0.01, 0.02, 0.01, 0.02, 0.30, 0.01, 0.01]
    result = scan_draft(rows, HELLO_TOKEN_WORD, accessible_words=5, params=NO_FILTER)
    assert result.decisions[0].source_word == 2
    np.testing.assert_allclose(result.decisions[0].argmax_mass, 0.30)
    rows[0, 0, :] = [0.20, 0.05, 0.01, 0.02, 0.01, 0.01, 0.01]
    result = scan_draft(rows, HELLO_TOKEN_WORD, accessible_words=5, params=NO_FILTER)
    assert result.decisions[0].source_word == 0
    np.testing.assert_allclose(result.decisions[0].argmax_mass, 0.25)  # both tokens of "Hello,"


def test_heads_are_averaged_not_voted() -> None:
    """One strong head on token 5 outweighs three weak heads on token 1 (a lower-median vote would pick token 1)."""
    rows = np.full((1, 4, 6), 0.01)
    rows[0, 0, 5] = 0.9
    rows[0, 1:, 1] = 0.2
    result = scan_draft(rows, np.arange(6), accessible_words=6, params=NO_FILTER)
    assert result.decisions[0].source_word == 5


def test_the_reference_codes_lower_median_vote_follows_the_weak_majority() -> None:
    """The same row under head_vote="lower_median": the heads' peaks sorted are 1, 1, 1, 5, and the lower median
    (the 2nd of 4) is 1; with two heads on 5 and two on 1 it is still the lower one."""
    rows = np.full((1, 4, 6), 0.01)
    rows[0, 0, 5] = 0.9
    rows[0, 1:, 1] = 0.2
    vote = AlignAttParams(median_width=1, head_vote="lower_median")
    assert scan_draft(rows, np.arange(6), accessible_words=6, params=vote).decisions[0].source_word == 1
    rows[0, 1, 5] = 0.9
    assert scan_draft(rows, np.arange(6), accessible_words=6, params=vote).decisions[0].source_word == 1
    # the vote makes the gate more permissive here: word 5 is not accessible, the mean's peak fails, the vote's not
    assert scan_draft(rows, np.arange(6), accessible_words=5, params=vote).accepted_tokens == 1
    assert scan_draft(rows, np.arange(6), accessible_words=5, params=NO_FILTER).accepted_tokens == 0


def test_ties_take_the_first_source_token() -> None:
    rows = np.full((1, 2, 5), 0.1)
    result = scan_draft(rows, np.arange(5), accessible_words=0, params=AlignAttParams(border=1, median_width=1))
    assert result.decisions[0].source_word == 0
    assert result.accepted_tokens == 1


def test_zscore_moves_the_peak_away_from_a_constant_sink() -> None:
    """A constant attention sink on word 0 wins the raw argmax; from the third token on, z-scoring removes it."""
    rows = np.full((3, 2, 6), 0.01)
    rows[:, :, 0] = 0.5  # sink
    rows[2, :, 5] = 0.05  # the third token weakly attends the inaccessible word 5
    result = scan_draft(rows, np.arange(6), accessible_words=3, params=NO_FILTER)
    assert [d.source_word for d in result.decisions] == [0, 0, 5]
    assert result.accepted_tokens == 2
    assert result.decisions[-1].failure == "source_frontier"


def test_statistics_only_use_accepted_previous_rows() -> None:
    """Token 2's z-score uses rows 0 and 1: changing a LATER row does not change decisions up to token 2."""
    rng = np.random.default_rng(5)
    rows = rng.dirichlet(np.ones(12), size=(5, 3))[:, :, :8]
    token_word = np.array([0, 0, 1, 2, 2, 3, 4, 5])
    first = scan_draft(rows, token_word, accessible_words=6, params=AlignAttParams(border=0))
    changed = rows.copy()
    changed[4] = rng.dirichlet(np.ones(12), size=3)[:, :8]
    second = scan_draft(changed, token_word, accessible_words=6, params=AlignAttParams(border=0))
    assert first.decisions[:4] == second.decisions[:4]


# --- thresholds -------------------------------------------------------------------------------------------------------

def test_argmax_mass_threshold_fires() -> None:
    rows = peak_rows([0, 1, 2], n_source=4, peak=0.1, background=0.01)
    rows[1, :, 1] = 0.04  # token 1 peaks weakly
    params = AlignAttParams(argmax_mass_threshold=0.05, median_width=1)
    result = scan_draft(rows, np.arange(4), accessible_words=4, params=params)
    assert result.accepted_tokens == 1
    assert result.decisions[-1].failure == "argmax_mass_weak"
    np.testing.assert_allclose(result.decisions[-1].argmax_mass, 0.04)
    relaxed = scan_draft(rows, np.arange(4), accessible_words=4, params=AlignAttParams(argmax_mass_threshold=0.04,
                                                                                         median_width=1))
    assert relaxed.accepted_tokens == 3  # the comparison is strict: mass == threshold passes


def test_source_mass_threshold_fires() -> None:
    rows = peak_rows([0, 1], n_source=4, peak=0.1, background=0.01)
    rows[1] *= 0.5  # token 1 attends the source weakly overall: pi_acc = (0.05 + 0.005) for 2 accessible words
    params = AlignAttParams(source_mass_threshold=0.1, median_width=1)
    result = scan_draft(rows, np.arange(4), accessible_words=2, params=params)
    assert result.accepted_tokens == 1
    assert result.decisions[-1].failure == "provenance_weak"
    np.testing.assert_allclose(result.decisions[-1].accessible_mass, 0.055)
    np.testing.assert_allclose(result.decisions[-1].inaccessible_mass, 0.01)


def test_failure_order_frontier_then_argmax_mass_then_provenance() -> None:
    rows = peak_rows([3], n_source=4, peak=0.02, background=0.001)  # beyond the frontier, weak and low provenance
    strict = AlignAttParams(border=0, argmax_mass_threshold=0.5, source_mass_threshold=0.5, median_width=1)
    assert scan_draft(rows, np.arange(4), 2, strict).decisions[0].failure == "source_frontier"
    no_frontier = AlignAttParams(border=5, argmax_mass_threshold=0.5, source_mass_threshold=0.5, median_width=1)
    assert scan_draft(rows, np.arange(4), 2, no_frontier).decisions[0].failure == "argmax_mass_weak"
    provenance_only = AlignAttParams(border=5, source_mass_threshold=0.5, median_width=1)
    assert scan_draft(rows, np.arange(4), 2, provenance_only).decisions[0].failure == "provenance_weak"


# --- non-finite rows and masses ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nonfinite_row_stops_the_scan(bad: float) -> None:
    rows = peak_rows([0, 1, 2, 0], n_source=4)
    rows[2, 1, 3] = bad
    result = scan_draft(rows, np.arange(4), accessible_words=4, params=NO_FILTER)
    assert result.accepted_tokens == 2
    last = result.decisions[-1]
    assert last.failure == "nonfinite" and last.index == 2 and last.source_word is None
    assert np.isnan(last.accessible_mass) and np.isnan(last.argmax_mass)


def test_nonfinite_first_row_accepts_nothing() -> None:
    rows = np.full((2, 1, 3), np.nan)
    result = scan_draft(rows, np.arange(3), accessible_words=3)
    assert result.accepted_tokens == 0 and len(result.decisions) == 1


def test_masses_split_the_head_averaged_source_mass() -> None:
    rng = np.random.default_rng(1)
    rows = rng.dirichlet(np.ones(30), size=(6, 4))[:, :, :10]  # source slice sums to < 1
    token_word = np.array([0, 1, 1, 1, 2, 3, 3, 4, 5, 5])
    result = scan_draft(rows, token_word, accessible_words=3, params=AlignAttParams(border=10))
    assert result.accepted_tokens == 6
    for decision in result.decisions:
        mean_row = rows[decision.index].mean(axis=0)
        np.testing.assert_allclose(decision.accessible_mass, mean_row[:5].sum())
        np.testing.assert_allclose(decision.inaccessible_mass, mean_row[5:].sum())
        np.testing.assert_allclose(decision.accessible_mass + decision.inaccessible_mass, mean_row.sum())
        assert decision.accessible_mass + decision.inaccessible_mass <= 1.0
        assert 0.0 <= decision.argmax_mass <= decision.accessible_mass + decision.inaccessible_mass


@pytest.mark.parametrize("accessible_words, expected_accessible", [(0, 0.0), (5, 1.0)])
def test_masses_at_the_extremes(accessible_words: int, expected_accessible: float) -> None:
    rows = np.full((1, 1, 5), 0.2)
    result = scan_draft(rows, np.arange(5), accessible_words=accessible_words, params=AlignAttParams(border=5))
    np.testing.assert_allclose(result.decisions[0].accessible_mass, expected_accessible)
    np.testing.assert_allclose(result.decisions[0].inaccessible_mass, 1.0 - expected_accessible)


# --- whole-scan invariants against the independent reference ----------------------------------------------------------

def random_case(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, AlignAttParams]:
    n_tokens, n_heads, n_source = rng.integers(0, 9), rng.integers(1, 5), rng.integers(1, 14)
    rows = rng.dirichlet(np.full(n_source + 8, 0.3), size=(n_tokens, n_heads))[:, :, :n_source]
    if n_tokens and rng.random() < 0.15:
        rows[rng.integers(n_tokens), rng.integers(n_heads), rng.integers(n_source)] = np.nan
    steps = rng.integers(0, 2, size=n_source - 1)
    token_word = np.concatenate([[0], np.cumsum(steps)]).astype(np.int64)
    n_words = int(token_word[-1]) + 1
    params = AlignAttParams(
        border=int(rng.integers(-2, 3)),
        argmax_mass_threshold=float(rng.choice([0.0, 0.02, 0.1])),
        source_mass_threshold=float(rng.choice([0.0, 0.05, 0.3])),
        median_width=int(rng.choice([1, 3, 5, 7])),
        frontier_min_mass=float(rng.choice([0.0, 0.0, 0.03, 0.2])),
        head_vote=str(rng.choice(["mean", "lower_median"])),
    )
    return rows, token_word, int(rng.integers(0, n_words + 1)), params


@pytest.mark.parametrize("seed", range(40))
def test_scan_matches_reference_implementation(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(10):
        rows, token_word, accessible_words, params = random_case(rng)
        result = scan_draft(rows, token_word, accessible_words, params)
        expected_accepted, expected = reference_scan(rows, token_word, accessible_words, params)
        assert isinstance(result, ScanResult)
        assert result.accepted_tokens == expected_accepted
        assert len(result.decisions) == len(expected)
        for decision, reference in zip(result.decisions, expected):
            assert isinstance(decision, TokenDecision)
            assert (decision.index, decision.source_word, decision.failure) == reference[:3]
            if decision.failure != "nonfinite":
                np.testing.assert_allclose(
                    [decision.accessible_mass, decision.inaccessible_mass, decision.argmax_mass], reference[3:])
        # Structure: every decision before the last is an acceptance; the last is the failure if the scan stopped.
        assert all(d.failure is None for d in result.decisions[: result.accepted_tokens])
        stopped = result.accepted_tokens < rows.shape[0]
        assert len(result.decisions) == result.accepted_tokens + int(stopped)
        if stopped:
            assert result.decisions[-1].failure is not None


def test_empty_draft() -> None:
    result = scan_draft(np.zeros((0, 2, 3)), np.arange(3), accessible_words=1)
    assert result == ScanResult(0, ())


def test_fully_accessible_large_border_accepts_everything() -> None:
    rng = np.random.default_rng(9)
    rows = rng.dirichlet(np.ones(10), size=(7, 2))[:, :, :6]
    result = scan_draft(rows, np.arange(6), accessible_words=6, params=AlignAttParams(border=1))
    assert result.accepted_tokens == 7 and len(result.decisions) == 7


# --- input validation -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, token_word, accessible_words, message", [
    (np.zeros((2, 3)), np.arange(3), 1, "3-D"),
    (np.zeros((2, 1, 0)), np.zeros(0, dtype=int), 0, "S == 0"),
    (np.zeros((2, 0, 3)), np.arange(3), 1, "H == 0"),
    (np.zeros((2, 1, 3)), np.arange(4), 1, "one word index per source token"),
    (np.zeros((2, 1, 3)), np.arange(3).reshape(3, 1), 1, "1-D"),
    (np.zeros((2, 1, 3)), np.array([0.0, 1.0, 2.0]), 1, "integer"),
    (np.zeros((2, 1, 3)), np.array([1, 1, 2]), 1, "start at 0"),
    (np.zeros((2, 1, 3)), np.array([0, 2, 2]), 1, "non-decreasing"),
    (np.zeros((2, 1, 3)), np.array([0, 1, 0]), 1, "non-decreasing"),
    (np.zeros((2, 1, 3)), np.array([0, 1, 1]), 3, r"\[0, 2\]"),
    (np.zeros((2, 1, 3)), np.array([0, 1, 1]), -1, "accessible_words"),
    (np.zeros((2, 1, 3)), np.array([0, 1, 1]), 1.0, "accessible_words"),
])
def test_scan_validation(rows: np.ndarray, token_word: np.ndarray, accessible_words: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        scan_draft(rows, token_word, accessible_words, AlignAttParams())


def test_incremental_scanner_matches_the_batch_scan_and_refuses_to_go_past_a_failure():
    from policies.alignatt import DraftScanner

    generator = np.random.default_rng(7)
    token_word = np.array([0, 0, 1, 2, 2, 3, 4, 5])
    for _ in range(50):
        rows = generator.dirichlet(np.ones(8), size=(9, 3)) * 0.5
        params = AlignAttParams(border=int(generator.integers(-2, 2)), median_width=3)
        accessible = int(generator.integers(1, 7))
        batch = scan_draft(rows, token_word, accessible, params)
        scanner = DraftScanner(token_word, accessible, params)
        for row in rows:
            if scanner.push(row).failure is not None:
                break
        assert scanner.result() == batch
        if scanner.failed:
            with pytest.raises(RuntimeError, match="already stopped"):
                scanner.push(rows[0])


@pytest.mark.parametrize("tail_mass, rejected", [(0.02, False), (0.05, True)])
def test_soft_frontier_lets_a_peak_on_a_sliver_of_attention_through(tail_mass: float, rejected: bool) -> None:
    """Five one-token words, three accessible (border 0). The third token's z-scored peak lands on word 4, where the
    earlier tokens put nothing: with 0.02 of its mass there the soft frontier (0.03) accepts it, with 0.05 it
    rejects; without the soft frontier both are rejected."""
    rows = np.zeros((3, 1, 5))
    rows[0, 0] = rows[1, 0] = [0.5, 0.3, 0.2, 0.0, 0.0]
    rows[2, 0] = [0.5, 0.3, 0.2 - tail_mass, 0.0, tail_mass]
    soft = AlignAttParams(median_width=1, frontier_min_mass=0.03)
    result = scan_draft(rows, np.arange(5), accessible_words=3, params=soft)
    assert result.decisions[2].source_word == 4  # the peak is past the frontier either way
    assert result.accepted_tokens == (2 if rejected else 3)
    assert scan_draft(rows, np.arange(5), 3, AlignAttParams(median_width=1)).accepted_tokens == 2


# --- frontier_unit "token" and gate_dtype "float32": the reference code's rule (tests/test_alignatt_replay.py) ------

PAPER_GATE = AlignAttParams(border=1, head_vote="lower_median", frontier_min_mass=0.03, median_width=1,
                            frontier_unit="token", gate_dtype="float32")
HELLO_PUNCT = np.array([False, True, False, True, False, False, False])


@pytest.mark.parametrize("kwargs, message", [
    ({"frontier_unit": "words"}, "frontier_unit must be one of"),
    ({"gate_dtype": "float16"}, "gate_dtype must be one of"),
    ({"gate_dtype": np.float32}, "gate_dtype must be one of"),
])
def test_params_validation_of_the_reference_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AlignAttParams(**kwargs)


def test_token_frontier_needs_token_punct_of_the_source_length() -> None:
    from policies.alignatt import DraftScanner

    rows = peak_rows([4], n_source=7)
    with pytest.raises(ValueError, match="needs token_punct"):
        scan_draft(rows, HELLO_TOKEN_WORD, 3, PAPER_GATE)
    with pytest.raises(ValueError, match="7 booleans"):
        DraftScanner(HELLO_TOKEN_WORD, 3, PAPER_GATE, token_punct=HELLO_PUNCT[:6])
    with pytest.raises(ValueError, match="7 booleans"):
        DraftScanner(HELLO_TOKEN_WORD, 3, PAPER_GATE, token_punct=HELLO_PUNCT.astype(int))
    # frontier_unit "word" ignores it
    assert scan_draft(rows, HELLO_TOKEN_WORD, 3, NO_FILTER) == scan_draft(rows, HELLO_TOKEN_WORD, 3, NO_FILTER,
                                                                          token_punct=HELLO_PUNCT)


def test_token_frontier_reproduces_the_reference_bug_on_hello_world() -> None:
    """Notes §9.1 as the reference decides it: 3 accessible tokens (Hello, world, how; the commas do not count) are
    compared with positions among all 7, so ' how' (position 4) is past the frontier 3 + 1, and the masses split the
    columns at position 3 (Hello , world | , how are you)."""
    rows = peak_rows([HELLO_TOKENS.index(" how")], n_source=7, n_heads=4, peak=0.3, background=0.02)
    decision = scan_draft(rows, HELLO_TOKEN_WORD, 3, PAPER_GATE, HELLO_PUNCT).decisions[0]
    assert decision.failure == "source_frontier"
    assert (decision.source_token, decision.source_word) == (4, 2)
    np.testing.assert_allclose(decision.accessible_mass, 3 * 0.02, rtol=1e-6)
    np.testing.assert_allclose(decision.inaccessible_mass, 3 * 0.02 + 0.3, rtol=1e-6)
    np.testing.assert_allclose(decision.argmax_mass, 0.3, rtol=1e-6)  # the peak token's mass, not its word's
    assert scan_draft(rows, HELLO_TOKEN_WORD, 3, NO_FILTER).accepted_tokens == 1  # in words: accepted
    no_punct = np.zeros(7, dtype=bool)  # 5 accessible tokens: ' how' is inside
    assert scan_draft(rows, HELLO_TOKEN_WORD, 3, PAPER_GATE, no_punct).accepted_tokens == 1


def test_token_frontier_checks_a_nonfinite_row_last() -> None:
    """A NaN column is the largest (torch's argmax): past the frontier it fails as source_frontier (its NaN mass does
    not soften the frontier); inside, as nonfinite."""
    rows = np.array([[[0.5, 0.1, np.nan]]])
    token_punct = np.zeros(3, dtype=bool)
    assert scan_draft(rows, np.arange(3), 1, PAPER_GATE, token_punct).decisions[0].failure == "source_frontier"
    assert scan_draft(rows, np.arange(3), 3, PAPER_GATE, token_punct).decisions[0].failure == "nonfinite"
    assert scan_draft(rows, np.arange(3), 1, NO_FILTER).decisions[0].failure == "nonfinite"  # "word": first


def test_float32_gate_computes_in_float32() -> None:
    stats = OnlineZScore(1, 2, "float32")
    for row in ([[0.1, 0.2]], [[0.3, 0.2]]):
        stats.update(np.array(row))
    z = stats.normalize(np.array([[0.5, 0.2]]))
    assert z.dtype == np.float32
    np.testing.assert_allclose(z, [[3.0, 0.0]], rtol=1e-5)
    assert median_filter(np.zeros(5, dtype=np.float32), 3).dtype == np.float32
    assert median_filter(np.zeros(5, dtype=np.int64), 3).dtype == np.float64
    # A difference float32 cannot hold is a tie, and a tie goes to the first token.
    rows = np.array([[[0.1, 0.3, 0.3 + 1e-12]]])
    float64 = AlignAttParams(median_width=1, head_vote="lower_median")
    float32 = AlignAttParams(median_width=1, head_vote="lower_median", gate_dtype="float32")
    assert scan_draft(rows, np.arange(3), 3, float64).decisions[0].source_word == 2
    assert scan_draft(rows, np.arange(3), 3, float32).decisions[0].source_word == 1
