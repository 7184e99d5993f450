"""The SimulEval text adapter, driven by SimulEval 1.1.4's own CLI and evaluator with a fake translator."""
import argparse
import sys
from types import SimpleNamespace

import pytest
from simuleval.agents.actions import ReadAction, WriteAction
from simuleval.data.segments import TextSegment

from common.config import ConfigError, config_from_namespace
from agents.harness.simuleval import run_simuleval_cli
from fake_agents import FakeConfig, FakeUppercaseTextAgent
from harness_runs import simuleval_text_run

pytestmark = pytest.mark.harness


def run_simuleval(tmp_path, sources, targets, *extra):
    return simuleval_text_run(tmp_path, "fake_agents.FakeUppercaseTextAgent", sources, targets, *extra)


def test_real_simuleval_cli_runs_the_protocol(tmp_path):
    FakeUppercaseTextAgent.instances.clear()
    instances = run_simuleval(tmp_path, ["a b c d", "e f g"], ["A B C D", "E F G"], "--lag", "2")
    assert [i["prediction"] for i in instances] == ["A B C D", "E F G"]
    # lag 2: the word i (1-based) is written after reading i + 2 words, the tail at the end of the source.
    assert instances[0]["delays"] == [3, 4, 4, 4]
    assert instances[1]["delays"] == [3, 3, 3]
    (translator,) = FakeUppercaseTextAgent.instances
    # One policy call per source word, the last one a flush that carries the final word; state reset in between.
    assert translator.calls == [("feed", ("a",)), ("feed", ("b",)), ("feed", ("c",)), ("flush", ("d",)),
                                ("feed", ("e",)), ("feed", ("f",)), ("flush", ("g",))]


def test_chrf_is_scored_next_to_bleu(tmp_path):
    from sacrebleu.metrics import CHRF

    run_simuleval(tmp_path, ["a bb ccc", "dd e"], ["A BB CC", "DD E F"], "--lag", "1",
                  "--quality-metrics", "BLEU", "CHRF")
    header, values = (tmp_path / "out" / "scores.tsv").read_text().splitlines()[:2]
    scores = dict(zip(header.split("\t"), values.split("\t")))
    expected = CHRF().corpus_score(["A BB CCC", "DD E"], [["A BB CC", "DD E F"]]).score
    assert float(scores["CHRF"]) == pytest.approx(expected, abs=1e-3)


def test_char_targets_reach_simuleval_as_characters(tmp_path):
    instances = run_simuleval(tmp_path, ["ab cd"], ["ABCD"], "--target-lang", "zh", "--eval-latency-unit", "char")
    assert instances[0]["prediction"] == "ABCD"


def test_stateless_policy_call_with_explicit_states():
    agent = FakeUppercaseTextAgent(SimpleNamespace(lag=0))
    agent.push(TextSegment(index=0, content="hello", finished=False))
    action = agent.policy(agent.states)
    assert isinstance(action, WriteAction) and action.content == "HELLO" and not action.finished
    agent.push(TextSegment(index=1, content="world", finished=True))
    action = agent.policy(agent.states)
    assert action.content == "WORLD" and action.finished


def test_read_when_nothing_is_ready():
    agent = FakeUppercaseTextAgent(SimpleNamespace(lag=3))
    agent.push(TextSegment(index=0, content="hello", finished=False))
    assert isinstance(agent.policy(), ReadAction)


def test_config_precedence_default_yaml_flag(tmp_path):
    config_file = tmp_path / "op.yaml"
    config_file.write_text("lag: 4\ntarget_lang: it\ntype: some.simulstream.Class\nspeech_chunk_size: 0.85\n")
    parser = argparse.ArgumentParser()
    FakeUppercaseTextAgent.add_args(parser)
    assert config_from_namespace(FakeConfig, parser.parse_args([])) == FakeConfig()
    from_yaml = config_from_namespace(FakeConfig, parser.parse_args(["--config", str(config_file)]))
    assert from_yaml == FakeConfig(lag=4, target_lang="it")
    overridden = config_from_namespace(FakeConfig, parser.parse_args(["--config", str(config_file), "--lag", "1"]))
    assert overridden == FakeConfig(lag=1, target_lang="it")
    # simulstream's SimulEval wrapper passes the YAML itself as a SimpleNamespace, without argparse defaults.
    assert config_from_namespace(FakeConfig, SimpleNamespace(lag=2, speech_chunk_size=1.0)) == FakeConfig(lag=2)


