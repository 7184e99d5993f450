"""evaluation/identical_runs.py: two evaluations' outputs compared record by record, wall-clock time left out."""
from __future__ import annotations

import json

from evaluation.identical_runs import compare


def write_run(out, name, log, records, finished=True):
    path = out / "runs" / name / log
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    if finished:  # scored: simulagents eval writes the run's result.json last
        (out / "runs" / name / "result.json").write_text("{}")


def test_runs_are_identical_when_only_their_wall_clock_differs(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    line = {"index": 0, "prediction": "Hallo Welt.", "delays": [2, 3]}
    write_run(old, "text", "simuleval/instances.log", [{**line, "elapsed": [10, 20]}])
    write_run(new, "text", "simuleval/instances.log", [{**line, "elapsed": [11, 25]}])
    chunk = {"id": 0, "total_audio_processed": 2.0, "generated_tokens": ["Hallo"], "deleted_tokens": []}
    write_run(old, "speech", "metrics.jsonl", [{"model_loading_time": 3.7}, {**chunk, "computation_time": 0.5}])
    write_run(new, "speech", "metrics.jsonl", [{"model_loading_time": 3.0}, {**chunk, "computation_time": 0.7}])
    assert compare(old, new) == ["speech: identical (2 records)", "text: identical (1 records)"]


def test_a_changed_word_a_changed_delay_or_a_missing_run_is_reported(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    write_run(old, "a", "simuleval/instances.log", [{"prediction": "Hallo Welt.", "delays": [2, 3]}])
    write_run(new, "a", "simuleval/instances.log", [{"prediction": "Hallo, Welt.", "delays": [2, 3]}])
    write_run(old, "b", "simuleval/instances.log", [{"prediction": "x", "delays": [2]}])
    write_run(new, "b", "simuleval/instances.log", [{"prediction": "x", "delays": [3]}])
    write_run(old, "c", "metrics.jsonl", [{"generated_tokens": ["x"]}])
    write_run(old, "d", "metrics.jsonl", [{"generated_tokens": ["x"]}])
    write_run(new, "d", "metrics.jsonl", [], finished=False)
    report = compare(old, new)
    assert report[0].startswith("a: differs from record 0:") and '"Hallo, Welt."' in report[0]
    assert report[1].startswith("b: differs from record 0:") and "[3]" in report[1]
    assert report[2] == "c: missing in the second folder"
    assert report[3] == f"d: not finished in {new}"
