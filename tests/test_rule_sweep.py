"""benchmarks/rule_sweep.py: a rule's lines chosen from the policy log, and a subset run put back into the whole."""
from __future__ import annotations

import json
import sys

from agents.evaluation.runs import POLICY_LOG, run_lines
from benchmarks import rule_sweep


def text_run(folder, hypotheses, log_rows):
    """A finished text run: SimulEval's instances log, its result and the policy log, one row per line."""
    (folder / "simuleval").mkdir(parents=True)
    rows = [{"prediction": h, "reference": f"ref {i}", "source": f"src {i}"} for i, h in enumerate(hypotheses)]
    (folder / "simuleval" / "instances.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / POLICY_LOG).write_text("".join(json.dumps(r) + "\n" for r in log_rows))
    (folder / "result.json").write_text(json.dumps({"source_lang": "en", "target_lang": "de"}))
    (folder / "environment.json").write_text("{}")
    return folder


def test_a_rules_lines_are_those_where_it_fired_and_the_subset_run_goes_back_in_their_place(tmp_path, monkeypatch):
    quiet = {"fired_loop": 0, "fired_copy": 0, "fired_copy_retries": 0, "fired_language_turn": 0}
    rows = [quiet, {**quiet, "fired_loop": 2}, quiet, {**quiet, "fired_copy": 1, "fired_copy_retries": 1},
            quiet, {**quiet, "fired_language_turn": 1}]
    base = text_run(tmp_path / "all-on", ["a", "b b b", "c", "d", "e", "f"], rows)
    assert rule_sweep.fired_lines(base, "loop") == [1]
    assert rule_sweep.fired_lines(base, "copy_retries") == [3]
    rule_sweep.select(base, ["loop", "copy"], tmp_path / "lines", controls=1)
    assert (tmp_path / "lines" / "loop.lines").read_text().split() == ["0", "1"]  # one quiet line as a control
    assert (tmp_path / "lines" / "loop.src").read_text().splitlines() == ["src 0", "src 1"]
    subset = text_run(tmp_path / "loop-off", ["a", "b b b b b"], rows[:2])
    rule_sweep.splice(base, subset, tmp_path / "lines" / "loop.lines", "loop-off", tmp_path / "spliced")
    hypotheses, references, _ = run_lines(tmp_path / "spliced" / "runs" / "loop-off")
    assert hypotheses == ["a", "b b b b b", "c", "d", "e", "f"] and references[1] == "ref 1"
