"""Qwen3-ASR recogniser: the mapping of aligner words onto transcript words (pure), the whole pipeline on a tiny random
ASR + forced-aligner pair loaded like real checkpoints (structure only: random weights say arbitrary text), and the
load and language errors."""
from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from common.stream import TimedWord
from backends.asr import RecognizerError, load_recognizer
from backends.asr.qwen3 import asr_language_name, attach_times
from tiny_checkpoints import build_tiny_qwen3_aligner_checkpoint, build_tiny_qwen3_asr_checkpoint

SECONDS = 3.0


def spans(words: list[TimedWord]) -> list[tuple[str, float, float]]:
    return [(word.text, round(word.start, 6), round(word.end, 6)) for word in words]


def assert_well_formed(words: list[TimedWord], duration: float) -> None:
    """The recogniser contract: words as written (non-empty, no spaces), times ordered and within the audio."""
    assert all(isinstance(word, TimedWord) for word in words)
    assert all(word.text and word.text == word.text.strip() and not any(c.isspace() for c in word.text)
               for word in words)
    assert all(0.0 <= word.start <= word.end <= duration for word in words)
    assert all(earlier.end <= later.start for earlier, later in zip(words, words[1:]))


# -- attach_times: aligner words onto transcript words ----------------------------------------------------------------


def test_one_to_one_words_keep_their_punctuation_and_times():
    words = attach_times(["Hello,", "world."], [("Hello", 0.1, 0.5), ("world", 0.6, 1.0)], duration=2.0)
    assert spans(words) == [("Hello,", 0.1, 0.5), ("world.", 0.6, 1.0)]


def test_case_and_apostrophes_do_not_break_the_match():
    words = attach_times(["Don't", "STOP"], [("don't", 0.0, 0.4), ("stop", 0.4, 0.9)])
    assert spans(words) == [("Don't", 0.0, 0.4), ("STOP", 0.4, 0.9)]


def test_transcript_word_the_aligner_lacks_is_interpolated_between_neighbours():
    words = attach_times(["the", "big", "cat"], [("the", 0.0, 0.2), ("cat", 0.6, 1.0)])
    assert spans(words) == [("the", 0.0, 0.2), ("big", 0.2, 0.6), ("cat", 0.6, 1.0)]


def test_extra_aligner_word_is_ignored():
    words = attach_times(["the", "cat"], [("the", 0.0, 0.2), ("big", 0.2, 0.6), ("cat", 0.6, 1.0)])
    assert spans(words) == [("the", 0.0, 0.2), ("cat", 0.6, 1.0)]


def test_punctuation_only_tokens_take_the_gap_or_the_edge():
    aligned = [("Hello", 0.5, 0.9), ("world", 1.1, 1.5)]
    words = attach_times(["—", "Hello", "–", "world", "!"], aligned, duration=2.0)
    assert spans(words) == [("—", 0.5, 0.5), ("Hello", 0.5, 0.9), ("–", 0.9, 1.1), ("world", 1.1, 1.5),
                            ("!", 1.5, 1.5)]


def test_abbreviation_matches_the_aligner_word_without_dots():
    words = attach_times(["e.g.", "this"], [("eg", 0.2, 0.6), ("this", 0.7, 0.9)])
    assert spans(words) == [("e.g.", 0.2, 0.6), ("this", 0.7, 0.9)]
    split = attach_times(["e.g.", "this"], [("e", 0.2, 0.3), ("g", 0.3, 0.6), ("this", 0.7, 0.9)])
    assert spans(split) == [("e.g.", 0.2, 0.6), ("this", 0.7, 0.9)]


def test_decimal_number_matches_joined_or_split_digits():
    joined = attach_times(["costs", "3.5", "euros."], [("costs", 0.0, 0.4), ("35", 0.5, 0.9), ("euros", 1.0, 1.4)])
    assert spans(joined) == [("costs", 0.0, 0.4), ("3.5", 0.5, 0.9), ("euros.", 1.0, 1.4)]
    split = attach_times(["3.5%"], [("3", 0.5, 0.7), ("5", 0.7, 0.9)])
    assert spans(split) == [("3.5%", 0.5, 0.9)]


