"""benchmarks/trained_lengths.py: random weights doing a trained model's work in the cascade's GPU measurement. The
talk's words and their times, what a window hears, the recogniser stand-in on a tiny random Qwen3-ASR pair (its
decode runs exactly the trained token count), the final-draft ratio, and cascade_rtf's refusals."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from backends.asr import load_recognizer
from common.synthetic_speech import SpokenSentence
from tiny_checkpoints import build_tiny_qwen3_aligner_checkpoint, build_tiny_qwen3_asr_checkpoint

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

from trained_lengths import (  # noqa: E402
    ReferenceTranscriber,
    asr_tokens,
    final_budget_ratio,
    read_timeline,
    reference_words,
    timeline_path,
    words_heard,
    write_timeline,
)

SPOKEN = [SpokenSentence("We measure latency.", 0.0, 1.5), SpokenSentence("It is low, today.", 2.1, 1.2)]


def test_each_sentence_span_is_shared_among_its_words_in_order():
    words = reference_words(SPOKEN)
    assert [w.text for w in words] == "We measure latency. It is low, today.".split()
    assert words[0].start == 0.0 and words[2].end == pytest.approx(1.5)
    assert words[3].start == pytest.approx(2.1) and words[-1].end == pytest.approx(3.3)
    assert all(a.end <= b.start + 1e-9 for a, b in zip(words, words[1:]))
    # "measure" (7 letters) takes longer than "We" (2): lengths share the span
    assert words[1].end - words[1].start > words[0].end - words[0].start


def test_a_window_hears_only_its_whole_words_with_times_from_its_start():
    words = reference_words(SPOKEN)
    heard = words_heard(words, words[1].start, words[3].end + 0.05)  # "We" began before; "is" not finished
    assert [w.text for w in heard] == ["measure", "latency.", "It"]
    assert heard[0].start == pytest.approx(0.0) and heard[-1].end == pytest.approx(words[3].end - words[1].start)
    assert words_heard(words, 1.6, 2.0) == []  # the pause between the sentences


def test_the_timeline_survives_its_file_and_a_missing_one_names_the_fix(tmp_path):
    wav = tmp_path / "talk.wav"
    write_timeline(SPOKEN, timeline_path(wav))
    assert timeline_path(wav).name == "talk.timeline.json" and read_timeline(timeline_path(wav)) == SPOKEN
    with pytest.raises(FileNotFoundError, match="trained_lengths.py --out"):
        read_timeline(tmp_path / "absent.timeline.json")


def test_the_final_draft_ratio_gives_a_translation_length_in_the_checkpoint_tokens():
    class EveryCharacterAToken:  # a tokenizer that splits far finer than a trained one
        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text)))}

    sentences = [s.text for s in SPOKEN]
    ratio = final_budget_ratio(EveryCharacterAToken(), sentences, "de")
    source_tokens = sum(len(s) for s in sentences)
    assert ratio * source_tokens == pytest.approx(1.91 * 7)  # 7 words, 1.91 German tokens per English word


@pytest.fixture(scope="module")
def tiny_recognizer(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-qwen3-asr")
    asr = build_tiny_qwen3_asr_checkpoint(root / "asr")
    return load_recognizer("qwen3", str(asr), str(build_tiny_qwen3_aligner_checkpoint(root / "aligner")))


def test_the_stand_in_decodes_the_trained_count_and_returns_the_heard_words(tiny_recognizer, monkeypatch):
    words = reference_words(SPOKEN)
    decoded, aligned = [], []
    generate, align = tiny_recognizer.asr_model.generate, tiny_recognizer._align

    def counting_generate(**inputs):
        output = generate(**inputs)
        decoded.append(output.shape[1] - inputs["input_ids"].shape[1])
        return output

    monkeypatch.setattr(tiny_recognizer.asr_model, "generate", counting_generate)
    monkeypatch.setattr(tiny_recognizer, "_align", lambda samples, text, language: aligned.append(text) or
                        align(samples, text, language))
    stream_time = 3.0
    stand_in = ReferenceTranscriber(tiny_recognizer, words, lambda: stream_time)
    audio = 0.1 * np.sin(np.arange(int(2.0 * 16_000)) / 7.0).astype(np.float32)  # the window 1.0-3.0 s
    heard = stand_in.transcribe(audio, "en")
    assert [w.text for w in heard] == ["It", "is", "low,"]  # "today." ends at 3.3 s
    assert decoded == [asr_tokens(heard)] == [5]  # random weights neither stopped early nor ran on
    assert aligned == ["It is low,"]
    assert stand_in.transcribe(np.zeros(16_000, dtype=np.float32), "en") == [] and len(decoded) == 1  # silence


def run_cascade_rtf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cascade_rtf.py"), *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300, check=False)


def test_cascade_rtf_refuses_trained_lengths_without_a_timeline_or_with_another_recogniser(tmp_path):
    import soundfile

    wav = tmp_path / "talk.wav"
    soundfile.write(wav, np.zeros(16_000, dtype="float32"), 16_000)
    result = run_cascade_rtf("--config", "alignatt4llm_low", "--wav", str(wav), "--trained-lengths")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "talk.timeline.json" in result.stderr and "trained_lengths.py --out" in result.stderr
    result = run_cascade_rtf("--config", "alignatt4llm_cpu", "--wav", str(wav), "--trained-lengths")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert "stands in for Qwen3-ASR" in result.stderr and "'whisper'" in result.stderr
