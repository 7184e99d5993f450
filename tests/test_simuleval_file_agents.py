"""`simuleval --agent agents/<system>.py`: SimulEval's file form (the file run as a module named "agents", its
`@entrypoint` class evaluated) works for every agent file, and gives what `--agent-class` gives."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from harness_runs import simuleval_text_run

pytest.importorskip("simuleval")

REPO = Path(__file__).resolve().parents[1]
FILE_AGENTS = [("alignatt4llm", "TextAgent"), ("ssbd", "TextAgent"), ("waitk_gpe", "TextAgent"),
               ("simulmask", "TextAgent"), ("star", "SpeechAgent")]


def entrypoints_of(file: Path, monkeypatch, *arguments: str) -> list:
    """What SimulEval's own loader registers for `simuleval --agent FILE ARGUMENTS`."""
    from simuleval.utils.agent import EVALUATION_SYSTEM_LIST, get_agent_class, import_file

    monkeypatch.setattr(sys, "argv", ["simuleval", "--agent", str(file), *arguments])
    EVALUATION_SYSTEM_LIST.clear()
    import_file(str(file))
    registered = list(EVALUATION_SYSTEM_LIST)
    EVALUATION_SYSTEM_LIST.clear()
    return registered


@pytest.mark.parametrize("system,agent", FILE_AGENTS)
def test_every_agent_file_marks_its_simuleval_agent(system, agent, monkeypatch):
    expected = getattr(importlib.import_module(f"agents.{system}"), agent)
    assert entrypoints_of(REPO / "agents" / f"{system}.py", monkeypatch) == [expected]


def test_agent_class_picks_another_agent_of_the_same_file(monkeypatch):
    from agents.alignatt4llm import WaitkTextAgent

    registered = entrypoints_of(REPO / "agents" / "alignatt4llm.py", monkeypatch,
                                "--agent-class", "agents.alignatt4llm.WaitkTextAgent")
    assert registered == [WaitkTextAgent]


SOURCES = ["The cat sat on the mat .", "Where is the train station ?"]
TARGETS = ["Die Katze saß auf der Matte .", "Wo ist der Bahnhof ?"]


@pytest.mark.harness
def test_simuleval_cli_runs_an_agent_file_as_it_runs_its_class(tmp_path, tiny_checkpoint):
    from agents.harness.simuleval import run_simuleval_cli

    knobs = ["--model", str(tiny_checkpoint("qwen2")), "--source-lang", "English", "--target-lang", "German",
             "--k", "2", "--max-word-tokens", "3", "--no-progress-bar"]
    (tmp_path / "class").mkdir()
    by_class = simuleval_text_run(tmp_path / "class", "agents.waitk_gpe.TextAgent", SOURCES, TARGETS, *knobs)
    by_file = run_simuleval_cli(["--agent", str(REPO / "agents" / "waitk_gpe.py"), "--source",
                                 str(tmp_path / "class" / "src.txt"), "--target", str(tmp_path / "class" / "tgt.txt"),
                                 "--output", str(tmp_path / "file"), *knobs])
    assert [i["prediction"] for i in by_file] == [i["prediction"] for i in by_class]
    assert [i["delays"] for i in by_file] == [i["delays"] for i in by_class]
    assert all(i["prediction"].split() for i in by_file)
