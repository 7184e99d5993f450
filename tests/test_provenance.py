"""environment.json (agents/evaluation/provenance.py): the commit and the state of the tree a run ran on, and the
warning the paired bootstrap prints when the runs it compares did not run the same code or CPU."""
import json
import subprocess

from agents.evaluation.provenance import ENVIRONMENT_FILE, differences, environment, git_state


def git(repo, *arguments):
    return subprocess.run(["git", *arguments], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()


def test_the_commit_and_every_uncommitted_change_are_recorded(tmp_path):
    assert git_state(tmp_path) == {"commit": None, "changed_files": [], "diff_sha1": None}  # not a checkout
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("runs/\n")
    (tmp_path / "policy.py").write_text("BORDER = 1\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "out.txt").write_text("ignored output\n")
    clean = git_state(tmp_path)
    assert clean == {"commit": git(tmp_path, "rev-parse", "HEAD"), "changed_files": [], "diff_sha1": None}

    (tmp_path / "policy.py").write_text("BORDER = 2\n")
    edited = git_state(tmp_path)
    assert edited["commit"] == clean["commit"] and edited["changed_files"] == ["policy.py"] and edited["diff_sha1"]
    (tmp_path / "new_module.py").write_text("X = 1\n")
    added = git_state(tmp_path)
    assert added["changed_files"] == ["policy.py", "new_module.py"] and added["diff_sha1"] != edited["diff_sha1"]
    (tmp_path / "new_module.py").write_text("X = 2\n")  # the same file names, other code: another hash
    assert git_state(tmp_path)["diff_sha1"] != added["diff_sha1"]


def test_runs_of_other_code_or_cpus_are_named_and_alike_runs_are_not(tmp_path):
    here = environment(tmp_path)
    runs = {}
    for name, changes in (("a", {}), ("b", {}), ("c", {"commit": "0123456789abcdef", "diff_sha1": "feedbeef00"}),
                          ("d", None)):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        if changes is not None:
            (runs[name] / ENVIRONMENT_FILE).write_text(json.dumps({**here, **changes}))
    assert differences({name: runs[name] for name in "ab"}) == []
    lines = differences(runs)
    assert len(lines) == 4
    assert lines[2].startswith("c: 0123456789+changes feedbeef, ")
    assert lines[3] == f"d: unknown (no {ENVIRONMENT_FILE})"
