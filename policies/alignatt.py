"""AlignAtt acceptance gate for decoder-only LLMs (AlignAtt4LLM paper, Eqs. 3-7 and Fig. 4, or its authors' code).
Scans a draft left to right and accepts tokens until one attends past the accessible source frontier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from common.config import knob

FailureReason = Literal["source_frontier", "argmax_mass_weak", "provenance_weak", "nonfinite"]
HeadVote = Literal["mean", "lower_median"]
HEAD_VOTES: tuple[HeadVote, ...] = ("mean", "lower_median")
FrontierUnit = Literal["word", "token"]
FRONTIER_UNITS: tuple[FrontierUnit, ...] = ("word", "token")
GateDtype = Literal["float64", "float32"]
GATE_DTYPES: tuple[GateDtype, ...] = ("float64", "float32")

MIN_STD = 1e-6  # clamp of the online standard deviation, so constant columns give z = 0 instead of a division by 0
MIN_ROWS_FOR_ZSCORE = 2  # the first two draft tokens use their raw rows (the t <= 1 rule)


@dataclass(frozen=True)
class AlignAttParams:
    """Gate settings.

    border: b in Eq. 5, in source WORDS (frontier_unit "word"; "token": see there), any integer. Token t fails when

            word(s_hat_t) >= N_acc + b,

        word(s_hat_t) being the source word of its filtered attention peak and N_acc the number of leading
        accessible words (speech: ended `hold_back` before now; text: every word read). One rule for text and
        speech: b = 0 stops at the first token whose peak is on a word not yet accessible; b = -f also stops on
        the last f accessible words (for text input, where every read word is accessible, this is the original
        AlignAtt rule "stop when attention falls on the last f words"). b >= 1 tolerates peaks on inaccessible
        words and never fires while fewer than b + 1 words are inaccessible (the usual case in the speech cascade:
        the paper's "b = 1" counts source tokens, not words).
    argmax_mass_threshold: tau_argmax in Eq. 6 (0 disables the gate): the mass on the tokens of the peak's unit.
    source_mass_threshold: tau_src in Eq. 7 (0 disables the gate): pi_acc, the mass on the accessible columns.
    median_width: width of the median filter along the source axis (odd, >= 1; 1 disables it).
    frontier_min_mass: a soft frontier (the reference code's `frontier_min_inaccessible_mass`, 0.03 there on the
        inaccessible words). A peak at or past the frontier rejects the token only when the head-averaged attention
        mass on the words at or past it (word >= N_acc + b; "token": pi_inacc, the tokens from N_acc on, as the
        reference) is at least this: the z-scored peak can land there on a sliver of the real attention. 0 (default):
        every such peak rejects.
    head_vote: how the heads' z-scored rows give one source peak. "mean" (the paper's Fig. 4): the argmax of the
        median-filtered head average. "lower_median" (the reference code): each head's median-filtered argmax,
        then the lower median of those positions (with 8 heads the 4th smallest).
    frontier_unit: what N_acc and b count. "word" (default): source words, as above. "token": the reference code's
        rule (Alignatt4LLM 81f971a), quirks included. N_acc is the number of source tokens of the accessible words,
        punctuation-only tokens (`token_punct`) not counted, and is compared with token POSITIONS among all source
        tokens (its bug 1: each punctuation token before the frontier moves it one token back); token t fails when
        its peak token >= N_acc + b, and the masses split the columns at position N_acc (pi_acc before, pi_inacc
        from there on). The argmax mass is the peak token's. A non-finite row is looked at like any other and fails
        last, as "nonfinite" unless an earlier gate fires (its peak treats NaN as the largest value, as torch does).
    gate_dtype: the arithmetic of the z-score, median filter, vote and masses. "float64" (default) or "float32", the
        reference's torch float32 on CPU (near-ties flip between the two); float32 masses also add in its order:
        each head's sum over the columns, added over heads in head order, divided by the number of heads.
    """

    border: int = knob(0, "frontier margin b in source words (tokens with frontier_unit token): stop at the first "
                          "draft token whose attention peak is on unit >= N_accessible + b (0: a word not yet "
                          "accessible; -f: also the last f accessible words, AlignAtt's 'last f words' rule for text "
                          "input)")
    argmax_mass_threshold: float = knob(0.0, "tau_argmax: minimum head-averaged mass on the peak word (0: off)")
    source_mass_threshold: float = knob(0.0, "tau_src: minimum head-averaged mass on accessible source (0: off)")
    median_width: int = knob(7, "width of the median filter along the source axis (paper: 7; 1: no filter)")
    frontier_min_mass: float = knob(0.0, "soft frontier: a peak at or past the frontier rejects only when the "
                                         "head-averaged mass on the source from the frontier on is at least this "
                                         "(reference code: 0.03; 0: every such peak rejects)")
    head_vote: HeadVote = knob("mean", "how the heads' z-scored rows give one source peak: 'mean' (paper Fig. 4: "
                                       "argmax of their average) or 'lower_median' (reference code: lower median of "
                                       "each head's argmax)")
    frontier_unit: FrontierUnit = knob("word", "what N_accessible and the border count: 'word' (source words) or "
                                               "'token' (the reference code's source tokens, punctuation trimmed "
                                               "from the count, quirks included)")
    gate_dtype: GateDtype = knob("float64", "the gate's arithmetic: 'float64' or 'float32' (the reference code's "
                                            "torch float32, where near-ties decide otherwise)")

    def __post_init__(self) -> None:
        if self.head_vote not in HEAD_VOTES:
            raise ValueError(f"head_vote must be one of {', '.join(HEAD_VOTES)}, got {self.head_vote!r}")
        if self.frontier_unit not in FRONTIER_UNITS:
            raise ValueError(f"frontier_unit must be one of {', '.join(FRONTIER_UNITS)}, got {self.frontier_unit!r}; use "
                             f"'word' to count the border in source words, 'token' for the reference code's tokens")
        if self.gate_dtype not in GATE_DTYPES:
            raise ValueError(f"gate_dtype must be one of {', '.join(GATE_DTYPES)}, got {self.gate_dtype!r}; use 'float32' to "
                             f"decide as the reference code's torch float32, 'float64' otherwise")
        if isinstance(self.border, bool) or not isinstance(self.border, (int, np.integer)):
            raise ValueError(f"border must be an integer number of source words (tokens with frontier_unit "
                             f"'token'), got {self.border!r}")
        _check_median_width(self.median_width)
        for name in ("argmax_mass_threshold", "source_mass_threshold", "frontier_min_mass"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:  # above 1 every token would be rejected: no output, no error
                raise ValueError(f"{name} is an attention mass in [0, 1], got {value!r}; 0 turns its gate off")


def _check_median_width(width: int) -> None:
    if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width < 1 or width % 2 == 0:
        raise ValueError(f"median_width must be an odd integer >= 1, got {width!r}; use 1 to disable the filter")


class OnlineZScore:
    """Per-(head, source column) z-score against the PREVIOUS draft rows only (prefix-online Welford statistics).

    Call ``normalize`` on token t's row to decide, then ``update`` with that row once it is accepted.
    Use one instance per draft.
    """

    def __init__(self, n_heads: int, n_source: int, dtype: GateDtype = "float64") -> None:
        self.shape = (int(n_heads), int(n_source))
        self.dtype = np.dtype(dtype)
        self.count = 0
        self._mean = np.zeros(self.shape, self.dtype)
        self._m2 = np.zeros(self.shape, self.dtype)  # sum of squared deviations from the running mean

    def _check_row(self, row: np.ndarray) -> np.ndarray:
        row = np.asarray(row, dtype=self.dtype)
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
    """Median over a centred window of ``width`` along the last axis, with edge (replicate) padding; a window with a
    NaN gives NaN. Computes in float32 for float32 input, else in float64."""
    _check_median_width(width)
    x = np.asarray(x)
    x = x.astype(np.float32 if x.dtype == np.float32 else np.float64, copy=False)
    if width == 1 or x.shape[-1] == 0:
        return x.copy()
    half = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(half, half)], mode="edge")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    return np.median(windows, axis=-1)


@dataclass(frozen=True)
class TokenDecision:
    """The gate's view of one draft token. Masses are head-averaged attention summed over source tokens.

    source_word: index of the source word under the filtered z-score peak (s_hat_t); None when the row is non-finite
        (frontier_unit "word").
    accessible_mass / inaccessible_mass: pi_acc / pi_inacc, mass on words < / >= accessible_words ("token": on the
        source tokens before / from position N_acc).
    argmax_mass: mass on the tokens of word source_word ("token": on the peak token).
    failure: None when accepted, else the first gate that fired.
    source_token: the source token of the peak (None with source_word).
    """

    index: int
    source_word: int | None
    accessible_mass: float
    inaccessible_mass: float
    argmax_mass: float
    failure: FailureReason | None
    source_token: int | None = None


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


def _validate_token_punct(token_punct: np.ndarray | None, n_source: int) -> np.ndarray:
    if token_punct is None:
        raise ValueError('frontier_unit "token" needs token_punct (one bool per source token, True for a token of '
                         'punctuation only); pass it to DraftScanner / scan_draft, or use frontier_unit "word"')
    token_punct = np.asarray(token_punct)
    if token_punct.dtype != np.bool_ or token_punct.shape != (n_source,):
        raise ValueError(f"token_punct must hold {n_source} booleans, one per source token, got dtype "
                         f"{token_punct.dtype} and shape {token_punct.shape}")
    return token_punct


class DraftScanner:
    """The first-failure scan, one draft token at a time, so drafting can stop at the first failing token.

    For token t: the head-averaged row gives the masses; the per-head online z-score of the row, median-filtered
    and voted over heads (`source_peak`), gives the source peak and its unit (its word s_hat_t, or with
    frontier_unit "token" the peak token itself). Gates, in order: nonfinite (row has NaN/inf; "token": last),
    source_frontier (unit >= N_acc + border, unless frontier_min_mass > 0 and the mass on the units from there on,
    "token": from N_acc on, is below it), argmax_mass_weak (argmax_mass < tau_argmax), provenance_weak (a finite
    pi_acc < tau_src); a threshold of 0 disables its gate. Pushing after a failure is an error.
    token_punct: [S] bools, the source tokens of punctuation only (outside every word once the word's leading and
    trailing punctuation is trimmed); needed by frontier_unit "token", ignored by "word".
    """

    def __init__(self, token_word: np.ndarray, accessible_words: int, params: AlignAttParams = AlignAttParams(),
                 token_punct: np.ndarray | None = None):
        self.token_word = _validate_source_map(token_word, accessible_words)
        self.accessible_words = accessible_words
        self.params = params
        self.dtype = np.dtype(params.gate_dtype)
        if params.frontier_unit == "word":
            self.token_unit = self.token_word  # the unit N_acc and the border count, of each source token
            self.accessible_units = accessible_words
            soft_frontier = accessible_words + params.border
        else:
            token_punct = _validate_token_punct(token_punct, self.token_word.shape[0])
            self.token_unit = np.arange(self.token_word.shape[0])
            self.accessible_units = int(np.count_nonzero((self.token_word < accessible_words) & ~token_punct))
            soft_frontier = self.accessible_units
        self.accessible_columns = self.token_unit < self.accessible_units
        self.frontier = self.accessible_units + params.border  # the first unit a peak may not be on
        self.frontier_columns = self.token_unit >= soft_frontier  # the soft frontier's mass
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
        row = np.asarray(row, dtype=self.dtype)
        if row.ndim != 2 or row.shape[0] == 0 or row.shape[1] != self.token_word.shape[0]:
            raise ValueError(f"a row must be [heads, source tokens] with {self.token_word.shape[0]} source tokens "
                             f"and at least one head, got shape {row.shape}")
        if self._zscore is None:
            self._zscore = OnlineZScore(*row.shape, self.params.gate_dtype)
        index = len(self.decisions)
        if self.params.frontier_unit == "word" and not np.all(np.isfinite(row)):
            nan = float("nan")
            decision = TokenDecision(index, None, nan, nan, nan, "nonfinite")
        else:
            decision = self._decide(index, row)
        self.decisions.append(decision)
        if decision.failure is None:
            self._zscore.update(row)
        return decision

    def _decide(self, index: int, row: np.ndarray) -> TokenDecision:
        params = self.params
        peak = source_peak(self._zscore.normalize(row), params)
        unit = int(self.token_unit[peak])
        accessible_mass = self._mass(row, self.accessible_columns)
        inaccessible_mass = self._mass(row, ~self.accessible_columns)
        argmax_mass = self._mass(row, self.token_unit == unit)
        failure: FailureReason | None = None
        # The soft frontier's mass is summed only for a peak at or past the frontier; a NaN mass does not soften.
        if unit >= self.frontier and not (params.frontier_min_mass > 0
                                          and self._mass(row, self.frontier_columns) < params.frontier_min_mass):
            failure = "source_frontier"
        elif params.argmax_mass_threshold > 0 and argmax_mass < params.argmax_mass_threshold:
            failure = "argmax_mass_weak"
        elif (params.source_mass_threshold > 0 and np.isfinite(accessible_mass)
              and accessible_mass < params.source_mass_threshold):
            failure = "provenance_weak"
        elif not (np.isfinite(accessible_mass) and np.isfinite(inaccessible_mass)):
            failure = "nonfinite"  # reached by frontier_unit "token" only: "word" stops a non-finite row first
        return TokenDecision(index, int(self.token_word[peak]), accessible_mass, inaccessible_mass, argmax_mass,
                             failure, int(peak))

    def _mass(self, row: np.ndarray, columns: np.ndarray) -> float:
        """Head-averaged attention on the source columns: the column sum of the head average (float64), or each
        head's column sum (torch's, as the reference's), added over heads in order and divided by the number of
        heads (float32, the reference)."""
        if self.dtype == np.float64:
            return float(row.mean(axis=0)[columns].sum())
        import torch  # the reference sums each head's columns with torch, whose vectorised order numpy's differs from

        total = np.float32(0.0)
        for head_sum in torch.from_numpy(np.ascontiguousarray(row[:, columns])).sum(dim=1).numpy():
            total = total + head_sum
        return float(total / np.float32(row.shape[0]))


def source_peak(zscores: np.ndarray, params: AlignAttParams) -> int:
    """The source token a draft token attends to, from its [H heads, S source tokens] z-scored row: the argmax of
    the median-filtered head average ("mean"), or the lower median of the heads' median-filtered argmaxes
    ("lower_median"). Ties go to the first index."""
    if params.head_vote == "mean":
        return int(np.argmax(median_filter(zscores.mean(axis=0), params.median_width)))
    peaks = np.sort(np.argmax(median_filter(zscores, params.median_width), axis=-1))
    return int(peaks[(len(peaks) - 1) // 2])


def scan_draft(rows: np.ndarray, token_word: np.ndarray, accessible_words: int,
               params: AlignAttParams = AlignAttParams(), token_punct: np.ndarray | None = None) -> ScanResult:
    """First-failure AlignAtt scan over a whole draft (see `DraftScanner`).

    rows: [T draft tokens, H heads, S source tokens] replayed attention probabilities (source slice of full rows).
    token_word: [S] source-word index of each source token (non-decreasing, 0..n_words-1).
    accessible_words: the number of leading source words that are accessible (N_acc with frontier_unit "word").
    token_punct: [S] bools, the source tokens of punctuation only; needed by frontier_unit "token".
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
    scanner = DraftScanner(token_word, accessible_words, params, token_punct)
    for row in rows:
        if scanner.push(row).failure is not None:
            break
    return scanner.result()
