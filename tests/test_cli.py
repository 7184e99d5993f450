"""The `simulagents` console script: prepare-mcif writes SimulEval files, calibrate-heads writes a loadable head file
(end to end on a tiny checkpoint), and bad input gives one clear error line."""
import json

import pytest

from evaluation.cli import main
from backends.heads import load_heads
from common.datasets import CALIBRATION_TALKS, load_mcif


def test_prepare_mcif_writes_line_aligned_source_and_target(shared_data, tmp_path, capsys):
    out = tmp_path / "mcif-de"
    assert main(["prepare-mcif", "--target-lang", "de", "--split", "evaluation", "--data-dir", str(shared_data),
                 "--out", str(out)]) == 0
    sources = (out / "source.txt").read_text(encoding="utf-8").splitlines()
    targets = (out / "target.txt").read_text(encoding="utf-8").splitlines()
    assert len(sources) == len(targets) == 432
    evaluation = [line for line in load_mcif(shared_data, "de") if line.talk not in CALIBRATION_TALKS]
    assert sources[0] == " ".join(evaluation[0].source.split()) and all(s.strip() for s in sources)
    printed = capsys.readouterr().out
    assert "432 lines" in printed and str(out / "source.txt") in printed


def test_prepare_mcif_names_the_target_languages_the_set_has(shared_data, tmp_path, capsys):
    code = main(["prepare-mcif", "--target-lang", "fr", "--split", "evaluation", "--data-dir", str(shared_data),
                 "--out", str(tmp_path / "mcif-fr")])
    assert code == 2
    error = capsys.readouterr().err
    assert "no 'fr' references" in error and "de, it, zh" in error and "Traceback" not in error
    assert not (tmp_path / "mcif-fr").exists()


def test_eval_refuses_a_target_language_before_announcing_the_talks(shared_data, tmp_path, capsys):
    """`simulagents eval` on MCIF dev with a language it has no references for: the error, and no "preparing the
    synthetic talks" line before it (it used to print one, then fail)."""
    code = main(["eval", "--agent", "agents.alignatt4llm:Agent", "--dataset", "mcif-dev", "--tgt-lang", "fr",
                 "--data-dir", str(shared_data), "--cache", str(tmp_path / "sets"), "--out", str(tmp_path / "out")])
    assert code == 2
    captured = capsys.readouterr()
    assert "no 'fr' references" in captured.err and "de, it, zh" in captured.err
    assert "preparing" not in captured.out + captured.err and not (tmp_path / "sets").exists()


def test_mcif_speech_set_is_announced_only_when_made(monkeypatch, tmp_path):
    """The talks are announced when they must be spoken, not when a finished set is reused."""
    import yaml

    from evaluation import data
    from common.datasets import MCIFLine

    lines = [MCIFLine(0, 0, "t1", 0.5, 2.5, "Hello there.", "Hallo.")]
    monkeypatch.setattr(data, "mcif_lines", lambda *args, **kwargs: lines)

    def synthesis(sources, segments, out_dir, progress=None):
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "wavs.txt").write_text(f"{out_dir / 't1.wav'}\n")
        (out_dir / "audio-segments.yaml").write_text(yaml.safe_dump(segments))

    monkeypatch.setattr(data, "synthesize_long_form", synthesis)
    announced: list[str] = []
    first = data.mcif_speech_set("de", "calibration", tmp_path, announce=announced.append)
    second = data.mcif_speech_set("de", "calibration", tmp_path, announce=announced.append)
    assert first.segments == second.segments
    assert len(announced) == 1 and first.segments.parent.name in announced[0]


def test_calibrate_heads_end_to_end_on_a_tiny_checkpoint(tiny_checkpoint, toy_alignment_records, tmp_path, capsys):
    alignments = tmp_path / "word_alignments_en-de.json"
    alignments.write_text(json.dumps(toy_alignment_records), encoding="utf-8")
    out = tmp_path / "heads" / "tiny_en-de.json"
    assert main(["calibrate-heads", "--model", str(tiny_checkpoint("qwen3")), "--alignments", str(alignments),
                 "--target-lang", "de", "--split", "all", "--max-pairs", "4", "--top-k", "3", "--out", str(out)]) == 0
    head_set = load_heads(out)
    layers, heads = head_set.metadata["num_layers"], head_set.metadata["num_heads"]
    assert len(head_set.heads) == layers * heads and head_set.direction == "en-de"
    assert head_set.metadata["split"] == "all" and head_set.metadata["used_pairs"] == 4
    assert head_set.metadata["recommended_top_k"] == 3
    assert len(json.loads(out.read_text())["ts_matrix"]) == layers
    printed = capsys.readouterr().out
    assert printed.count("  TS ") == 3 and str(out) in printed


def test_calibrate_heads_rejects_a_direction_mismatch(toy_alignment_records, tmp_path, capsys):
    alignments = tmp_path / "word_alignments_en-de.json"
    alignments.write_text(json.dumps(toy_alignment_records), encoding="utf-8")
    code = main(["calibrate-heads", "--model", "unused", "--alignments", str(alignments), "--target-lang", "it",
                 "--split", "all", "--out", str(tmp_path / "h.json")])
    assert code == 2
    assert "en-de pairs, not en-it" in capsys.readouterr().err


def test_calibration_split_needs_mcif_pair_ids(toy_alignment_records, shared_data, tmp_path, capsys):
    records = [dict(record, pair_id=10_000 + i) for i, record in enumerate(toy_alignment_records)]
    alignments = tmp_path / "pairs.json"
    alignments.write_text(json.dumps(records), encoding="utf-8")
    code = main(["calibrate-heads", "--model", "unused", "--alignments", str(alignments), "--target-lang", "de",
                 "--data-dir", str(shared_data), "--out", str(tmp_path / "h.json")])
    assert code == 2
    assert "not MCIF dev lines" in capsys.readouterr().err


def test_subcommand_is_required():
    with pytest.raises(SystemExit):
        main([])
