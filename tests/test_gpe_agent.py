"""GPE wait-k through SimulEval's own CLI and scorers (tiny model, then the embedded real model), the translator's
schedule, segments and configuration errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from common.stream import SourceWord
from common.config import ConfigError, build_config
from agents.systems.gpe import GPETranslator
from agents.systems.gpe_config import GPECascadeConfig, GPEConfig
from backends.streaming_masks.loading import load_streaming_lm
from harness_runs import simuleval_text_run

SOURCES = ["The cat sat on the mat .", "I would like a cup of coffee .", "Where is the train station ?"]
TARGETS = ["Die Katze saß auf der Matte .", "Ich hätte gern eine Tasse Kaffee .", "Wo ist der Bahnhof ?"]


def run_cli(tmp_path: Path, model: str, k: int, *extra: str) -> tuple[list[dict], str]:
    instances = simuleval_text_run(tmp_path, "agents.waitk_gpe.TextAgent", SOURCES, TARGETS, "--model", model, "--source-lang", "en",
                                   "--target-lang", "de", "--k", str(k), *extra)
    return instances, (tmp_path / "out" / "scores.tsv").read_text()


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


def test_cascade_interface_keeps_read_words_when_the_live_hypothesis_changes(tiny_checkpoint):
    config = build_config(GPEConfig, {"model": str(tiny_checkpoint("llama")), "k": 2, "max_word_tokens": 3})
    translator = GPETranslator.from_config(config)
    live = [SourceWord("The", 0.3), SourceWord("cat", 0.6), SourceWord("sad", 0.9), SourceWord("on", 1.2)]
    translator.revise(live, now=1.0, hold_back=0.25)  # words ended by 0.75 s are available
    assert translator.source_words == ["The", "cat"]
    translator.revise([SourceWord("A", 0.3), *live[1:]], now=2.0, hold_back=0.25)
    assert translator.source_words == ["The", "cat", "sad", "on"]  # the revised first word is not re-read
    translator.finish_segment([SourceWord("A", 0.3), SourceWord("cat", 0.6)])  # shorter than what was read
    assert translator.source_words == [] and translator.decoder.words_written == 0  # the segment ended cleanly


@pytest.mark.parametrize("reencode", [False, True])
def test_words_are_written_on_the_waitk_schedule(tiny_checkpoint, reencode):
    k = 3
    config = build_config(GPEConfig, {"model": str(tiny_checkpoint("qwen2")), "k": k, "max_word_tokens": 3,
                                      "reencode": reencode})
    translator = GPETranslator.from_config(config)
    words = [SourceWord(w) for w in SOURCES[1].split()]
    for word in words:
        translator.feed([word])
    n = len(words)
    # a random model may stop early: every word it wrote was written after exactly k + j - 1 source words
    assert translator.decoder.units_at_write == [k + j for j in range(len(translator.decoder.units_at_write))]
    if not translator.decoder.finished:
        assert len(translator.decoder.units_at_write) == n - k + 1
    translator.flush()
    assert translator.emitted_units  # the baseline and GPE both translate


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
