"""Following a system from its harness to its backend takes at most MAX_PATH_FILES files of the package: each system
runs through its harness (simulstream's processor protocol, SimulEval's own CLI) under a profiler, and every call
chain from the harness into a backend or policy function, loading included, passes through at most that many
distinct files of `agents/`, `policies/`, `backends/` and `common/` (docs/design.md's layout section names each path)."""
from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Self

import numpy as np
import pytest
from harness_runs import simuleval_text_run
from tiny_checkpoints import STAR_SENTENCES

import eval_configs
from common.config import read_yaml

MAX_PATH_FILES = 6
REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "policies", "backends", "common")
ENDPOINTS = ("backends/", "policies/")  # where a system's path ends: a model or a decision
SOURCES = ["The cat sat on the mat .", "I would like a cup of coffee ."]
TARGETS = ["Die Katze saß auf der Matte .", "Ich hätte gern eine Tasse Kaffee ."]

pytestmark = pytest.mark.harness


class CallChains:
    """Records, on every call into an endpoint file, the package files on the stack (outermost first, each run of
    frames in one file counted once): the chain of files a reader follows from the harness to that call."""

    def __init__(self):
        self.chains: set[tuple[str, ...]] = set()
        self._names: dict[str, str | None] = {}  # code file -> package file (None: not the package's)

    def _package_file(self, filename: str) -> str | None:
        if filename not in self._names:
            path = Path(filename)
            relative = path.relative_to(REPO).as_posix() if path.is_absolute() and path.is_relative_to(REPO) else ""
            self._names[filename] = relative if relative.split("/")[0] in PACKAGES else None
        return self._names[filename]

    def _profile(self, frame, event, arg) -> None:
        if event != "call":
            return
        called = self._package_file(frame.f_code.co_filename)
        if called is None or not called.startswith(ENDPOINTS):
            return
        files: list[str] = []
        while frame is not None:
            name = self._package_file(frame.f_code.co_filename)
            if name is not None and (not files or files[-1] != name):
                files.append(name)
            frame = frame.f_back
        self.chains.add(tuple(reversed(files)))

    def __enter__(self) -> Self:
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        threading.setprofile(None)

    def files(self) -> set[str]:
        return {name for chain in self.chains for name in chain}


def to_endpoint(chain: tuple[str, ...]) -> tuple[str, ...]:
    """The chain up to where it enters a backend (a folder of backends/: hf/, llama_cpp/, asr/, star/, ...) or a
    policy: what lies past that is the backend's or the policy's own business."""
    for position, name in enumerate(chain):
        if name.startswith("policies/") or (name.startswith("backends/") and name.count("/") >= 2):
            return chain[:position + 1]
    return chain


def check_path(chains: CallChains, harness: str, system: str, backend: str) -> None:
    """Every chain up to its endpoint, plus the system module a user names (a declarative one runs no code of its
    own), stays within MAX_PATH_FILES files; the chains start at the harness and reach the system's backend."""
    longest = max(map(to_endpoint, chains.chains), key=lambda chain: (len({*chain, system}), chain))
    count = len({*longest, system})
    for end in (backend, "policies/"):  # the paths docs/design.md names (seen with `pytest -s`)
        chain = max((c for c in map(to_endpoint, chains.chains) if c[-1].startswith(end)), default=(), key=len)
        print(f"\n{system}: {' -> '.join(chain)}")
    assert count <= MAX_PATH_FILES, f"{count} files from the harness to the backend: {system}, {' -> '.join(longest)}"
    assert all(chain[0] == harness for chain in chains.chains), "a chain that does not start at the harness"
    assert any(name.startswith(backend) for name in chains.files()), f"the run never reached {backend}"


@pytest.fixture(scope="module")
def talk() -> np.ndarray:
    from common.synthetic_speech import SynthesisError, speak

    try:
        return np.concatenate([speak(sentence) for sentence in STAR_SENTENCES])
    except SynthesisError as error:
        pytest.skip(str(error))


def simulstream_chains(agent: str, values: dict, audio: np.ndarray) -> CallChains:
    """Load the agent as simulstream's runner does and stream `audio` in its chunks, then end the stream."""
    import importlib

    module, name = agent.split(":")
    processor_class = getattr(importlib.import_module(module), name)
    config = SimpleNamespace(**values)
    step = round(16_000 * values["speech_chunk_size"])
    with CallChains() as chains:
        processor_class.load_model(config)
        processor = processor_class(config)
        for start in range(0, len(audio) - step + 1, step):
            processor.process_chunk(audio[start:start + step])
        processor.end_of_stream()
    return chains


# The CPU presets run on llama.cpp; this is the transformers runtime of the same model (`--set backend=hf ...`).
TRANSFORMERS = {"backend": "hf", "gguf_weights": "", "n_threads": 0, "model_dtype": "bfloat16"}


