"""Running a text agent through SimulEval's real CLI on lines written to a temporary directory (shared by the
agent tests)."""
from __future__ import annotations

from pathlib import Path

from agents.harness.simuleval import run_simuleval_cli


def simuleval_text_run(tmp_path: Path, agent_class: str, sources: list[str], targets: list[str],
                       *extra: str) -> list[dict]:
    """SimulEval's CLI on `sources`/`targets` with `agent_class`; returns its instances (scores in tmp_path/out)."""
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n")
    return run_simuleval_cli(["--agent-class", agent_class, "--source", str(tmp_path / "src.txt"),
                              "--target", str(tmp_path / "tgt.txt"), "--output", str(tmp_path / "out"),
                              "--no-progress-bar", *extra])
