"""The SSBD speech agent in simulstream: revisions are sent as deleted tokens (exact suffixes) and the metrics log
replays in simulstream's own LogReader and `simulstream_stats`, including a revision in the final flush (which
simulstream's merge of the remainder chunk with end_of_stream would otherwise drop)."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from common.stream import Emission
from agents.core import SpeechStreamingTranslator
from common.config import knob
from cli_runs import run_cli_on_talk

SAMPLE_RATE = 16_000


@dataclass(frozen=True)
class FakeConfig:
    source_lang: str = knob("en", "source language")
    target_lang: str = knob("de", "target language")

    def validate(self) -> None:
        pass


class ScriptedRevisingTranslator(SpeechStreamingTranslator):
    """Stands in for a model: per full chunk it plays the next scripted emission; the remainder chunk adds nothing and
    the flush revises the last word, the case simulstream's merge mishandles."""

    append_only = False
    SCRIPT = [Emission(0, ("Das", "ist", "ein")), Emission(1, ("kein", "Problem"))]
    FINAL = Emission(1, ("Problem.",))

    def __init__(self):
        super().__init__("word")
        self.reset()

    def reset(self) -> None:
        super().reset()
        self.chunks = 0

    def feed_audio(self, samples) -> Emission:
        self.chunks += 1
        step = self.SCRIPT[self.chunks - 1] if self.chunks <= len(self.SCRIPT) else Emission()
        return self._emit(step)

    def flush(self, words=()) -> Emission:
        return self._emit(self.FINAL)


def scripted_processor_class():
    from fake_agents import fake_speech_processor

    return fake_speech_processor(FakeConfig, lambda config: ScriptedRevisingTranslator())


def run_message_processor(processor, audio: np.ndarray, wav_name: str, log: Path) -> None:
    """simulstream's own streaming loop (inference.process_audio + MessageProcessor.end_of_stream) into `log`."""
    from simulstream.inference import process_audio
    from simulstream.metrics.logger import METRICS_LOGGER, setup_metrics_logger
    from simulstream.server.message_processor import MessageProcessor

    setup_metrics_logger(SimpleNamespace(enabled=True, filename=str(log)))
    METRICS_LOGGER.setLevel(logging.INFO)
    message_processor = MessageProcessor(0, processor)
    message_processor.process_metadata({"metrics_metadata": {"wav_name": wav_name}})
    process_audio(message_processor, SAMPLE_RATE, (audio * 32767).astype(np.int16))
    message_processor.end_of_stream()
    for handler in METRICS_LOGGER.handlers:
        handler.flush()


def replay(records: list[dict]) -> list[str]:
    """Apply the logged chunks in order, checking every deletion is an exact suffix of what was sent."""
    sent: list[str] = []
    for record in records:
        deleted = record["deleted_tokens"]
        if deleted:
            assert sent[len(sent) - len(deleted):] == deleted, (sent, deleted)
            del sent[len(sent) - len(deleted):]
        sent += record["generated_tokens"]
    return sent


def stats_of(log: Path, config_path: Path) -> dict:
    result = subprocess.run([Path(sys.executable).parent / "simulstream_stats", "--eval-config", str(config_path),
                             "--log-file", str(log)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    return json.loads(output[output.index("Stats: ") + len("Stats: "): output.rindex("}") + 1])


def test_final_revision_survives_simulstreams_merge_with_fake_translator(tmp_path):
    from simulstream.metrics.readers import LogReader

    config_values = {"speech_chunk_size": 1.0, "detokenizer_type": "simuleval", "latency_unit": "char"}
    config_path = tmp_path / "config.yaml"
    config_path.write_text(yaml.safe_dump(config_values))
    processor = scripted_processor_class()(SimpleNamespace(**config_values))
    log = tmp_path / "metrics.jsonl"
    # 2.5 chunks: two full chunks, then a remainder that simulstream processes inside end_of_stream and merges.
    run_message_processor(processor, np.zeros(int(2.5 * SAMPLE_RATE), dtype=np.float32), "/talks/scripted.wav", log)
    records = [json.loads(line) for line in log.read_text().splitlines() if "generated_tokens" in json.loads(line)]
    assert len(records) == 3
    assert records[-1]["deleted_tokens"] == [" Problem"] and records[-1]["generated_tokens"] == [" Problem."]
    assert "".join(replay(records)) == "Das ist kein Problem."
    reader = LogReader(SimpleNamespace(**config_values), str(log), latency_unit="word")
    assert reader.final_outputs() == {"scripted": "Das ist kein Problem."}
    stats = stats_of(log, config_path)
    assert stats["normalized_erasure"]["value"] == pytest.approx(2 / 4)  # "ein" and "Problem" erased, 4 final words
    # After clear() the next stream starts fresh (the remainder flush does not leak).
    run_message_processor(processor, np.zeros(int(2.5 * SAMPLE_RATE), dtype=np.float32), "/talks/again.wav", log)
    assert LogReader(SimpleNamespace(**config_values), str(log), latency_unit="word").final_outputs()["again"] == \
        "Das ist kein Problem."


def test_without_a_remainder_the_final_revision_is_made_in_end_of_stream_with_fake_translator(tmp_path):
    from simulstream.metrics.readers import LogReader

    config_values = {"speech_chunk_size": 1.0, "detokenizer_type": "simuleval", "latency_unit": "char"}
    processor = scripted_processor_class()(SimpleNamespace(**config_values))
    log = tmp_path / "metrics.jsonl"
    run_message_processor(processor, np.zeros(2 * SAMPLE_RATE, dtype=np.float32), "/talks/exact.wav", log)
    reader = LogReader(SimpleNamespace(**config_values), str(log), latency_unit="word")
    assert reader.final_outputs() == {"exact": "Das ist kein Problem."}


TALK = ["Today I will talk about the price of energy.", "The new plan starts in the year 2025."]


@pytest.mark.real_model
@pytest.mark.harness
def test_ssbd_agent_on_real_speech_replays_in_logreader_and_stats(tmp_path, embedded_model_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from simulstream.metrics.readers import LogReader

    # The scenario under test is a revision in the final flush. With the padded Whisper window the second sentence
    # is drafted live and revised by the flush; with the fitted window (checked) this short talk's second sentence
    # gets no live draft before the flush, so there is nothing to revise there.
    records, log = run_cli_on_talk(tmp_path, TALK, "agents.ssbd:Agent", "ssbd_cpu", "mask_k=0", "asr_window=padded")
    sent = replay(records)
    config_path = Path(f"{log}.config.yaml")
    config = SimpleNamespace(**yaml.safe_load(config_path.read_text()))
    output = LogReader(config, str(log), latency_unit="word").final_outputs_and_latencies()["talk"]
    assert output.final_text == "".join(sent).strip() and len(output.final_text.split()) >= 6
    assert len(output.ideal_delays) == len(output.final_text.split())
    assert "2025" in output.final_text  # the last sentence was translated in the final flush
    # The final flush re-translates the last sentence with the words the live steps could not access yet (hold_back)
    # and revised it: its deletions reached LogReader through simulstream's merge of the remainder chunk.
    assert records[-1]["deleted_tokens"], "expected a revision in the final flush"
    deleted = sum(len(r["deleted_tokens"]) for r in records)
    stats = stats_of(log, config_path)
    assert stats["normalized_erasure"]["value"] == pytest.approx(deleted / len(output.final_text.split()))
    print(f"records={len(records)} deleted={deleted} final-record deletions={records[-1]['deleted_tokens']}")
