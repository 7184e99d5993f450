"""environment.json (evaluation/provenance.py): the commit and the state of the tree a run ran on, the CPU's
generation, and the warning the paired bootstrap prints when the runs it compares did not run the same code, CPU or
input."""
import json
import subprocess

from evaluation.provenance import ENVIRONMENT_FILE, differences, environment, git_state
from backends.cpu import cpu_identity


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
                          ("d", None), ("e", {"inputs_sha1": "abcdef0123"}),
                          ("f", {"cpu_identity": "AuthenticAMD family 26 model 2 stepping 0"})):
        runs[name] = tmp_path / name
        runs[name].mkdir()
        if changes is not None:
            (runs[name] / ENVIRONMENT_FILE).write_text(json.dumps({**here, **changes}))
    assert differences({name: runs[name] for name in "ab"}) == []
    lines = differences(runs)
    assert len(lines) == 6
    assert lines[2].startswith("c: 0123456789+changes feedbeef, ")
    assert lines[3] == f"d: unknown (no {ENVIRONMENT_FILE})"
    assert lines[0].endswith(", inputs not recorded") and lines[4].endswith(", inputs abcdef01")
    assert "[AuthenticAMD family 26 model 2 stepping 0]" in lines[5]
    for other in "ef":  # another input or another CPU generation alone is a difference
        assert len(differences({name: runs[name] for name in ("a", other)})) == 2


X86_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
stepping\t: 1
microcode\t: 0x1000065
flags\t\t: fpu avx2 avx512f avx512_bf16

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 26
"""
ARM_CPUINFO = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd bf16
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x1
CPU part\t: 0xd40
CPU revision\t: 1
"""


def test_the_cpu_generation_is_read_where_the_model_name_hides_it(tmp_path):
    """A hypervisor reports 'AMD EPYC' for every generation; /proc/cpuinfo's numbers (the first processor's) still
    tell Zen 4 from Zen 5, and an ARM core's implementer and part from another's."""
    x86, arm = tmp_path / "x86", tmp_path / "arm"
    x86.write_text(X86_CPUINFO)
    arm.write_text(ARM_CPUINFO)
    assert cpu_identity(x86) == "AuthenticAMD family 25 model 17 stepping 1 microcode 0x1000065"
    assert cpu_identity(arm) == "implementer 0x41 part 0xd40 variant 0x1 revision 1"
    assert cpu_identity(tmp_path / "missing") is None


def test_a_runs_harness_imports_the_code_of_the_checkout_that_started_it(tmp_path):
    """A text run's harness is the `simuleval` console script, which does not put its working directory on the path:
    a run started from a worktree of older code imported the venv's own checkout (2026-12-07). The harness's
    environment puts the starting checkout's code first."""
    import sys

    from evaluation.runs import harness_environment

    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "__init__.py").write_text("")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    imported = subprocess.run([sys.executable, "-c", "import agents; print(agents.__file__)"], cwd=elsewhere,
                              env=harness_environment(tmp_path), capture_output=True, text=True, check=True)
    assert imported.stdout.strip() == str(tmp_path / "agents" / "__init__.py")
