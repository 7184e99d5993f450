"""The IWSLT 2026 submission path on a short espeak-ng talk with the embedded default, with real harness code only:
simulstream's own `simulstream_inference` given language names (as the organizers pass them), our `simulstream`
command with no `--config`, and simulstream's HTTP server driven by its own unpatched `HttpProxySpeechProcessor`.
Each must give exactly the text of the in-process reference run (same agent, same preset)."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import eval_configs

pytestmark = [pytest.mark.real_model, pytest.mark.harness]

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SENTENCES = [("Good morning everyone.", "Guten Morgen zusammen."),
             ("Today I will talk about the price of energy.", "Heute spreche ich über den Preis der Energie.")]
PROXY_TYPE = "simulstream.server.speech_processors.remote.http_proxy_speech_processor.HttpProxySpeechProcessor"


@pytest.fixture(scope="module")
def talk(tmp_path_factory):
    from agents.synthetic_speech import SynthesisError, synthesize_talk, write_segments_yaml

    folder = tmp_path_factory.mktemp("talk")
    try:
        spoken = synthesize_talk([source for source, _ in SENTENCES], folder / "energy.wav")
    except SynthesisError as error:
        pytest.skip(str(error))
    (folder / "wavs.txt").write_text("energy.wav\n")
    write_segments_yaml({"energy.wav": spoken}, folder / "segments.yaml")
    (folder / "ref.de").write_text("".join(target + "\n" for _, target in SENTENCES))
    return folder


def final_text(log: Path, eval_config: Path) -> str:
    from simulstream.metrics.readers import LogReader

    config = SimpleNamespace(**yaml.safe_load(eval_config.read_text()))
    outputs = LogReader(config, str(log), latency_unit="word").final_outputs()
    assert list(outputs) == ["energy"], outputs
    return outputs["energy"]


@pytest.fixture(scope="module")
def reference_text(talk, embedded_model_path) -> str:
    """The in-process run: our CLI, the preset named explicitly, ISO codes."""
    from agents.simulstream_cli import main

    log = talk / "reference" / "metrics.jsonl"
    assert main(["--agent", "agents.alignatt4llm:Agent", "--config", str(eval_configs.path("alignatt4llm_cpu")),
                 "--wav-list", str(talk / "wavs.txt"), "--src-lang", "en", "--tgt-lang", "de",
                 "--metrics-log", str(log)]) == 0
    text = final_text(log, Path(f"{log}.config.yaml"))
    assert len(text.split()) >= 4, text
    return text


def run(arguments, timeout=600, **kwargs) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([str(a) for a in arguments], capture_output=True, text=True, timeout=timeout, env=env,
                            cwd=REPO, **kwargs)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def test_simulstreams_own_runner_takes_language_names(talk, reference_text, tmp_path):
    log = tmp_path / "metrics.jsonl"
    preset = eval_configs.path("alignatt4llm_cpu")
    run([BIN / "simulstream_inference", "--speech-processor-config", preset, "--wav-list-file", talk / "wavs.txt",
         "--src-lang", "English", "--tgt-lang", "German", "--metrics-log-file", log])
    assert final_text(log, preset) == reference_text


def test_the_simulstream_command_with_no_config_runs_the_embedded_default(talk, reference_text, tmp_path):
    log = tmp_path / "metrics.jsonl"
    run([BIN / "simulstream", "--agent", "agents.alignatt4llm:Agent", "--wav-list", talk / "wavs.txt",
         "--src-lang", "English", "--tgt-lang", "German", "--metrics-log", log])
    effective = yaml.safe_load(Path(f"{log}.config.yaml").read_text())
    assert effective == yaml.safe_load(eval_configs.path("alignatt4llm_cpu").read_text())
    assert final_text(log, Path(f"{log}.config.yaml")) == reference_text
