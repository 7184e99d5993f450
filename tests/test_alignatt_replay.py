"""Tests for benchmarks/alignatt_replay.py: the paper preset's gate decides as the authors' code (Alignatt4LLM 81f971a).

Hand-made drafts derive their expected decisions from the authors' rules in comments; a torch float32 reference
written from their formulas must agree with the replay on a few thousand random drafts.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

REPLAY = Path(__file__).resolve().parents[1] / "benchmarks" / "alignatt_replay.py"
PAPER_YAML = """# the authors' gate (their presets.py), with keys the replay ignores
model: google/gemma-4-E4B-it
border: 1
frontier_unit: token
head_vote: lower_median
frontier_min_mass: 0.03
gate_dtype: float32
median_width: 7
"""


def replay(drafts: list[dict], *args: str) -> list[dict]:
    lines = "".join(json.dumps(draft) + "\n" for draft in drafts)
    done = subprocess.run([sys.executable, str(REPLAY), *args], input=lines, capture_output=True, text=True,
                          check=True)
    return [json.loads(line) for line in done.stdout.splitlines()]


def draft(rows, token_word, accessible_words, token_punct=None, final=False) -> dict:
    token_punct = token_punct or [False] * len(token_word)
    return {"rows": rows, "token_word": token_word, "token_punct": token_punct, "accessible_words": accessible_words,
            "final": final}


@pytest.fixture(scope="module")
def presets(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("presets")
    (folder / "paper.yaml").write_text(PAPER_YAML)
    (folder / "nofilter.yaml").write_text("extends: paper.yaml\nmedian_width: 1\n")
    (folder / "paper64.yaml").write_text("extends: paper.yaml\ngate_dtype: float64\n")
    return {name: str(folder / f"{name}.yaml") for name in ("paper", "nofilter", "paper64")}


HELLO_WORD = [0, 0, 1, 1, 2, 3, 4]  # "Hello", ",", " world", ",", " how", " are", " you"
HELLO_PUNCT = [False, True, False, True, False, False, False]


def test_hand_made_drafts_decide_as_the_authors_rules(presets) -> None:
    drafts, expected = [], []

    def case(rows, token_word, accessible_words, outcome, token_punct=None, final=False):
        drafts.append(draft(rows, token_word, accessible_words, token_punct, final))
        expected.append({"accepted": outcome[0], "reason": outcome[1]})

    # Without the filter (nofilter.yaml: the paper's keys, median_width 1). One token per word unless said.
    # Tie: 1 accessible word -> 1 accessible token, frontier 1 + 1 = 2. Peaks 0.4 at tokens 1 and 2: the first (1)
    # is inside the frontier, accepted; the last (2) would have been rejected.
    case([[[0.1, 0.4, 0.4, 0.1]]], [0, 1, 2, 3], 1, (1, None))
    # Heads split 2/2: heads 0-1 peak on token 0, heads 2-3 on token 3; sorted [0, 0, 3, 3], lower median
    # sorted[(4 - 1) // 2] = 0 < frontier 2 + 1 = 3: accepted (a mean or upper median would say 3: rejected).
    split = [[0.7, 0.1, 0.1, 0.1]] * 2 + [[0.1, 0.1, 0.1, 0.7]] * 2
    case([split], [0, 1, 2, 3], 2, (1, None))
    # Bug 1, "Hello, world, how are you", 3 accessible words: their tokens Hello, world, how (the commas are
    # punctuation) -> 3, frontier 3 + 1 = 4, compared with positions among all 7 tokens: the peak on " how"
    # (position 4) is rejected though " how" is accessible; mass from position 3 on: 0.02 * 3 + 0.3 >= 0.03.
    hello = [[0.02, 0.02, 0.02, 0.02, 0.3, 0.02, 0.02]]
    case([hello], HELLO_WORD, 3, (0, "source_frontier"), HELLO_PUNCT)
    # The same tokens with no punctuation token (say "Hello" "there" for the commas): 5 accessible tokens,
    # frontier 6; " how" at position 4 is accepted. The punctuation token shifted the position.
    case([hello], HELLO_WORD, 3, (1, None))
    # Multi-token words, border 1 in tokens: words of 2, 3, 2 tokens, 2 accessible -> 5 tokens, frontier 6. A
    # peak on token 5 (the first token of word 2) is tolerated; on token 6 (its second token) rejected.
    word_of = [0, 0, 1, 1, 1, 2, 2]
    case([[[0.05] * 5 + [0.5, 0.05]]], word_of, 2, (1, None))
    case([[[0.05] * 6 + [0.5]]], word_of, 2, (0, "source_frontier"))
    # The z-score starts at the third token; tokens 0 and 1 use raw rows. 1 accessible token, frontier 2.
    # Token 1 peaks raw on token 0 (accepted); z-scored against token 0 alone (std 0 -> 1e-6) it would peak on 3.
    # Token 2 = token 1: column 3 has mean 0.15 and std 0.05 over tokens 0-1, z = 1; the other columns z = 0
    # -> peak 3 >= 2, mass on tokens 1-3 = 0.4: rejected at 2.
    first, second = [0.5, 0.1, 0.1, 0.1], [0.5, 0.1, 0.1, 0.2]
    case([[first], [second], [second]], [0, 1, 2, 3], 1, (2, "source_frontier"))
    # Soft frontier: tokens 0 and 1 identical (std 0 -> 1e-6 everywhere), token 2 adds m on token 3 and drops 0.01
    # on token 1: z = [0, -1e4, 0, m / 1e-6] -> peak 3 >= 2. Inaccessible mass (tokens 1-3) = m: 0.02 < 0.03 lets
    # it through (3 accepted), 0.05 rejects it.
    same = [0.6, 0.01, 0.0, 0.0]
    case([[same], [same], [[0.6, 0.0, 0.0, 0.02]]], [0, 1, 2, 3], 1, (3, None))
    case([[same], [same], [[0.6, 0.0, 0.0, 0.05]]], [0, 1, 2, 3], 1, (2, "source_frontier"))
    # NaN inside the frontier: 3 accessible tokens, frontier 4; the NaN column counts as the largest (torch's
    # argmax), peak 1 < 4, then the non-finite provenance fails the token: 1 accepted.
    case([[[0.2, 0.3, 0.1]], [[0.2, math.nan, 0.1]]], [0, 1, 2], 3, (1, "nonfinite"))
    # NaN past the frontier: 1 accessible token, frontier 2, peak on the NaN (token 2); the inaccessible mass is
    # NaN, not below 0.03, so the frontier fires first (their order: frontier, then provenance).
    case([[[0.5, 0.1, math.nan]]], [0, 1, 2], 1, (0, "source_frontier"))
    # Final: everything is accepted, whatever the attention says (the rejected Hello draft above).
    case([hello, hello], HELLO_WORD, 3, (2, None), HELLO_PUNCT, final=True)
    # Empty draft: nothing to accept, nothing rejected.
    case([], [0, 1, 2], 1, (0, None))
    assert replay(drafts, "--config", presets["nofilter"]) == expected


def test_paper_filter_and_a_one_token_source(presets) -> None:
    # Width 7 with replicate padding: [.2]*4 + [.02, .02, .3, .02]. Window at 0: all .2 -> .2; at 4:
    # [.2 .2 .2 .02 .02 .3 .02] -> sorted 4th = .2; at 5: [.2 .2 .02 .02 .3 .02 .02] -> .02; the lone .3 spike
    # never survives. First max (.2) at token 0 < frontier 2 + 1 = 3: accepted. Unfiltered, the peak is token 6:
    # rejected (mass from token 2 on >= 0.03).
    spike = [[[0.2] * 4 + [0.02, 0.02, 0.3, 0.02]]]
    words = list(range(8))
    # One source token, no accessible word: frontier 0 + 1 = 1, the only peak (token 0) is always inside.
    one = [[[0.9]], [[0.1]], [[0.5]]]
    drafts = [draft(spike, words, 2), draft(one, [0], 0)]
    for args in (["--paper"], ["--config", presets["paper"]]):
        assert replay(drafts, *args) == [{"accepted": 1, "reason": None}, {"accepted": 3, "reason": None}]
    assert replay(drafts[:1], "--config", presets["nofilter"]) == [{"accepted": 0, "reason": "source_frontier"}]


@pytest.mark.parametrize("line, problem", [
    ({"rows": [[[0.1, 0.2]]], "token_word": [0, 1, 2], "token_punct": [False] * 3, "accessible_words": 1,
      "final": False}, "one word index per source token"),
    ({"rows": [[[0.1, 0.2]], [[0.1]]], "token_word": [0, 1], "token_punct": [False] * 2, "accessible_words": 1,
      "final": False}, "inhomogeneous"),
    ({"rows": [[[0.1, 0.2]]], "token_word": [0, 1.5], "token_punct": [False] * 2, "accessible_words": 1,
      "final": False}, "token_word must be a list of integers"),
    ({"rows": [[[0.1, 0.2]]], "token_word": [0, 1], "accessible_words": 1, "final": False}, "missing key"),
    ("not json", "Expecting value"),
])
def test_a_bad_line_gives_one_error_line_and_exit_2(line, problem) -> None:
    good = json.dumps(draft([[[0.5, 0.5]]], [0, 1], 2))
    bad = line if isinstance(line, str) else json.dumps(line)
    done = subprocess.run([sys.executable, str(REPLAY), "--paper"], input=f"{good}\n{bad}\n", capture_output=True,
                          text=True)
    assert done.returncode == 2
    assert done.stdout.splitlines() == ['{"accepted": 1, "reason": null}']
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert "line 2:" in done.stderr and problem in done.stderr


@pytest.mark.parametrize("name", ["alignatt4llm_paper_text", "alignatt4llm_paper_text_cpu", "alignatt4llm_paper_low",
                                  "alignatt4llm_paper_high", "alignatt4llm_paper_cpu", "alignatt4llm_low",
                                  "alignatt4llm_high"])
def test_every_paper_preset_holds_the_authors_gate(name) -> None:
    """The shipped paper presets (and the GPU presets, which are the paper's) set the gate as PAPER_YAML states the
    authors' presets do; `--paper` replays the same gate."""
    import yaml

    import eval_configs
    from benchmarks.alignatt_replay import PAPER, load_preset

    assert load_preset(eval_configs.path(name)) == {key: value for key, value in yaml.safe_load(PAPER_YAML).items()
                                                    if key != "model"}
    assert load_preset(PAPER) == load_preset(eval_configs.path(name))


def test_a_bad_preset_gives_one_error_line_and_exit_2(tmp_path) -> None:
    (tmp_path / "bad.yaml").write_text("extends: paper.yaml\n")  # paper.yaml is not there
    (tmp_path / "unit.yaml").write_text("frontier_unit: tokens\n")
    for name, problem in (("bad", "paper.yaml"), ("unit", "frontier_unit must be one of")):
        done = subprocess.run([sys.executable, str(REPLAY), "--config", str(tmp_path / f"{name}.yaml")], input="",
                              capture_output=True, text=True)
        assert done.returncode == 2 and problem in done.stderr and "Traceback" not in done.stderr


# --- parity with an independent torch float32 reference ---------------------------------------------------------------

def reference(d: dict, border: int = 1, width: int = 7, min_mass: float = 0.03) -> tuple[int, str | None]:
    """The authors' decision, from their code (Alignatt4LLM 81f971a): accessible_source_token_count (mt/base.py
    3076-3086; units trimmed of punctuation: source_frontier.py 9-48), IncrementalAlignAttTracker (base.py 87-123:
    raw rows while fewer than 2 were seen, Welford z-score, std clamped at 1e-6, median filter 3663-3669, lower
    median 3689-3691), provenance (vllm_qk/observer.py 737-744 and 818-855: each head's sum, added over heads, / H),
    the scan (mt/gemma_vllm_backend.py 1207, 1280 final; 1340-1572: the frontier with its soft floor, base.py
    924-953, first; provenance_nonfinite, base.py 969-972, last)."""
    accessible = sum(1 for w, p in zip(d["token_word"], d["token_punct"]) if w < d["accessible_words"] and not p)
    if d["final"]:
        return len(d["rows"]), None
    count, mean, m2 = 0, None, None
    for t, row in enumerate(d["rows"]):
        r = torch.tensor(row, dtype=torch.float64).float()
        z = r if count <= 1 else (r - mean) / (m2 / max(1, count)).sqrt().clamp_min(1e-6)
        if width > 1 and z.shape[-1] > 1:
            z = F.pad(z, (width // 2, width // 2), mode="replicate").unfold(-1, width, 1).median(dim=-1).values
        heads = sorted(torch.argmax(z, dim=-1).tolist())
        position = heads[(len(heads) - 1) // 2]
        count += 1
        if mean is None:
            mean, m2 = r.clone(), torch.zeros_like(r)
        else:
            delta = r - mean
            mean = mean + delta / float(count)
            m2 = m2 + delta * (r - mean)
        total = torch.zeros(2)
        for head in r:
            total[0] += head[:accessible].sum()
            total[1] += head[accessible:].sum()
        accessible_mass, inaccessible_mass = (float(x) for x in total / float(r.shape[0]))
        if position >= accessible + border and not (min_mass > 0 and inaccessible_mass < min_mass):
            return t, "source_frontier"
        if not (math.isfinite(accessible_mass) and math.isfinite(inaccessible_mass)):
            return t, "nonfinite"  # their provenance_nonfinite
    return len(d["rows"]), None


def random_draft(rng: np.random.Generator) -> dict:
    """1-8 words of 1-3 tokens with some punctuation tokens, 1-8 heads, 1-12 draft tokens: Dirichlet rows, or a
    peak walking along the source (monotone), on a coarse grid for ties; some with a faint tail, a few with a NaN."""
    token_word, token_punct = [], []
    n_words = int(rng.integers(1, 9))
    for word in range(n_words):
        leading, trailing = rng.random() < 0.15, rng.random() < 0.3  # an opening quote, a comma
        n_tokens = int(rng.integers(1, 4))
        token_word += [word] * (leading + n_tokens + trailing)
        token_punct += [True] * leading + [False] * n_tokens + [True] * trailing
    n_source, n_heads, n_draft = len(token_word), int(rng.integers(1, 9)), int(rng.integers(1, 13))
    kind = rng.integers(3)
    if kind == 0:
        rows = rng.dirichlet(np.full(n_source + 4, 0.5), size=(n_draft, n_heads))[:, :, :n_source]
    else:
        centre = np.linspace(0, n_source - 1, n_draft)[:, None, None] + rng.normal(0, 1, (n_draft, n_heads, 1))
        rows = np.exp(-0.5 * (np.arange(n_source) - centre) ** 2) / (n_source + 1)
        if kind == 2:
            rows = np.round(rows * 16) / 16
    if rng.random() < 0.3:  # a faint tail, where a z-scored peak may rest on a sliver (the soft frontier)
        rows[:, :, rng.integers(n_source):] *= 0.02
    if rng.random() < 0.05:
        rows[rng.integers(n_draft), rng.integers(n_heads), rng.integers(n_source)] = np.nan
    return draft(rows.tolist(), token_word, int(rng.integers(0, n_words + 1)), token_punct, bool(rng.random() < 0.05))


def near_tie_draft(rng: np.random.Generator) -> dict:
    """Column 3 is column 1 halved plus 0.01, so at the third token both z-scores are equal in exact arithmetic
    and the peak (inside or past the frontier 1 + 1 = 2) is decided by rounding."""
    rows = rng.dirichlet(np.ones(6), size=(3, 1))[:, :, :4]
    rows[2, 0, 1] = rows[:2, 0, 1].max() + 0.1  # column 1 (and 3) out-score the others
    rows[:, :, 3] = rows[:, :, 1] * 0.5 + 0.01
    return draft(rows.tolist(), [0, 1, 2, 3], 1)


def soft_floor_draft(rng: np.random.Generator) -> dict:
    """Every row puts exactly 0.03 (or a hair either side) on the source past the accessible tokens, spread over
    at least five of them: the soft frontier's decision rests on the last bits of the float32 sum, whose order is
    torch's (vectorised) in the reference and would be another's in a plain numpy sum."""
    n_source, n_heads, n_draft = int(rng.integers(11, 17)), int(rng.integers(1, 3)), int(rng.integers(3, 9))
    accessible = int(rng.integers(1, n_source - 5))  # one word per token, none of punctuation
    target = rng.choice([0.03, 0.0299999, 0.0300001])
    rows = rng.dirichlet(np.ones(n_source), size=(n_draft, n_heads))
    rows[:, :, accessible:] *= target / rows[:, :, accessible:].sum(axis=-1, keepdims=True)
    rows[:, :, :accessible] *= (1 - target) / rows[:, :, :accessible].sum(axis=-1, keepdims=True)
    return draft(rows.tolist(), list(range(n_source)), accessible)


def test_replay_agrees_with_the_torch_float32_reference_and_float64_would_not(presets) -> None:
    rng = np.random.default_rng(20260)
    drafts = [random_draft(rng) for _ in range(2000)] + [near_tie_draft(rng) for _ in range(400)]
    drafts += [soft_floor_draft(rng) for _ in range(600)]
    expected = [reference(d) for d in drafts]
    got = [(line["accepted"], line["reason"]) for line in replay(drafts, "--config", presets["paper"])]
    mismatches = [(i, g, e) for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    assert not mismatches, mismatches[:5]
    # The set reaches every rule: stops at 0 and later, NaN rows, the soft frontier letting tokens through.
    reasons = {reason for _, reason in expected}
    assert reasons == {None, "source_frontier", "nonfinite"} and len({n for n, _ in expected}) >= 10
    assert any(reference(d, min_mass=0.0) != e for d, e in zip(drafts, expected))
    # float64 decides the near-ties differently (the reference's dtype matters).
    ties = drafts[2000:2400]
    flipped = sum(g != (line["accepted"], line["reason"])
                  for g, line in zip(got[2000:2400], replay(ties, "--config", presets["paper64"])))
    assert flipped > 0
