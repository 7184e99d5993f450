"""GPE wait-k through SimulEval's own CLI and scorers (tiny model, then the embedded real model), the translator's
schedule, segments and configuration errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from agents.core import SourceWord
from agents.harness.config import ConfigError, build_config
from agents.harness.simuleval import run_simuleval_cli
from agents.systems.gpe import GPETranslator
from agents.systems.gpe_config import GPECascadeConfig, GPEConfig
from backends.streaming_masks.loading import load_streaming_lm

SOURCES = ["The cat sat on the mat .", "I would like a cup of coffee .", "Where is the train station ?"]
TARGETS = ["Die Katze saß auf der Matte .", "Ich hätte gern eine Tasse Kaffee .", "Wo ist der Bahnhof ?"]


def run_cli(tmp_path: Path, model: str, k: int, *extra: str) -> tuple[list[dict], str]:
    (tmp_path / "src.txt").write_text("\n".join(SOURCES) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(TARGETS) + "\n")
    out = tmp_path / "out"
    instances = run_simuleval_cli([
        "--agent-class", "agents.waitk_gpe.TextAgent", "--source", str(tmp_path / "src.txt"),
        "--target", str(tmp_path / "tgt.txt"), "--output", str(out), "--no-progress-bar",
        "--model", model, "--source-lang", "en", "--target-lang", "de", "--k", str(k), *extra])
    return instances, (out / "scores.tsv").read_text()


@pytest.mark.harness
def test_simuleval_cli_with_tiny_model_follows_waitk(tmp_path, tiny_checkpoint):
    k = 2
    instances, scores = run_cli(tmp_path, str(tiny_checkpoint("qwen2")), k, "--max-word-tokens", "3")
    for instance, source in zip(instances, SOURCES):
        n = len(source.split())
        delays = instance["delays"]
        assert delays == sorted(delays) and all(1 <= d <= n for d in delays)
        # target word i (1-based) is written after at least min(k + i - 1, n) source words
        assert all(d >= min(k + i, n) for i, d in enumerate(delays))
        assert len(instance["prediction"].split()) == len(delays)
    header = scores.splitlines()[0].split()
    assert {"BLEU", "AL", "LAAL"} <= set(header)  # latency from SimulEval's own scorers


@pytest.mark.harness
@pytest.mark.real_model
def test_simuleval_cli_with_embedded_model(tmp_path, embedded_model_path):
    k = 3
    instances, scores = run_cli(tmp_path, "embedded", k)
    for instance, source in zip(instances, SOURCES):
        n = len(source.split())
        prediction = instance["prediction"]
        assert prediction and "assistant" not in prediction.lower() and "<|" not in prediction
        # one word per wait-k step: delays follow the schedule exactly
        assert instance["delays"] == [min(k + i, n) for i in range(len(instance["delays"]))]
    values = dict(zip(scores.splitlines()[0].split(), scores.splitlines()[1].split()))
    assert float(values["BLEU"]) > 0


def test_translator_segments_and_schedule(tiny_checkpoint):
    config = build_config(GPEConfig, {"model": str(tiny_checkpoint("llama")), "k": 2, "max_word_tokens": 3})
    translator = GPETranslator.from_config(config)
    words = [SourceWord(w) for w in "The cat sat on the mat .".split()]
    first = translator.feed(words[:1])
    assert first.new_units == () and translator.decoder.units_read == 1  # wait-2: nothing after one word
    translator.feed(words[1:3])
    assert translator.decoder.words_written <= 2 and translator.decoder.units_read == 3
    translator.finish_segment(words)
    assert translator.decoder.units_read == 0  # a new segment starts with a fresh cache
    emitted = list(translator.emitted_units)
    translator.feed(words[:2])
    assert translator.emitted_units[: len(emitted)] == emitted  # the stream keeps what it emitted
    translator.reset()
    assert translator.emitted_units == [] and translator.decoder.units_read == 0


def test_reencoding_baseline_runs_the_same_schedule(tiny_checkpoint):
    base = {"model": str(tiny_checkpoint("qwen2")), "k": 3, "max_word_tokens": 3}
    lm = load_streaming_lm(base["model"], "en", "de")
    words = [SourceWord(w) for w in SOURCES[1].split()]
    gpe = GPETranslator(lm, build_config(GPEConfig, base))
    reencode = GPETranslator(lm, build_config(GPEConfig, {**base, "reencode": True}))
    gpe.flush(words)
    reencode.flush(words)
    assert reencode.decoder.forward_calls != gpe.decoder.forward_calls or gpe.emitted_units != reencode.emitted_units \
        or gpe.decoder.words_written == 0
    assert reencode.emitted_units  # the baseline writes a translation too


@pytest.mark.parametrize("values,message", [
    ({"k": 0}, "k must be >= 1"),
    ({"target_lang": "zh"}, "without spaces"),
    ({"phi": -1}, "phi"),
    ({"source_lang": "xx"}, "unknown language"),
])
def test_bad_config_is_a_clear_error(values, message):
    with pytest.raises(ConfigError, match=message):
        build_config(GPEConfig, values)


def test_cascade_config_reuses_the_speech_knobs():
    config = build_config(GPECascadeConfig, {"k": 4, "hold_back": 0.5})
    assert (config.k, config.hold_back, config.asr) == (4, 0.5, "whisper")
    with pytest.raises(ConfigError, match="asr must be one of"):
        build_config(GPECascadeConfig, {"asr": "nope"})