def test_hyphenated_word_matches_one_or_two_aligner_words():
    assert spans(attach_times(["well-known"], [("wellknown", 1.0, 1.6)])) == [("well-known", 1.0, 1.6)]
    assert spans(attach_times(["well-known"], [("well", 1.0, 1.2), ("known", 1.3, 1.6)])) == [("well-known", 1.0, 1.6)]


def test_cjk_characters_build_up_the_transcript_word():
    transcript = ["我想要一杯咖啡。", "OK"]
    aligned = [(char, 0.1 * i, 0.1 * (i + 1)) for i, char in enumerate("我想要一杯咖啡")] + [("OK", 0.8, 1.0)]
    assert spans(attach_times(transcript, aligned)) == [("我想要一杯咖啡。", 0.0, 0.7), ("OK", 0.8, 1.0)]


def test_aligner_word_covering_two_transcript_words_is_shared_by_characters():
    words = attach_times(["New", "York"], [("NewYork", 1.0, 2.4)])
    assert spans(words) == [("New", 1.0, 1.6), ("York", 1.6, 2.4)]


def test_times_are_clipped_and_made_non_decreasing():
    aligned = [("a", -0.3, 0.2), ("b", 0.9, 0.5), ("c", 0.4, 0.6), ("d", 2.5, 3.5)]
    words = attach_times(["a", "b", "c", "d"], aligned, duration=3.0)
    assert spans(words) == [("a", 0.0, 0.2), ("b", 0.9, 0.9), ("c", 0.9, 0.9), ("d", 2.5, 3.0)]


def test_no_aligned_words_share_the_duration_and_no_words_give_nothing():
    assert spans(attach_times(["…", "?"], [], duration=2.0)) == [("…", 0.0, 1.0), ("?", 1.0, 2.0)]
    assert attach_times([], [("stray", 0.0, 1.0)], duration=2.0) == []


# -- language codes ---------------------------------------------------------------------------------------------------


def test_language_codes_map_to_the_names_qwen3_asr_was_trained_with():
    names = {code: asr_language_name(code) for code in ("en", "de", "zh", "it", "cs", "zh-CN", "EN")}
    assert names == {"en": "English", "de": "German", "zh": "Chinese", "it": "Italian", "cs": "Czech",
                     "zh-CN": "Chinese", "EN": "English"}


def test_unknown_language_is_a_clear_error_listing_the_supported_codes():
    with pytest.raises(RecognizerError, match=r"'xx'.*\bcs\b.*\ben\b"):
        asr_language_name("xx")


# -- the pipeline on a tiny random pair -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("tiny-qwen3-asr")
    return build_tiny_qwen3_asr_checkpoint(root / "asr"), build_tiny_qwen3_aligner_checkpoint(root / "aligner")


@pytest.fixture(scope="module")
def tiny_recognizer(tiny_pair):
    asr_dir, aligner_dir = tiny_pair
    return load_recognizer("qwen3", str(asr_dir), str(aligner_dir))


@pytest.fixture(scope="module")
def sweep() -> np.ndarray:
    """A rising tone with a little noise: something for the encoder to hear, the same on every run."""
    time = np.arange(int(SECONDS * 16_000)) / 16_000
    noise = np.random.default_rng(0).standard_normal(time.size)
    return (0.3 * np.sin(2 * np.pi * (200 + 100 * time) * time) + 0.02 * noise).astype(np.float32)


def test_tiny_random_transcribe_gives_ordered_words_within_the_audio(tiny_recognizer, sweep):
    words = tiny_recognizer.transcribe(sweep, "en")
    assert words, "the tiny random ASR (seed 0) says some text for this audio; the pipeline was not exercised"
    assert_well_formed(words, SECONDS)


