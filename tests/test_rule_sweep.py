"""evaluation/rule_sweep.py: a rule's lines chosen from the policy log, and a subset run put back into the whole."""
from __future__ import annotations

import json
import sys

from evaluation import report
from evaluation.runs import POLICY_LOG, run_lines
from evaluation import rule_sweep


RESULT = {"run": {"system": "all-on", "agent": "x:TextAgent", "kind": "text", "regime": "default", "settings": {}},
          "dataset": "mcif-calibration", "source_lang": "en", "target_lang": "de", "scores": {}}


def text_run(folder, hypotheses, log_rows):
    """A finished text run: SimulEval's instances log, its result and the policy log, one row per line."""
    (folder / "simuleval").mkdir(parents=True)
    rows = [{"index": i, "prediction": h, "delays": [1] * len(h.split()), "elapsed": [0] * len(h.split()),
             "prediction_length": len(h.split()), "reference": f"ref {i}", "source": f"src {i}", "source_length": 2}
            for i, h in enumerate(hypotheses)]
    (folder / "simuleval" / "instances.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "simuleval" / "config.yaml").write_text("source_type: text\ntarget_type: text\n")
    (folder / POLICY_LOG).write_text("".join(json.dumps(r) + "\n" for r in log_rows))
    (folder / "result.json").write_text(json.dumps(RESULT))
    (folder / "environment.json").write_text("{}")
    return folder


def test_a_rules_lines_are_those_where_it_fired_and_the_subset_run_goes_back_in_their_place(tmp_path, monkeypatch):
    quiet = {"fired_loop": 0, "fired_copy": 0, "fired_final_retries": 0, "fired_language_turn": 0}
    rows = [quiet, {**quiet, "fired_loop": 2}, quiet, {**quiet, "fired_copy": 1, "fired_final_retries": 1},
            quiet, {**quiet, "fired_language_turn": 1}]
    base = text_run(tmp_path / "all-on", ["a", "b b b", "c", "d", "e", "f"], rows)
    assert rule_sweep.fired_lines(base, "loop") == [1]
    assert rule_sweep.fired_lines(base, "final_retries") == [3]
    rule_sweep.select(base, ["loop", "copy"], tmp_path / "lines", controls=1)
    assert (tmp_path / "lines" / "loop.lines").read_text().split() == ["0", "1"]  # one quiet line as a control
    assert (tmp_path / "lines" / "loop.src").read_text().splitlines() == ["src 0", "src 1"]
    subset = text_run(tmp_path / "loop-off", ["a", "b b b b b"], [quiet, quiet])  # the loop off: nothing fired
    rule_sweep.splice(base, subset, tmp_path / "lines" / "loop.lines", "loop-off", tmp_path / "spliced")
    hypotheses, references, _ = run_lines(tmp_path / "spliced" / "runs" / "loop-off")
    assert hypotheses == ["a", "b b b b b", "c", "d", "e", "f"] and references[1] == "ref 1"
    assert rule_sweep.fired_lines(tmp_path / "spliced" / "runs" / "loop-off", "loop") == []  # the subset's log
    assert rule_sweep.fired_lines(tmp_path / "spliced" / "runs" / "loop-off", "copy") == [3]


def test_a_spliced_text_run_keeps_each_lines_delays_and_simuleval_scores_it_again(tmp_path):
    def run(folder, delays):
        """Two-word lines of a two-word source, one delay list per line."""
        (folder / "simuleval").mkdir(parents=True)
        rows = [{"index": i, "prediction": "x y", "delays": d, "elapsed": [0, 0], "prediction_length": 2,
                 "reference": "r s", "source": "a b", "source_length": 2} for i, d in enumerate(delays)]
        (folder / "simuleval" / "instances.log").write_text("".join(json.dumps(r) + "\n" for r in rows))
        (folder / "simuleval" / "config.yaml").write_text("source_type: text\ntarget_type: text\n")
        (folder / "result.json").write_text(json.dumps(RESULT))
        (folder / "environment.json").write_text("{}")
        return folder

    base = run(tmp_path / "all-on", [[2, 2], [2, 2]])  # each line waits for the whole source: LAAL 2
    subset = run(tmp_path / "subset", [[1, 2]])  # its first word after one source word: (1 + (2 - 1)) / 2 = 1
    (tmp_path / "one.lines").write_text("1\n")
    rule_sweep.splice(base, subset, tmp_path / "one.lines", "new", tmp_path / "spliced")
    spliced = tmp_path / "spliced" / "runs" / "new"
    rows = [json.loads(line) for line in (spliced / "simuleval" / "instances.log").read_text().splitlines()]
    assert [r["index"] for r in rows] == [0, 1] and rows[1]["delays"] == [1, 2]
    assert json.loads((spliced / "result.json").read_text())["scores"]["LAAL"] == 1.5  # (2 + 1) / 2 lines
    [result] = report.collect(tmp_path / "spliced")  # the folder's report reads it as a run of its own name
    assert result.run["system"] == "new" and result.value("LAAL") == 1.5 and result.value("chrF") is not None


def test_a_union_is_every_line_where_any_of_the_rules_fired(tmp_path):
    quiet = {"fired_loop": 0, "fired_copy": 0, "preambles": 0}
    rows = [quiet, {**quiet, "fired_loop": 1}, quiet, {**quiet, "fired_copy": 1}, {**quiet, "fired_loop": 1},
            {**quiet, "preambles": 1}]
    base = text_run(tmp_path / "all-on", ["a", "b", "c", "d", "e", "f"], rows)
    rule_sweep.select(base, ["loop", "copy"], tmp_path / "lines", controls=1, union="changed", counts=("preambles",))
    assert (tmp_path / "lines" / "changed.lines").read_text().split() == ["0", "1", "3", "4", "5"]
    assert not (tmp_path / "lines" / "loop.lines").exists()
