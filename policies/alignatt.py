"""AlignAtt acceptance gate for decoder-only LLMs (AlignAtt4LLM paper, Eqs. 3-7 and Fig. 4).
Scans a draft left to right and accepts tokens until one attends past the accessible source frontier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

FailureReason = Literal["source_frontier", "argmax_mass_weak", "provenance_weak", "nonfinite"]
HeadVote = Literal["mean", "lower_median"]
HEAD_VOTES: tuple[HeadVote, ...] = ("mean", "lower_median")

MIN_STD = 1e-6  # clamp of the online standard deviation, so constant columns give z = 0 instead of a division by 0
MIN_ROWS_FOR_ZSCORE = 2  # the first two draft tokens use their raw rows (the t <= 1 rule)


@dataclass(frozen=True)
class AlignAttParams:
    """Gate settings.

    border: b in Eq. 5, in source WORDS, any integer. Token t fails when

            word(s_hat_t) >= N_acc + b,

        word(s_hat_t) being the source word of its filtered attention peak and N_acc the number of leading
        accessible words (speech: ended `hold_back` before now; text: every word read). One rule for text and
        speech: b = 0 stops at the first token whose peak is on a word not yet accessible; b = -f also stops on
        the last f accessible words (for text input, where every read word is accessible, this is the original
        AlignAtt rule "stop when attention falls on the last f words"). b >= 1 tolerates peaks on inaccessible
        words and never fires while fewer than b + 1 words are inaccessible (the usual case in the speech cascade:
        the paper's "b = 1" counts source tokens, not words).
    argmax_mass_threshold: tau_argmax in Eq. 6 (0 disables the gate).
    source_mass_threshold: tau_src in Eq. 7 (0 disables the gate).
    median_width: width of the median filter along the source axis (odd, >= 1; 1 disables it).
    frontier_min_mass: a soft frontier (the reference code's `frontier_min_inaccessible_mass`, 0.03 there on the
        inaccessible words). A peak at or past the frontier rejects the token only when the head-averaged attention
        mass on the words at or past it (word >= N_acc + b) is at least this: the z-scored peak can land there on
        a sliver of the real attention. 0 (default): every such peak rejects.
    head_vote: how the heads' z-scored rows give one source peak. "mean" (the paper's Fig. 4): the argmax of the
        median-filtered head average. "lower_median" (the reference code): each head's median-filtered argmax,
        then the lower median of those positions (with 8 heads the 4th smallest).
    """

    border: int = 0
    argmax_mass_threshold: float = 0.0
    source_mass_threshold: float = 0.0
    median_width: int = 7
    frontier_min_mass: float = 0.0
    head_vote: HeadVote = "mean"

    def __post_init__(self) -> None:
        if self.head_vote not in HEAD_VOTES:
            raise ValueError(f"head_vote must be one of {HEAD_VOTES}, got {self.head_vote!r}")
        if isinstance(self.border, bool) or not isinstance(self.border, (int, np.integer)):
            raise ValueError(f"border must be an integer number of source words, got {self.border!r}")
        _check_median_width(self.median_width)
        for name in ("argmax_mass_threshold", "source_mass_threshold", "frontier_min_mass"):
            value = getattr(self, name)
            if not np.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}; use 0.0 to disable the gate")


def _check_median_width(width: int) -> None:
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1 or width % 2 == 0:
        raise ValueError(f"median_width must be an odd integer >= 1, got {width!r}; use 1 to disable the filter")


class OnlineZScore:
    """Per-(head, source column) z-score against the PREVIOUS draft rows only (prefix-online Welford statistics).

    Call ``normalize`` on token t's row to decide, then ``update`` with that row once it is accepted.
    Use one instance per draft.
    """

    def __init__(self, n_heads: int, n_source: int) -> None:
        self.shape = (int(n_heads), int(n_source))
        self.count = 0
        self._mean = np.zeros(self.shape)
        self._m2 = np.zeros(self.shape)  # sum of squared deviations from the running mean

    def _check_row(self, row: np.ndarray) -> np.ndarray:
        row = np.asarray(row, dtype=np.float64)
        if row.shape != self.shape:
            raise ValueError(f"row shape {row.shape} does not match the [heads, source] shape {self.shape}")
        return row

    def normalize(self, row: np.ndarray) -> np.ndarray:
        """z = (row - mean) / max(std, 1e-6) over the rows seen so far; the raw row while fewer than 2 were seen."""
        row = self._check_row(row)
        if self.count < MIN_ROWS_FOR_ZSCORE:
            return row.copy()
        std = np.maximum(np.sqrt(self._m2 / self.count), MIN_STD)
        return (row - self._mean) / std

    def update(self, row: np.ndarray) -> None:
        """Add a row to the statistics (Welford's update)."""
        row = self._check_row(row)
        self.count += 1
        delta = row - self._mean
        self._mean += delta / self.count
        self._m2 += delta * (row - self._mean)


def median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Median over a centred window of ``width`` along the last axis, with edge (replicate) padding."""
    _check_median_width(width)
    x = np.asarray(x, dtype=np.float64)
    if width == 1 or x.shape[-1] == 0:
        return x.copy()
    half = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    return np.median(windows, axis=-1)


@dataclass(frozen=True)
class TokenDecision:
    """The gate's view of one draft token. Masses are head-averaged attention summed over source tokens.

    source_word: index of the source word under the filtered z-score peak (s_hat_t); None when the row is non-finite.
    accessible_mass / inaccessible_mass: pi_acc / pi_inacc, mass on words < / >= accessible_words.
    argmax_mass: mass on the tokens of word source_word.
    failure: None when accepted, else the first gate that fired.
    """

    index: int
    source_word: int | None
    accessible_mass: float
    inaccessible_mass: float
    argmax_mass: float
    failure: FailureReason | None


@dataclass(frozen=True)
class ScanResult:
    """Outcome of the first-failure scan: accepted_tokens = index of the first failure, or the draft length."""

    accepted_tokens: int
    decisions: tuple[TokenDecision, ...]  # up to and including the first failure


def _validate_source_map(token_word: np.ndarray, accessible_words: int) -> np.ndarray:
    token_word = np.asarray(token_word)
    if token_word.ndim != 1 or token_word.shape[0] == 0:
        raise ValueError(f"token_word must be 1-D with one word index per source token (S > 0), "
                         f"got shape {token_word.shape}; the AlignAtt gate needs at least one source token")
    if not np.issubdtype(token_word.dtype, np.integer):
        raise ValueError(f"token_word must hold integer word indices, got dtype {token_word.dtype}")
    steps = np.diff(token_word)
    if token_word[0] != 0 or np.any((steps != 0) & (steps != 1)):
        raise ValueError("token_word must start at 0 and be non-decreasing in steps of 0 or 1 "
                         "(every source word 0..n_words-1 owns at least one token)")
    n_words = int(token_word[-1]) + 1
    is_integer = isinstance(accessible_words, (int, np.integer)) and not isinstance(accessible_words, bool)
    if not is_integer or not 0 <= accessible_words <= n_words:
        raise ValueError(f"accessible_words must be in [0, {n_words}] (the number of source words), "
                         f"got {accessible_words!r}")
    return token_word


class DraftScanner:
    """The first-failure scan, one draft token at a time, so drafting can stop at the first failing token.

    For token t: the head-averaged row gives the masses; the per-head online z-score of the row, median-filtered
    and voted over heads (`source_peak`), gives the source peak and its word s_hat_t. Gates, in order:
    nonfinite (row has NaN/inf), source_frontier (s_hat_t >= N_acc + border, and the mass on the words from there on
    is at least frontier_min_mass), argmax_mass_weak (argmax_mass < tau_argmax), provenance_weak (pi_acc < tau_src).
    Pushing after a failure is an error.
    """

    def __init__(self, token_word: np.ndarray, accessible_words: int, params: AlignAttParams = AlignAttParams()):
        self.token_word = _validate_source_map(token_word, accessible_words)
        self.accessible_words = accessible_words
        self.params = params
        self.accessible_columns = self.token_word < accessible_words
        self.frontier = accessible_words + params.border  # the first word a peak may not be on
        self.frontier_columns = self.token_word >= self.frontier
        self.decisions: list[TokenDecision] = []
        self._zscore: OnlineZScore | None = None

    @property
    def failed(self) -> bool:
        return bool(self.decisions) and self.decisions[-1].failure is not None

    @property
    def accepted_tokens(self) -> int:
        return len(self.decisions) - 1 if self.failed else len(self.decisions)

    def result(self) -> ScanResult:
        return ScanResult(self.accepted_tokens, tuple(self.decisions))

    def push(self, row: np.ndarray) -> TokenDecision:
        """Decide on the next draft token from its [H heads, S source tokens] replayed row."""
        if self.failed:
            raise RuntimeError("the scan already stopped at a failing token")
        row = np.asarray(row, dtype=np.float64)
        if row.ndim != 2 or row.shape[0] == 0 or row.shape[1] != self.token_word.shape[0]:
            raise ValueError(f"a row must be [heads, source tokens] with {self.token_word.shape[0]} source tokens "
                             f"and at least one head, got shape {row.shape}")
        if self._zscore is None:
            self._zscore = OnlineZScore(*row.shape)
        index = len(self.decisions)
        if not np.all(np.isfinite(row)):
            nan = float("nan")
            decision = TokenDecision(index, None, nan, nan, nan, "nonfinite")
        else:
            decision = self._decide(index, row)
        self.decisions.append(decision)
        if decision.failure is None:
            self._zscore.update(row)
        return decision

    def _decide(self, index: int, row: np.ndarray) -> TokenDecision:
        params, token_word = self.params, self.token_word
        mean_row = row.mean(axis=0)
        source_word = int(token_word[source_peak(self._zscore.normalize(row), params)])
        accessible_mass = float(mean_row[self.accessible_columns].sum())
        inaccessible_mass = float(mean_row[~self.accessible_columns].sum())
        argmax_mass = float(mean_row[token_word == source_word].sum())
        failure: FailureReason | None = None
        # The soft frontier's mass is summed only for a peak at or past the frontier.
        if source_word >= self.frontier and float(mean_row[self.frontier_columns].sum()) >= params.frontier_min_mass:
            failure = "source_frontier"
        elif argmax_mass < params.argmax_mass_threshold:
            failure = "argmax_mass_weak"
        elif accessible_mass < params.source_mass_threshold:
            failure = "provenance_weak"
        return TokenDecision(index, source_word, accessible_mass, inaccessible_mass, argmax_mass, failure)


def source_peak(zscores: np.ndarray, params: AlignAttParams) -> int:
    """The source token a draft token attends to, from its [H heads, S source tokens] z-scored row: the argmax of
    the median-filtered head average ("mean"), or the lower median of the heads' median-filtered argmaxes
    ("lower_median"). Ties go to the first index."""
    if params.head_vote == "mean":
        return int(np.argmax(median_filter(zscores.mean(axis=0), params.median_width)))
    peaks = np.sort(np.argmax(median_filter(zscores, params.median_width), axis=-1))
    return int(peaks[(len(peaks) - 1) // 2])


def scan_draft(rows: np.ndarray, token_word: np.ndarray, accessible_words: int,
               params: AlignAttParams = AlignAttParams()) -> ScanResult:
    """First-failure AlignAtt scan over a whole draft (see `DraftScanner`).

    rows: [T draft tokens, H heads, S source tokens] replayed attention probabilities (source slice of full rows).
    token_word: [S] source-word index of each source token (non-decreasing, 0..n_words-1).
    accessible_words: N_acc, the number of leading source words that are accessible.
    """
    rows = np.asarray(rows, dtype=np.float64)
    if rows.ndim != 3:
        raise ValueError(f"rows must be 3-D [draft tokens, heads, source tokens], got shape {rows.shape}")
    if rows.shape[2] == 0:
        raise ValueError("rows have no source columns (S == 0); the AlignAtt gate needs at least one source token")
    if rows.shape[1] == 0:
        raise ValueError("rows have no heads (H == 0); pass at least one alignment head")
    token_word = np.asarray(token_word)
    if token_word.ndim != 1 or token_word.shape[0] != rows.shape[2]:
        raise ValueError(f"token_word must be 1-D with one word index per source token ({rows.shape[2]}), "
                         f"got shape {token_word.shape}")
    scanner = DraftScanner(token_word, accessible_words, params)
    for row in rows:
        if scanner.push(row).failure is not None:
            break
    return scanner.result()