def test_tiny_random_transcribe_is_deterministic_and_thread_safe(tiny_recognizer, sweep):
    first = tiny_recognizer.transcribe(sweep, "en")
    results: list[list[TimedWord]] = []
    threads = [threading.Thread(target=lambda: results.append(tiny_recognizer.transcribe(sweep, "en")))
               for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [first, first]


def test_tiny_random_forcing_the_models_own_first_tokens_gives_its_own_transcript(tiny_recognizer, sweep):
    """A forced prefix is what greedy decoding would have written first: the transcript is then exactly the
    unforced one (the prefix's tokens count against the audio's budget); a prefix the model would not write is kept
    as forced, and the aligner times every word of it."""
    import torch

    from backends.asr.qwen3 import max_new_tokens_for

    processor, tokenizer = tiny_recognizer.asr_processor, tiny_recognizer.asr_processor.tokenizer
    inputs = processor.apply_transcription_request(audio=sweep, language="English")
    with torch.inference_mode():
        output = tiny_recognizer.asr_model.generate(**inputs, do_sample=False, num_beams=1,
                                                    max_new_tokens=max_new_tokens_for(sweep.size))
    own = output[0, inputs["input_ids"].shape[1]:].tolist()
    unforced = tiny_recognizer._recognise(sweep, "English")
    # Prefixes that a tokenizer round trip gives back as the same tokens (a random model also writes pieces of
    # characters, which text cannot carry).
    lengths = [n for n in range(1, 12) if tokenizer(tokenizer.decode(own[:n]), add_special_tokens=False)["input_ids"]
               == own[:n]]
    assert len(lengths) >= 3, "too few round-tripping prefixes to test with"
    for n in lengths:
        assert tiny_recognizer._recognise(sweep, "English", prefix=tokenizer.decode(own[:n])) == unforced, n
    words = tiny_recognizer.transcribe(sweep, "en", prefix="hello world")
    assert [w.text for w in words[:2]] == ["hello", "world"] or words[1].text.startswith("world"), words
    assert_well_formed(words, SECONDS)


@pytest.mark.parametrize("language", ["zh", "cs"])  # an aligner language with CJK; an ASR-only language
def test_tiny_random_transcribe_in_other_languages(tiny_recognizer, sweep, language):
    assert_well_formed(tiny_recognizer.transcribe(sweep, language), SECONDS)


@pytest.mark.skipif(importlib.util.find_spec("nagisa") is not None, reason="nagisa is installed")
def test_tiny_random_japanese_without_nagisa_says_what_to_install(tiny_recognizer, sweep):
    with pytest.raises(RecognizerError, match="cannot align Japanese words.*pip install nagisa"):
        tiny_recognizer.transcribe(sweep, "ja")


def test_tiny_random_short_audio_times_stay_inside_it(tiny_recognizer, sweep):
    short = sweep[:3_200]  # 0.2 s: the feature extractor pads to 0.5 s, the times must not go past 0.2 s
    assert_well_formed(tiny_recognizer.transcribe(short, "en"), 0.2)


def test_tiny_random_empty_audio_and_silence_give_no_words(tiny_recognizer):
    assert tiny_recognizer.transcribe(np.zeros(0, dtype=np.float32), "en") == []
    assert tiny_recognizer.transcribe(np.zeros(16_000, dtype=np.float32), "en") == []


def test_tiny_random_unknown_language_is_refused_before_any_work(tiny_recognizer):
    with pytest.raises(RecognizerError, match="does not support language 'klingon'"):
        tiny_recognizer.transcribe(np.zeros(0, dtype=np.float32), "klingon")


def test_tiny_random_stereo_audio_is_refused(tiny_recognizer):
    with pytest.raises(RecognizerError, match="1-D mono"):
        tiny_recognizer.transcribe(np.zeros((2, 16_000), dtype=np.float32), "en")


# -- load errors: one clear line naming the problem and the fix -------------------------------------------------------


def test_missing_model_directory_is_a_clear_error(tiny_pair, tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(RecognizerError, match=r"ASR model .*no-such-model.* neither a directory nor .*hf download"):
        load_recognizer("qwen3", str(missing), str(tiny_pair[1]))


def test_uncached_repo_id_is_not_downloaded():
    with pytest.raises(RecognizerError, match=r"'simulagents-tests/no-such-model' is neither .* local cache"):
        load_recognizer("qwen3", "simulagents-tests/no-such-model", "simulagents-tests/no-such-aligner")


def test_missing_aligner_is_a_clear_error(tiny_pair):
    with pytest.raises(RecognizerError, match=r"no forced aligner given.*Qwen3-ForcedAligner-0\.6B-hf"):
        load_recognizer("qwen3", str(tiny_pair[0]), "")


def test_swapped_model_and_aligner_is_a_clear_error(tiny_pair):
    asr_dir, aligner_dir = tiny_pair
    with pytest.raises(RecognizerError, match="not a Qwen3ASRForConditionalGeneration.*swapped"):
        load_recognizer("qwen3", str(aligner_dir), str(asr_dir))


def test_directory_without_config_is_a_clear_error(tiny_pair, tmp_path):
    with pytest.raises(RecognizerError, match="has no config.json"):
        load_recognizer("qwen3", str(tmp_path), str(tiny_pair[1]))


def test_original_release_layout_points_to_the_converted_checkpoint(tiny_pair, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_asr", "thinker_config": {}}))
    with pytest.raises(RecognizerError, match=r"original Qwen release layout.*Qwen/Qwen3-ASR-1\.7B-hf"):
        load_recognizer("qwen3", str(tmp_path), str(tiny_pair[1]))


def test_unknown_dtype_is_a_clear_error(tiny_pair):
    with pytest.raises(RecognizerError, match="unknown dtype 'float8'"):
        load_recognizer("qwen3", str(tiny_pair[0]), str(tiny_pair[1]), dtype="float8")


# -- compiled decoding (asr_compile): one static cache, one compiled step, the same words ------------------------------


def test_compiled_decoding_gives_the_same_words_compiles_once_and_falls_back_when_a_call_does_not_fit(
        tiny_pair, tiny_recognizer, sweep, monkeypatch):
    import torch
    from torch._dynamo.utils import counters

    from backends.asr import qwen3

    # 200 positions: 3 s of audio (80 prompt tokens, budget 92) and 2 s (67, 72) fit, 5 s (106, 132) does not.
    monkeypatch.setattr(qwen3, "COMPILED_CACHE_TOKENS", 200)
    before_load = counters["stats"]["unique_graphs"]
    compiled = load_recognizer("qwen3", str(tiny_pair[0]), str(tiny_pair[1]), compiled=True)
    assert counters["stats"]["unique_graphs"] > before_load  # the step was compiled at load, on a second of noise
    calls = []
    generate = compiled._compiled.generate
    monkeypatch.setattr(compiled._compiled, "generate", lambda **kwargs: calls.append(1) or generate(**kwargs))
    graphs = counters["stats"]["unique_graphs"]
    longer = np.concatenate([sweep, sweep[:32_000]])
    for audio, fits in ((sweep, True), (sweep[:32_000], True), (longer, False)):
        before = len(calls)
        assert compiled.transcribe(audio, "en") == tiny_recognizer.transcribe(audio, "en")
        assert len(calls) - before == int(fits)
    # The HTTP server calls from a new thread per request: the step compiled at load serves it too.
    heard = []

    def transcribe_in_a_new_thread():  # with a CPU thread count unlike the loading thread's (see pin_cpu_threads)
        torch.set_num_threads(13)  # no loading thread here had 13
        heard.append(compiled.transcribe(sweep, "en"))

    thread = threading.Thread(target=transcribe_in_a_new_thread)
    thread.start()
    thread.join()
    assert heard == [tiny_recognizer.transcribe(sweep, "en")]
    assert calls and counters["stats"]["unique_graphs"] == graphs  # compiled at load, never again
    # Decoded on the step's own thread (CUDA graphs are kept per thread: backends.hf.compiled_step.StepThread).
    assert compiled._compiled.thread._ident not in (None, thread.ident, threading.get_ident())


def test_asr_compile_is_refused_for_a_recogniser_without_the_step():
    from agents.systems.config import CascadeConfig
    from common.config import ConfigError, build_config

    with pytest.raises(ConfigError, match="asr_compile compiles Qwen3-ASR's decode; asr 'whisper'"):
        build_config(CascadeConfig, {"asr": "whisper", "asr_compile": True})
