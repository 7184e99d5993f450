"""`simulstream --agent`: odd wav files are converted so simulstream's reader gets what it expects, empty and
silent audio give empty output, and bad arguments or language pairs fail at once with a clear message."""
from __future__ import annotations

import importlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import soundfile
from media import encode_audio, video_without_audio

import eval_configs
from agents.simulstream_cli import (
    CommandError,
    main,
    prepare_wav_list,
    processor_config,
)
from common.audio import AudioError, normalized_wav
from common.config import build_config, read_yaml

RATE = 16_000


@pytest.fixture(scope="module")
def sentence_audio():
    from common.synthetic_speech import SynthesisError, speak

    try:
        return speak("The city will build three new schools next year.")
    except SynthesisError as error:
        pytest.skip(str(error))


def write(path: Path, audio: np.ndarray, rate: int, subtype: str) -> Path:
    soundfile.write(str(path), audio, rate, subtype=subtype)
    return path


@pytest.mark.parametrize("channels,rate,subtype", [(2, RATE, "PCM_16"), (1, 8000, "PCM_16"), (1, RATE, "PCM_32"),
                                                   (1, RATE, "FLOAT"), (2, 44100, "DOUBLE")])
def test_odd_wavs_become_16k_mono_int16_with_the_same_stem_and_sound(tmp_path, sentence_audio, channels, rate, subtype):
    import soxr
    from simulstream.client.wav_reader_client import read_wav_file

    audio = soxr.resample(sentence_audio, RATE, rate) if rate != RATE else sentence_audio
    audio = np.stack([audio] * channels, axis=1) if channels > 1 else audio
    original = write(tmp_path / "talk one.wav", audio * 0.5, rate, subtype)
    converted = Path(normalized_wav(original, tmp_path / "converted"))
    assert converted.stem == original.stem and converted != original
    info = soundfile.info(str(converted))
    assert (info.samplerate, info.channels, info.subtype) == (RATE, 1, "PCM_16")
    sample_rate, samples = read_wav_file(str(converted))  # simulstream's own reader
    heard = samples.astype(np.float32) / 32768
    expected = sentence_audio[: len(heard)] * 0.5
    assert sample_rate == RATE and abs(len(heard) - len(sentence_audio)) <= 2
    assert np.corrcoef(heard[: len(expected)], expected)[0, 1] > 0.98


@pytest.mark.parametrize("name,codec,rate,channels", [
    ("talk.mp4", "aac", RATE, 1), ("talk.m4a", "aac", 44100, 2), ("talk.mp3", "libmp3lame", 44100, 2),
    ("talk.flac", "flac", RATE, 1), ("talk.opus", "libopus", 48000, 1)])
def test_audio_containers_become_16k_mono_int16_with_the_same_stem_and_sound(tmp_path, sentence_audio, name, codec,
                                                                             rate, channels):
    import soxr
    from simulstream.client.wav_reader_client import read_wav_file

    audio = soxr.resample(sentence_audio, RATE, rate).astype(np.float32) if rate != RATE else sentence_audio
    try:
        original = encode_audio(audio * 0.5, rate, tmp_path / name, codec, channels)
    except Exception as error:  # noqa: BLE001 - an FFmpeg build without this encoder
        pytest.skip(f"PyAV cannot encode {codec} here: {error}")
    converted = Path(normalized_wav(original, tmp_path / "converted"))
    assert converted.name == "talk.wav"
    sample_rate, samples = read_wav_file(str(converted))  # simulstream's own reader
    heard = samples.astype(np.float32) / 32768
    assert sample_rate == RATE and abs(len(heard) - len(sentence_audio)) <= 0.02 * RATE  # codec padding at most
    length = min(len(heard), len(sentence_audio))
    assert np.corrcoef(heard[:length], sentence_audio[:length] * 0.5)[0, 1] > 0.98  # same sound, not shifted


def test_a_video_without_audio_and_an_undecodable_file_are_refused_with_their_names(tmp_path, sentence_audio):
    with pytest.raises(AudioError, match="silent_video.mp4 has no audio track .its streams: video."):
        normalized_wav(video_without_audio(tmp_path / "silent_video.mp4"), tmp_path / "converted")
    (tmp_path / "garbage.mp3").write_bytes(b"ID3" + bytes(range(256)) * 4)
    with pytest.raises(AudioError, match="garbage.mp3"):
        normalized_wav(tmp_path / "garbage.mp3", tmp_path / "converted")
    write(tmp_path / "ok.wav", sentence_audio, RATE, "PCM_16")
    (tmp_path / "wavs.txt").write_text("ok.wav\nsilent_video.mp4\n")
    with pytest.raises(CommandError, match="silent_video.mp4 has no audio track"):
        prepare_wav_list(str(tmp_path / "wavs.txt"), tmp_path / "c")


