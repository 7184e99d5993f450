"""`agents.waitk_gpe:Agent` on real speech (espeak-ng): the embedded Whisper feeding the GPE decoder (embedded
Qwen2.5-Coder), driven by simulstream's own inference runner through our CLI."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import eval_configs

pytestmark = [pytest.mark.real_model, pytest.mark.harness]

SENTENCES = ["Good morning everyone.", "Today I will talk about the price of energy."]


def test_simulstream_runner_with_gpe_cascade(tmp_path, embedded_model_path):
    from agents.simulstream_cli import main
    from common.synthetic_speech import SynthesisError, synthesize_talk, write_segments_yaml

    try:
        spoken = {"talk.wav": synthesize_talk(SENTENCES, tmp_path / "talk.wav")}
    except SynthesisError as error:
        pytest.skip(str(error))
    (tmp_path / "wavs.txt").write_text("talk.wav\n")
    write_segments_yaml(spoken, tmp_path / "segments.yaml")
    log = tmp_path / "metrics.jsonl"
    assert main(["--agent", "agents.waitk_gpe:Agent", "--config", str(eval_configs.path("waitk_gpe_cpu")),
                 "--wav-list", str(tmp_path / "wavs.txt"), "--src-lang", "en", "--tgt-lang", "de",
                 "--metrics-log", str(log)]) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    chunks = [r for r in records if "generated_tokens" in r]
    assert chunks and all(r["deleted_tokens"] == [] for r in chunks)  # append-only
    from simulstream.metrics.readers import LogReader

    config = SimpleNamespace(**yaml.safe_load(Path(f"{log}.config.yaml").read_text()))
    (output,) = LogReader(config, str(log), latency_unit="word").final_outputs_and_latencies().values()
    text = output.final_text
    assert len(text.split()) >= 4 and "assistant" not in text.lower() and "<" not in text, text
    assert output.ideal_delays == sorted(output.ideal_delays)
