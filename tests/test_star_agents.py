"""STAR agents on a tiny random checkpoint and espeak-ng speech: the translator contract, checkpoint and language
errors, SimulEval's speech CLI (delays = the anchor times, rounded up to the segment end) and simulstream's runner."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile
from tiny_checkpoints import STAR_SENTENCES as SENTENCES

from agents.systems.star import StarConfig, StarTranslator
from common.config import ConfigError, build_config

SEGMENT_MS = 40


@pytest.fixture(scope="module")
def wavs(tmp_path_factory):
    from common.synthetic_speech import SynthesisError, speak

    folder = tmp_path_factory.mktemp("speech")
    paths = []
    for number, sentence in enumerate(SENTENCES):
        try:
            audio = speak(sentence)
        except SynthesisError as error:
            pytest.skip(str(error))
        paths.append(folder / f"utt{number}.wav")
        soundfile.write(str(paths[-1]), audio, 16_000, subtype="PCM_16")
    return paths


def read(path) -> np.ndarray:
    return soundfile.read(str(path), dtype="float32")[0]


def translator_for(checkpoint, **knobs) -> StarTranslator:
    return StarTranslator.from_config(build_config(StarConfig, {"checkpoint": str(checkpoint), "max_tokens": 24,
                                                                **knobs}))


def chunked(translator: StarTranslator, audio: np.ndarray, chunk: int) -> list[tuple[str, float]]:
    """(word, end of the chunk it was written after, ms) the way SimulEval feeds segments."""
    translator.reset()
    written = []
    for start in range(0, len(audio), chunk):
        end = min(start + chunk, len(audio))
        emission = translator.feed_audio(audio[start:end])
        if end == len(audio):
            emission = emission.then(translator.flush())
        written += [(word, end / 16) for word in emission.new_units]
    return written


def test_reset_leaves_nothing_behind_and_streams_do_not_share_state(star_checkpoint, wavs):
    first, second = translator_for(star_checkpoint), translator_for(star_checkpoint)
    audio_a, audio_b = read(wavs[0]), read(wavs[1])
    alone = chunked(first, audio_a, 640)
    assert len(alone) >= 5 and chunked(first, audio_a, 640) == alone
    first.reset()
    second.reset()
    interleaved = []
    for start in range(0, max(len(audio_a), len(audio_b)), 640):  # two streams at once over shared weights
        interleaved += first.feed_audio(audio_a[start:start + 640]).new_units
        second.feed_audio(audio_b[start:start + 640])
    interleaved += first.flush().new_units
    assert list(interleaved) == [word for word, _ in alone]
    assert len(first.word_delays_ms) == len(alone) and first.word_delays_ms == sorted(first.word_delays_ms)


def test_config_errors_name_the_problem(star_checkpoint, tmp_path):
    with pytest.raises(ConfigError, match="checkpoint is required"):
        build_config(StarConfig, {})
    with pytest.raises(ConfigError, match="not a directory"):
        build_config(StarConfig, {"checkpoint": str(tmp_path / "nothing")})
    with pytest.raises(ConfigError, match="missing star_config.json"):
        build_config(StarConfig, {"checkpoint": str(tmp_path)})
    with pytest.raises(ConfigError, match="trained for en->en, not en->de"):
        build_config(StarConfig, {"checkpoint": str(star_checkpoint), "target_lang": "de"})


@pytest.mark.harness
def test_simuleval_speech_agent_delays_are_anchor_times(star_checkpoint, wavs, tmp_path):
    from agents.harness.simuleval import run_simuleval_cli

    (tmp_path / "source.txt").write_text("".join(f"{path}\n" for path in wavs))
    (tmp_path / "target.txt").write_text("".join(f"{sentence}\n" for sentence in SENTENCES))
    instances = run_simuleval_cli([
        "--agent-class", "agents.star.SpeechAgent", "--checkpoint", str(star_checkpoint), "--max-tokens", "24",
        "--source", str(tmp_path / "source.txt"), "--target", str(tmp_path / "target.txt"),
        "--source-type", "speech", "--target-type", "text", "--source-segment-size", str(SEGMENT_MS),
        "--quality-metrics", "WER", "--latency-metrics", "AL", "LAAL", "DAL", "--output", str(tmp_path / "out")])
    translator = translator_for(star_checkpoint)
    for instance, path in zip(instances, wavs):
        audio = read(path)
        expected = chunked(translator, audio, SEGMENT_MS * 16)
        assert instance["prediction"].split() == [word for word, _ in expected]
        assert instance["delays"] == pytest.approx([delay for _, delay in expected])
        assert len(set(instance["delays"])) >= 3  # words written at several moments while reading
        for delay, anchor_ms in zip(instance["delays"], translator.word_delays_ms):
            if anchor_ms < len(audio) / 16:  # written while reading: at the end of the segment holding the anchor
                assert delay == pytest.approx(math.ceil(anchor_ms / SEGMENT_MS) * SEGMENT_MS)
    scores = (tmp_path / "out" / "scores.tsv").read_text()
    assert "WER" in scores and "DAL" in scores


@pytest.mark.harness
def test_simulstream_runner_with_star_agent(star_checkpoint, wavs, tmp_path):
    from simulstream.metrics.readers import LogReader

    from agents.simulstream_cli import main

    (tmp_path / "wavs.txt").write_text(f"{wavs[0]}\n")
    log = tmp_path / "metrics.jsonl"
    assert main(["--agent", "agents.star:Agent", "--set", f"checkpoint={star_checkpoint}", "--set", "max_tokens=24",
                 "--set", "speech_chunk_size=0.32", "--wav-list", str(tmp_path / "wavs.txt"),
                 "--src-lang", "en", "--tgt-lang", "en", "--metrics-log", str(log)]) == 0
    import yaml

    config = SimpleNamespace(**yaml.safe_load((tmp_path / "metrics.jsonl.config.yaml").read_text()))
    (output,) = LogReader(config, str(log), latency_unit="word").final_outputs_and_latencies().values()
    expected = chunked(translator_for(star_checkpoint), read(wavs[0]), 5120)
    assert output.final_text.split() == [word for word, _ in expected]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert all(r.get("deleted_tokens", []) == [] for r in records)  # append-only