def test_a_16k_mono_int16_wav_is_used_as_it_is(tmp_path, sentence_audio):
    original = write(tmp_path / "ok.wav", sentence_audio, RATE, "PCM_16")
    assert normalized_wav(original, tmp_path / "converted") == str(original)


def test_unreadable_audio_is_refused_with_its_name(tmp_path):
    bad = tmp_path / "broken.wav"
    bad.write_bytes(b"RIFF not really a wav")
    with pytest.raises(AudioError, match="broken.wav"):
        normalized_wav(bad, tmp_path / "converted")


def test_wav_list_problems_are_named(tmp_path, sentence_audio):
    with pytest.raises(CommandError, match="does not exist"):
        prepare_wav_list(str(tmp_path / "none.txt"), tmp_path / "c")
    (tmp_path / "empty.txt").write_text("\n\n")
    with pytest.raises(CommandError, match="is empty"):
        prepare_wav_list(str(tmp_path / "empty.txt"), tmp_path / "c")
    (tmp_path / "missing.txt").write_text("nope.wav\n")
    with pytest.raises(CommandError, match="missing files"):
        prepare_wav_list(str(tmp_path / "missing.txt"), tmp_path / "c")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a" / "x.wav", sentence_audio, RATE, "PCM_16")
    write(tmp_path / "b" / "x.wav", sentence_audio, RATE, "PCM_16")
    (tmp_path / "dup.txt").write_text("a/x.wav\nb/x.wav\n")
    with pytest.raises(CommandError, match="distinct names"):
        prepare_wav_list(str(tmp_path / "dup.txt"), tmp_path / "c")


def test_processor_config_checks_agent_and_chunk_size(tmp_path):
    with pytest.raises(CommandError, match="MODULE:CLASS"):
        processor_config("Agent", None, [])
    with pytest.raises(CommandError, match="cannot import module"):
        processor_config("agents.nope:Agent", None, [])
    with pytest.raises(CommandError, match="not a simulstream SpeechProcessor"):
        processor_config("agents.alignatt4llm:TextAgent", None, [])
    (tmp_path / "no_chunk.yaml").write_text("model: embedded\n")
    with pytest.raises(CommandError, match="speech_chunk_size"):
        processor_config("agents.alignatt4llm:Agent", str(tmp_path / "no_chunk.yaml"), [])
    values = processor_config("agents.alignatt4llm:Agent", str(eval_configs.path("alignatt4llm_cpu")),
                              ["speech_chunk_size=0.85", "hold_back=0"])
    assert values["type"] == "agents.alignatt4llm.Agent"
    assert values["speech_chunk_size"] == 0.85 and values["hold_back"] == 0


@pytest.mark.parametrize("agent,preset", [("agents.alignatt4llm:Agent", "alignatt4llm_cpu"),
                                          ("agents.ssbd:Agent", "ssbd_cpu"), ("agents.waitk_gpe:Agent", "waitk_gpe_cpu"),
                                          ("agents.alignatt4llm:LocalAgreementAgent", "local_agreement_cpu"),
                                          ("agents.alignatt4llm:WaitkAgent", "waitk_cpu")])
def test_an_agent_without_config_runs_its_embedded_cpu_preset(agent, preset):
    values = processor_config(agent, None, ["hold_back=0"])
    shipped = read_yaml(eval_configs.path(preset))
    assert values == {**shipped, "hold_back": 0}  # the preset, the override, nothing else
    assert values["model"] == "embedded" and values["asr_model"] == "embedded"
    module, name = agent.split(":")
    processor = getattr(importlib.import_module(module), name)
    config = processor.parse_config(SimpleNamespace(**values))  # checks the config as load_model does
    assert isinstance(config, processor.config_class) and config.hold_back == 0
    assert processor.weight_loads(config)  # the loads (recogniser, segment model) are keyed without loading


def test_an_agent_without_an_embedded_preset_asks_for_a_config():
    with pytest.raises(CommandError, match="not set .agents.star:Agent has no embedded default operating point.: give"):
        processor_config("agents.star:Agent", None, [])


def test_cli_refuses_an_unsupported_language_pair_before_loading(tmp_path, capsys):
    (tmp_path / "wavs.txt").write_text("x.wav\n")
    code = main(["--agent", "agents.alignatt4llm:Agent", "--config", str(eval_configs.path("alignatt4llm_cpu")),
                 "--wav-list", str(tmp_path / "wavs.txt"), "--tgt-lang", "fr", "--metrics-log",
                 str(tmp_path / "m.jsonl")])
    assert code == 2
    assert "unsupported language pair en->fr" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["alignatt4llm_cpu", "alignatt4llm_cpu_low", "alignatt4llm_low", "alignatt4llm_high"])