def test_unknown_and_mistyped_settings_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("lagg: 4\n")
    with pytest.raises(ConfigError, match="unknown setting.*lagg"):
        config_from_namespace(FakeConfig, SimpleNamespace(config=str(bad)))
    with pytest.raises(ConfigError, match="lag: expected int"):
        config_from_namespace(FakeConfig, SimpleNamespace(lag="four"))
    with pytest.raises(ConfigError, match="does not exist"):
        config_from_namespace(FakeConfig, SimpleNamespace(config=str(tmp_path / "missing.yaml")))


def test_speech_agent_resamples_to_16k_and_flushes_once(tmp_path):
    import numpy as np
    import soundfile

    from fake_agents import FakeSecondCounterSpeechAgent

    FakeSecondCounterSpeechAgent.instances.clear()
    rate = 22_050
    durations = [2.5, 1.2]
    wavs = []
    for index, seconds in enumerate(durations):
        t = np.arange(int(seconds * rate)) / rate
        path = tmp_path / f"tone{index}.wav"
        soundfile.write(path, 0.3 * np.sin(2 * np.pi * 440 * t), rate, subtype="PCM_16")
        wavs.append(str(path))
    (tmp_path / "src.txt").write_text("\n".join(wavs) + "\n")
    (tmp_path / "tgt.txt").write_text("1s 2s end\n1s end\n")
    instances = run_simuleval_cli([
        "--agent-class", "fake_agents.FakeSecondCounterSpeechAgent", "--source", str(tmp_path / "src.txt"),
        "--target", str(tmp_path / "tgt.txt"), "--output", str(tmp_path / "out"), "--source-segment-size", "300",
        "--no-progress-bar", "--latency-metrics", "AL"])
    assert [i["prediction"] for i in instances] == ["1s 2s end", "1s end"]
    # "1s" is written once 1 s of audio has arrived: the 300 ms segment that crosses it ends at 1.2 s.
    assert instances[0]["delays"][0] == pytest.approx(1200, abs=1)
    (translator,) = FakeSecondCounterSpeechAgent.instances
    # Each stream started from zero (reset) and all of its audio reached the translator at 16 kHz.
    assert translator.stream_lengths == [pytest.approx(d * 16_000, abs=2) for d in durations]
    assert all(chunk.dtype == np.float32 and chunk.ndim == 1 for chunk in translator.chunks)


def test_console_script_with_the_plugin_dir_scores_chrf(tmp_path):
    """The real `simuleval` executable in a subprocess, as users run it."""
    import os
    import subprocess
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    (tmp_path / "src.txt").write_text("a bb ccc\n")
    (tmp_path / "tgt.txt").write_text("A BB CCC\n")
    executable = Path(sys.executable).with_name("simuleval")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), str(repo / "tests")])}
    result = subprocess.run(
        [str(executable), "--user-dir", str(repo / "agents" / "simuleval_plugins"),
         "--agent-class", "fake_agents.FakeUppercaseTextAgent", "--source", str(tmp_path / "src.txt"),
         "--target", str(tmp_path / "tgt.txt"), "--output", str(tmp_path / "out"),
         "--quality-metrics", "BLEU", "CHRF", "--no-progress-bar"],
        capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    header, values = (tmp_path / "out" / "scores.tsv").read_text().splitlines()[:2]
    assert float(dict(zip(header.split("\t"), values.split("\t")))["CHRF"]) == pytest.approx(100.0)


@pytest.mark.parametrize("agent,preset", [("agents.alignatt4llm.TextAgent", "alignatt4llm_text_cpu"),
                                          ("agents.alignatt4llm.WaitkTextAgent", "waitk_text_cpu"),
                                          ("agents.ssbd.TextAgent", "ssbd_text_cpu"),
                                          ("agents.waitk_gpe.TextAgent", "waitk_gpe_text_cpu")])
def test_a_text_agent_without_config_runs_its_embedded_cpu_preset(agent, preset):
    """Configuration only: a fake translator is handed in, so no weights load."""
    import importlib

    import eval_configs
    from common.config import add_config_args, build_config, read_yaml
    from fake_agents import FakeUppercaseTranslator

    module, _, name = agent.rpartition(".")
    agent_class = getattr(importlib.import_module(module), name)
    parser = argparse.ArgumentParser()
    add_config_args(parser, agent_class.config_class)
    built = agent_class(parser.parse_args(["--target-lang", "Italian"]), translator=FakeUppercaseTranslator(FakeConfig()))
    expected = build_config(agent_class.config_class, {**read_yaml(eval_configs.path(preset)), "target_lang": "it"})
    assert built.config == expected