def preset(name: str, **overrides) -> dict:
    return {**read_yaml(eval_configs.path(name)), **overrides}


@pytest.mark.real_model
@pytest.mark.parametrize("agent,values,system,backend", [
    ("agents.alignatt4llm:Agent", ("alignatt4llm_cpu", {}), "agents/alignatt4llm.py", "backends/llama_cpp/"),
    ("agents.alignatt4llm:Agent", ("alignatt4llm_cpu", TRANSFORMERS), "agents/alignatt4llm.py", "backends/hf/"),
    ("agents.alignatt4llm:WaitkAgent", ("waitk_cpu", {}), "agents/alignatt4llm.py", "backends/llama_cpp/"),
    ("agents.alignatt4llm:LocalAgreementAgent", ("local_agreement_cpu", {}), "agents/alignatt4llm.py",
     "backends/llama_cpp/"),
    ("agents.waitk_gpe:Agent", ("waitk_gpe_cpu", {}), "agents/waitk_gpe.py", "backends/streaming_masks/"),
    ("agents.ssbd:Agent", ("ssbd_cpu", {}), "agents/ssbd.py", "backends/llama_cpp/"),
], ids=["alignatt", "alignatt-hf", "waitk", "local_agreement", "waitk_gpe", "ssbd"])
def test_speech_cascades_reach_their_backend_within_six_files(agent, values, system, backend, talk,
                                                             embedded_model_path):
    name, overrides = values
    chains = simulstream_chains(agent, preset(name, **overrides), talk)
    check_path(chains, "agents/harness/simulstream.py", system, backend)


def test_star_reaches_its_backend_within_six_files(star_checkpoint, talk):
    values = {"type": "agents.star.Agent", "checkpoint": str(star_checkpoint), "max_tokens": 24,
              "speech_chunk_size": 0.32, "source_lang": "en", "target_lang": "en"}
    chains = simulstream_chains("agents.star:Agent", values, talk)
    check_path(chains, "agents/harness/simulstream.py", "agents/star.py", "backends/star/")


LLM_TEXT = ["--max-new-tokens", "4"]
WORD_WAITK_TEXT = ["--k", "2", "--max-word-tokens", "3"]


@pytest.mark.parametrize("agent,system,backend,arch,extra", [
    ("agents.alignatt4llm.TextAgent", "agents/alignatt4llm.py", "backends/hf/", "qwen2", [*LLM_TEXT, "--heads"]),
    ("agents.alignatt4llm.LocalAgreementTextAgent", "agents/alignatt4llm.py", "backends/hf/", "qwen2", LLM_TEXT),
    ("agents.waitk_gpe.TextAgent", "agents/waitk_gpe.py", "backends/streaming_masks/", "qwen2", WORD_WAITK_TEXT),
    ("agents.ssbd.TextAgent", "agents/ssbd.py", "backends/hf/", "qwen2", [*LLM_TEXT, "--backend", "hf"]),
    ("agents.simulmask.TextAgent", "agents/simulmask.py", "backends/simulmask/", "falcon", WORD_WAITK_TEXT),
], ids=["alignatt", "local_agreement", "waitk_gpe", "ssbd", "simulmask"])
def test_text_agents_reach_their_backend_within_six_files(agent, system, backend, arch, extra, tiny_checkpoint,
                                                          tmp_path):
    if extra[-1] == "--heads":  # a tiny model has no calibrated heads: two of its own
        from backends.heads import HeadSet, save_heads

        save_heads(HeadSet(((0, 0), (1, 1))), tmp_path / "heads.json")
        extra = [*extra, str(tmp_path / "heads.json")]
    with CallChains() as chains:
        simuleval_text_run(tmp_path, agent, SOURCES, TARGETS, "--model", str(tiny_checkpoint(arch)),
                           "--source-lang", "en", "--target-lang", "de", *extra)
    check_path(chains, "agents/harness/simuleval.py", system, backend)


def test_a_chain_longer_than_the_limit_is_reported_and_one_ends_at_its_backend():
    chains = CallChains()
    chains.chains.add(("agents/harness/simulstream.py", "agents/x.py", "agents/systems/a.py", "agents/systems/b.py",
                       "common/c.py", "backends/d.py", "backends/e/lm.py"))
    with pytest.raises(AssertionError, match="7 files from the harness"):
        check_path(chains, "agents/harness/simulstream.py", "agents/x.py", "backends/e/")
    assert to_endpoint(("agents/harness/simuleval.py", "backends/choice.py", "backends/hf/lm.py", "backends/models.py",
                        "backends/sources.py")) == ("agents/harness/simuleval.py", "backends/choice.py",
                                                    "backends/hf/lm.py")
    assert to_endpoint(("agents/a.py", "policies/degenerate.py", "policies/units.py")) == ("agents/a.py",
                                                                                            "policies/degenerate.py")