def test_shipped_speech_presets_are_valid_simulstream_processor_yamls(name):
    from simulstream.config import yaml_config

    from agents.alignatt4llm import Agent

    namespace = yaml_config(str(eval_configs.path(name)))
    assert namespace.type == "agents.alignatt4llm.Agent" and namespace.speech_chunk_size > 0
    config = Agent.parse_config(namespace)  # also resolves the head set for the direction (and `extends`)
    paper = name in ("alignatt4llm_low", "alignatt4llm_high")  # the GPU presets are the paper's: no hold-back
    assert config.source_lang == "en" and config.hold_back == (0.0 if paper else 0.25)
    assert (config.frontier_unit, config.prompt_style) == (("token", "alignatt4llm") if paper else
                                                           ("word", "simulagents"))


@pytest.mark.real_model
@pytest.mark.harness
def test_cli_runs_empty_silent_and_odd_wavs_end_to_end(tmp_path, sentence_audio, embedded_model_path):
    from simulstream.metrics.readers import LogReader

    write(tmp_path / "empty.wav", np.zeros(0, np.float32), RATE, "PCM_16")
    write(tmp_path / "silence.wav", np.zeros(4 * RATE, np.float32), RATE, "PCM_16")
    stereo = np.stack([sentence_audio, sentence_audio], axis=1)
    write(tmp_path / "stereo_float_8k.wav", __import__("soxr").resample(stereo, RATE, 8000), 8000, "FLOAT")
    (tmp_path / "wavs.txt").write_text("empty.wav\nsilence.wav\nstereo_float_8k.wav\n")
    log = tmp_path / "run" / "metrics.jsonl"
    assert main(["--agent", "agents.alignatt4llm:Agent", "--config", str(eval_configs.path("alignatt4llm_cpu")),
                 "--wav-list", str(tmp_path / "wavs.txt"), "--src-lang", "en", "--tgt-lang", "de",
                 "--metrics-log", str(log)]) == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert sum("metadata" in r for r in records) == 3
    config = SimpleNamespace(detokenizer_type="simuleval", latency_unit="char")
    outputs = LogReader(config, str(log), latency_unit="word").final_outputs()
    assert outputs.get("empty", "") == "" and outputs.get("silence", "") == ""
    assert len(outputs["stereo_float_8k"].split()) >= 3


@pytest.mark.parametrize("name", ["alignatt4llm_low", "alignatt4llm_high", "alignatt4llm_text_gemma4"])
def test_gpu_presets_run_no_draft_filter_that_can_change_a_translation(name):
    """The Gemma-4 presets list only the cuts of a draft that is no longer a translation: no copy filter, which
    judges a translation that keeps an English term at its opening ("machine translation ist …", three units, the
    source's first two words) a copy of the source; the CPU preset, tuned on the 0.5B model, lists it."""
    from agents.systems.config import AlignAttConfig
    from common.config import read_yaml
    from policies.degenerate import DraftText, FilterSettings, judge, make_filters

    def copied(preset):
        names = build_config(AlignAttConfig, {"model": "embedded", **{k: v for k, v in read_yaml(
            eval_configs.path(preset)).items() if k == "draft_filters"}}).draft_filters
        filters = make_filters(names, FilterSettings("word", "en", "de"))
        return judge(filters, DraftText("machine translation ist", [], "machine translation is hard".split())).copied

    assert copied(name) is None
    assert copied("alignatt4llm_cpu") == 0


def test_a_server_whose_models_will_not_load_exits_with_the_fix_not_a_traceback(tmp_path, capsys):
    """The GPU preset with an ASR checkpoint that is not there: `--serve-http` stops before listening, exit 2, one line
    naming the checkpoint and how to fetch it (a container that cannot serve must not look alive)."""
    missing = tmp_path / "no-such-checkpoint"
    code = main(["--agent", "agents.alignatt4llm:Agent", "--config", str(eval_configs.path("alignatt4llm_low")),
                 "--set", "asr_device=cpu", "--set", "model_device=cpu", "--set", f"asr_model={missing}",
                 "--serve-http", "--port", "0", "--metrics-log", str(tmp_path / "metrics.jsonl")])
    error = capsys.readouterr().err
    assert code == 2, error
    assert error.startswith("simulstream: error: ") and str(missing) in error and "Traceback" not in error, error
