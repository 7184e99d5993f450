"""evaluation/ablation.py: the ablation's rows are the paper preset and its changes, each one knob group, and a page's
generated table is what its committed results file renders (a hand edit or a stale file fails here)."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

import eval_configs
from agents.systems.config import AlignAttConfig, CascadeConfig
from evaluation import ablation
from common.config import build_config, read_yaml

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.mark.parametrize("kind, config_class", [("text", AlignAttConfig), ("speech", CascadeConfig)])
def test_each_change_is_a_knob_the_paper_sets_otherwise_and_the_shipped_preset_as_it_has_it(kind, config_class):
    """A row's change moves the paper preset's knobs to another value, and every change but the gate-off row is a
    value the package's own presets use (so the rows add up to the package's changes, one at a time)."""
    paper = build_config(config_class, read_yaml(eval_configs.path(Path(ablation.PAPER[kind]).stem)))
    for row in ablation.rows(kind):
        if row.system != "paper" or row.variant == "paper":
            continue
        changed = build_config(config_class, {**read_yaml(eval_configs.path(Path(row.config).stem)), **row.changes})
        moved = {key for key in row.changes if getattr(changed, key) != getattr(paper, key)}
        assert moved == set(row.changes), (row.variant, set(row.changes) - moved)
    named = {key for row in ablation.rows(kind) if row.system == "paper" for key in row.changes}
    shipped = build_config(config_class, read_yaml(eval_configs.path(Path(ablation.SHIPPED[kind]).stem)))
    differing = {f.name for f in dataclasses.fields(config_class) if getattr(paper, f.name) != getattr(shipped, f.name)}
    # every knob where the shipped preset decides otherwise than the paper is some row's change; speech leaves out
    # two that do nothing there: the forced aligner (Whisper times its own words) and text input's held-back words
    assert differing - named <= ({"aligner_model", "hold_back_words"} if kind == "speech" else set())


def test_commands_group_the_rows_by_system_and_name_each_variant():
    args = argparse.Namespace(split="calibration", tgt_lang="de", out=Path("runs/x"), jobs=2, max_talks=0, set=[])
    commands = ablation.eval_commands(ablation.rows("text"), args)
    systems = [command[command.index("--name") + 1] for command in commands]
    assert systems == ["wait-k", "offline", "local-agreement", "shipped", "paper"]
    paper = commands[-1]
    assert paper[paper.index("--variant") + 1] == "paper" and "gate-off:border=100000" in paper
    assert "--offline-only" in commands[1]


RESULTS = {"kind": "text", "split": "mcif-calibration", "lines": 174, "date": "2026-12-07",
           "environment": {"cpu": "AMD EPYC", "commit": "0123456789"},
           "rows": [{"what": "wait-3", "BLEU": 14.5, "BLEU p": None, "chrF": 43.37, "chrF p": None, "latency": 3.98,
                     "latency CA": None, "gate %": 0.0},
                    {"what": "paper", "BLEU": 13.2, "BLEU p": 0.012, "chrF": 42.0, "chrF p": 0.2, "latency": 3.5,
                     "latency CA": None, "gate %": 41.3},
                    {"what": "offline", "BLEU": 15.0, "BLEU p": 0.001, "chrF": 44.0, "chrF p": 0.01,
                     "latency": None, "latency CA": None, "gate %": None}]}


def test_a_results_file_renders_as_the_table_between_its_markers(tmp_path, monkeypatch):
    table = ablation.render(RESULTS)
    assert "| paper | 13.20 (0.012) | 42.00 (0.200) | 3.50 | 41 |" in table
    assert "| wait-3 | 14.50 | 43.37 | 3.98 | 0 |" in table and "| offline | 15.00 (0.001) | 44.00 (0.010) |  |  |" in table
    import json

    (tmp_path / "r.json").write_text(json.dumps(RESULTS))
    monkeypatch.setattr(ablation, "REPO", tmp_path)
    page = ("intro\n<!-- generated from r.json by evaluation/ablation.py -->\nstale table\n"
            "<!-- end of generated table -->\nafter\n")
    assert ablation.generated(page) == (f"intro\n<!-- generated from r.json by evaluation/ablation.py -->\n{table}\n"
                                        "<!-- end of generated table -->\nafter\n")


def test_every_generated_table_in_the_docs_is_what_its_results_file_renders():
    for page in DOCS.rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        assert ablation.generated(text) == text, f"{page}: regenerate with evaluation/ablation.py table ... --doc"
