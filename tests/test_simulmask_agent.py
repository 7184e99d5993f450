"""SimulMask wait-k agent: through SimulEval's real CLI on a tiny Falcon (ALiBi) checkpoint, with latency from
SimulEval's own scorers; the translator's schedule, max lag and stream isolation; config errors."""
from __future__ import annotations

from pathlib import Path

import pytest

from common.stream import SourceWord
from common.config import ConfigError, build_config
from agents.systems.simulmask import SimulMaskTranslator
from agents.systems.simulmask_config import SimulMaskConfig
from harness_runs import simuleval_text_run

SOURCES = ["The cat sat on the mat .", "I would like a cup of coffee .", "Where is the train station ?"]
TARGETS = ["Die Katze saß auf der Matte .", "Ich hätte gern eine Tasse Kaffee .", "Wo ist der Bahnhof ?"]


def run_cli(tmp_path: Path, model: str, k: int, *extra: str) -> tuple[list[dict], str]:
    instances = simuleval_text_run(tmp_path, "agents.simulmask.TextAgent", SOURCES, TARGETS, "--model", model, "--source-lang", "en",
                                   "--target-lang", "de", "--k", str(k), *extra)
    return instances, (tmp_path / "out" / "scores.tsv").read_text()


@pytest.mark.harness
@pytest.mark.parametrize("recompute", [False, True])
def test_simuleval_cli_with_tiny_falcon_follows_waitk(tmp_path, tiny_checkpoint, recompute):
    k, max_lag = 3, 2
    instances, scores = run_cli(tmp_path, str(tiny_checkpoint("falcon")), k, "--max-word-tokens", "3",
                                "--max-lag", str(max_lag), "--recompute", str(recompute).lower())
    assert len(instances) == len(SOURCES)
    for instance, source in zip(instances, SOURCES):
        n = len(source.split())
        delays = instance["delays"]
        assert delays, instance
        # one word per wait-k step: target word i (0-based) is written after exactly min(k + i, n) source words
        assert delays == [min(k + i, n) for i in range(len(delays))]
        assert len(instance["prediction"].split()) == len(delays) <= n + max_lag
        assert "Assistant" not in instance["prediction"]
    header, values = (line.split() for line in scores.splitlines()[:2])
    scored = dict(zip(header, values))
    assert {"BLEU", "AL", "LAAL"} <= set(scored) and float(scored["LAAL"]) >= k - 1  # SimulEval's own latency


def test_translator_streams_are_isolated(tiny_checkpoint):
    config = build_config(SimulMaskConfig, {"model": str(tiny_checkpoint("falcon")), "k": 2, "max_word_tokens": 3,
                                            "target_lang": "de"})
    translator = SimulMaskTranslator.from_config(config)
    words = [SourceWord(w) for w in "The cat sat on the mat .".split()]
    assert translator.feed(words[:1]).new_units == () and translator.decoder.units_read == 1  # wait-2
    translator.feed(words[1:3])
    assert translator.decoder.words_written == 2 and translator.decoder.units_read == 3
    first = translator.flush(words[3:])
    emitted = list(translator.emitted_units)
    assert first.new_units and translator.decoder.units_read == 0  # flushed: a fresh cache
    translator.reset()
    again = translator.feed(words[:3]).new_units + translator.flush(words[3:]).new_units
    assert list(again) == emitted  # greedy and nothing carried over: the same stream gives the same words


def test_config_errors():
    with pytest.raises(ConfigError, match="k must be"):
        build_config(SimulMaskConfig, {"k": 0})
    with pytest.raises(ConfigError, match="without spaces"):
        build_config(SimulMaskConfig, {"target_lang": "zh"})


def test_rope_model_is_refused_with_advice(tiny_checkpoint):
    config = build_config(SimulMaskConfig, {"model": str(tiny_checkpoint("llama")), "target_lang": "de"})
    with pytest.raises(ValueError, match="agents.waitk_gpe"):
        SimulMaskTranslator.from_config(config)
