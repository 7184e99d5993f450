"""What a run ran on: the code (git commit, and whether the tree held uncommitted changes), the CPU, the packages
that decide its numbers and a hash of the input it read. Written beside each run as environment.json, so two runs
that disagree can be told apart."""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

from backends.cpu import cpu_identity, cpu_info, relevant_flags

ENVIRONMENT_FILE = "environment.json"
UNTRACKED_READ_BYTES = 1 << 20
# Packages whose versions change outputs or speed: the runtimes, the recogniser, the harnesses and the scorers.
PACKAGES = ("torch", "transformers", "llama_cpp_python", "ctranslate2", "faster-whisper", "simulstream", "simuleval",
            "omnisteval", "sacrebleu")


def git_state(root: Path) -> dict:
    """{"commit": HEAD or None outside a git checkout, "changed_files": files that differ from HEAD (untracked ones
    that git does not ignore included), "diff_sha1": a hash of those differences (two dirty trees with the same
    hash ran the same code), None for a clean tree}."""
    def git(*arguments: str) -> str | None:
        try:
            result = subprocess.run(["git", *arguments], cwd=root, capture_output=True, text=True, timeout=30,
                                    check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout if result.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "changed_files": [], "diff_sha1": None}
    changed = (git("diff", "HEAD", "--name-only") or "").splitlines()
    untracked = (git("ls-files", "--others", "--exclude-standard") or "").splitlines()
    digest = hashlib.sha1((git("diff", "HEAD") or "").encode())
    for name in untracked:
        path = root / name
        if path.is_file():  # a large file (a checkpoint left in the tree) counts by its size, not read whole
            size = path.stat().st_size
            digest.update(name.encode() + b"\0" + (path.read_bytes() if size <= UNTRACKED_READ_BYTES else
                                                    str(size).encode()))
    return {"commit": commit.strip(), "changed_files": changed + untracked,
            "diff_sha1": digest.hexdigest() if changed or untracked else None}


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment(root: Path, inputs_sha1: str | None = None) -> dict:
    """The record of one run; `inputs_sha1` is the digest of what it read (EvalSet.inputs_sha1: the synthetic
    talks' audio, which another espeak-ng build would make differently, or the source lines)."""
    model, flags = cpu_info()
    return {**git_state(root),
            "cpu": model, "cpu_identity": cpu_identity(), "cpu_flags": relevant_flags(flags), "cores": os.cpu_count(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "python": platform.python_version(),
            "packages": package_versions(), "inputs_sha1": inputs_sha1}


def read_environment(run_dir: Path) -> dict | None:
    """A run's environment.json, or None for a run made before it was written."""
    path = run_dir / ENVIRONMENT_FILE
    return json.loads(path.read_text()) if path.is_file() else None


def code_and_machine(environment: dict | None) -> str:
    """One line: the commit (with `+changes SHA` for a dirty tree), the CPU and its flags."""
    if environment is None:
        return f"unknown (no {ENVIRONMENT_FILE})"
    commit = (environment["commit"] or "no git checkout")[:10]
    if environment["diff_sha1"]:
        commit += f"+changes {environment['diff_sha1'][:8]}"
    cpu = f"{environment['cpu']} ({' '.join(environment['cpu_flags']) or 'no listed flags'})"
    if environment.get("cpu_identity"):
        cpu += f" [{environment['cpu_identity']}]"
    inputs = environment.get("inputs_sha1")
    return f"{commit}, {cpu}, inputs {inputs[:8] if inputs else 'not recorded'}"


def differences(run_dirs: dict[str, Path]) -> list[str]:
    """'name: commit, cpu, inputs' for every run, when the runs did not all run the same code, CPU, packages and
    input; else []. A record written before a key existed counts as a difference on it."""
    environments = {name: read_environment(run_dir) for name, run_dir in run_dirs.items()}
    keys = ("commit", "diff_sha1", "cpu", "cpu_identity", "cpu_flags", "packages", "inputs_sha1")
    seen = {json.dumps([env and env.get(key) for key in keys], sort_keys=True) for env in environments.values()}
    if len(seen) <= 1:
        return []
    return [f"{name}: {code_and_machine(env)}" for name, env in environments.items()]
