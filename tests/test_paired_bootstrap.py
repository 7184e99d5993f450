"""The paired bootstrap over the runs of an eval folder (evaluation/paired_bootstrap.py) and `run_lines`, which reads
each kind of finished run back onto the reference lines."""
import json
import os

import pytest

from evaluation.runs import EvaluationError, run_lines
from evaluation import paired_bootstrap

REFERENCES = [f"Das ist der Satz Nummer {i} über das Modell und die Daten." for i in range(60)]
SOURCES = [f"This is sentence number {i} about the model and the data." for i in range(60)]
POOR = [f"Satz {i} Modell." for i in range(60)]


def offline_run(out, name, hypotheses, references=REFERENCES):
    run = out / "runs" / name
    run.mkdir(parents=True)
    (run / "offline.txt").write_text("\n".join(hypotheses) + "\n")
    (run / "reference.txt").write_text("\n".join(references) + "\n")
    (run / "source.txt").write_text("\n".join(SOURCES) + "\n")
    (run / "result.json").write_text(json.dumps({"target_lang": "de"}))
    return run


def speech_run(out, name, hypotheses):
    run = out / "runs" / name
    (run / "omnisteval").mkdir(parents=True)
    rows = [{"index": i, "prediction": h, "reference": r + "\n"}
            for i, (h, r) in enumerate(zip(hypotheses, REFERENCES))]
    (run / "omnisteval" / "instances.resegmented.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    (run / "source.txt").write_text("\n".join(SOURCES) + "\n")
    (run / "result.json").write_text(json.dumps({"target_lang": "de"}))
    return run


def test_run_lines_reads_speech_and_offline_runs_onto_the_reference_lines(tmp_path):
    speech = speech_run(tmp_path, "streamed", POOR)
    offline = offline_run(tmp_path, "offline", REFERENCES)
    assert run_lines(speech) == (POOR, REFERENCES, SOURCES)  # the reference's trailing newline stripped
    assert run_lines(offline) == (REFERENCES, REFERENCES, SOURCES)
    unfinished = tmp_path / "runs" / "unfinished"
    unfinished.mkdir()
    with pytest.raises(EvaluationError, match="did not finish"):
        run_lines(unfinished)


def test_a_perfect_run_differs_from_a_poor_one_and_a_copy_scores_alike():
    half = [r if i % 2 else p for i, (r, p) in enumerate(zip(REFERENCES, POOR))]
    rows = paired_bootstrap.paired_bootstrap({"poor": POOR, "copy": list(POOR), "perfect": REFERENCES, "half": half},
                                             REFERENCES, baseline="poor", target_lang="de", samples=200)
    by_name = {row["system"]: row for row in rows}
    assert rows[0]["system"] == "poor" and by_name["poor"]["BLEU"][3] is None  # the baseline has no p-value
    assert by_name["perfect"]["BLEU"][0] == pytest.approx(100.0)
    assert by_name["perfect"]["BLEU"][3] < 0.05 and by_name["perfect"]["chrF"][3] < 0.05
    # identical output: the same score, mean and interval (sacrebleu gives a run against itself its smallest p,
    # on purpose: "a zero difference should not be attributed to chance")
    assert by_name["copy"]["BLEU"][:3] == pytest.approx(by_name["poor"]["BLEU"][:3])
    score, mean, half_width, _ = by_name["half"]["BLEU"]
    assert by_name["poor"]["BLEU"][0] < score < 100.0
    assert half_width > 0 and mean - half_width < score < mean + half_width


def test_the_tool_prints_every_run_the_same_way_twice_and_leaves_the_seed_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    speech_run(tmp_path, "streamed_default", POOR)
    offline_run(tmp_path, "streamed_offline", REFERENCES)
    arguments = [str(tmp_path), "--baseline", "streamed_default", "--samples", "100"]
    paired_bootstrap.main(arguments)
    first = capsys.readouterr().out
    paired_bootstrap.main(arguments)
    assert capsys.readouterr().out == first
    assert "60 lines" in first and "streamed_offline" in first and "base" in first
    assert os.environ["SACREBLEU_SEED"] == "7"


def test_runs_of_other_test_sets_or_unknown_names_are_refused(tmp_path):
    offline_run(tmp_path, "a", POOR)
    offline_run(tmp_path, "b", POOR, references=[r + " Anders." for r in REFERENCES])
    with pytest.raises(SystemExit, match="other references than a"):
        paired_bootstrap.main([str(tmp_path), "--baseline", "a"])
    with pytest.raises(SystemExit, match="no finished run c .*there are: a, b"):
        paired_bootstrap.main([str(tmp_path), "--baseline", "c"])
    with pytest.raises(SystemExit, match="no finished runs"):
        paired_bootstrap.main([str(tmp_path / "empty"), "--baseline", "a"])


def test_runs_of_other_code_are_named_under_the_table(tmp_path, capsys):
    speech_run(tmp_path, "new_default", POOR)
    old = offline_run(tmp_path, "old_offline", REFERENCES)
    paired_bootstrap.main([str(tmp_path), "--baseline", "new_default", "--samples", "50"])
    assert "Not the same code" not in capsys.readouterr().out  # neither run says: nothing to tell apart
    (old / "environment.json").write_text(json.dumps({"commit": "abcdef1234567", "diff_sha1": None, "cpu": "CPU X",
                                                      "cpu_flags": ["avx2"], "packages": {}}))
    paired_bootstrap.main([str(tmp_path), "--baseline", "new_default", "--samples", "50"])
    printed = capsys.readouterr().out
    assert "Not the same code, CPU or packages" in printed
    assert "old_offline: abcdef1234, CPU X (avx2)" in printed and "new_default: unknown" in printed
