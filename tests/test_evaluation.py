"""`simulagents eval` and `synth-set`: runs go through the real harnesses, and every score in the report equals what
the official tools give when run by hand on the same logs (OmniSTEval, simulstream's scorers, SimulEval)."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile
import yaml

from evaluation.cli import main as simulagents
from evaluation import data, runs
from evaluation.report import Result
from common.synthetic_speech import SAMPLE_RATE
from common.wer import word_error_rate

BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parent

SOURCES = ["Good morning everyone, and thank you for coming.",
           "Today I will talk about simultaneous speech translation.",
           "These systems translate while the speaker is still talking.",
           "Thank you for your attention."]
REFERENCES = ["Guten Morgen zusammen, und danke, dass Sie gekommen sind.",
              "Heute spreche ich über simultane Sprachübersetzung.",
              "Diese Systeme übersetzen, während der Sprecher noch spricht.",
              "Vielen Dank für Ihre Aufmerksamkeit."]
# Two talks; the second line of talk B is given too little room after the first and must be started later.
SEGMENTS = [{"wav": "talkA.wav", "offset": 0.5, "duration": 2.8}, {"wav": "talkA.wav", "offset": 4.0, "duration": 3.2},
            {"wav": "talkB.wav", "offset": 1.0, "duration": 3.0}, {"wav": "talkB.wav", "offset": 3.5, "duration": 1.8}]


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def talks(tmp_path_factory) -> dict:
    """The synthetic two-talk test set, built by `simulagents synth-set`."""
    folder = tmp_path_factory.mktemp("talks")
    write_lines(folder / "en.txt", SOURCES)
    write_lines(folder / "de.txt", REFERENCES)
    (folder / "given.yaml").write_text(yaml.safe_dump(SEGMENTS))
    assert simulagents(["synth-set", "--text", str(folder / "en.txt"), "--segments", str(folder / "given.yaml"),
                        "--out", str(folder / "set")]) == 0
    return {"folder": folder, "wav_list": folder / "set" / "wavs.txt", "segments": folder / "set" / "audio-segments.yaml",
            "source": folder / "en.txt", "reference": folder / "de.txt"}


def test_synth_set_speaks_each_line_at_its_offset_and_starts_an_overrun_later(talks):
    spoken = yaml.safe_load(talks["segments"].read_text())
    assert [s["wav"] for s in spoken] == [s["wav"] for s in SEGMENTS]
    assert [s["offset"] for s in spoken[:3]] == [s["offset"] for s in SEGMENTS[:3]]
    assert spoken[3]["offset"] == pytest.approx(spoken[2]["offset"] + spoken[2]["duration"] + 0.1, abs=2e-3)
    assert talks["wav_list"].read_text().split() == ["talkA.wav", "talkB.wav"]
    for name in ("talkA", "talkB"):
        audio, rate = soundfile.read(talks["wav_list"].parent / f"{name}.wav", dtype="float32")
        assert rate == SAMPLE_RATE and audio.ndim == 1
        lines = [s for s in spoken if s["wav"] == f"{name}.wav"]
        assert len(audio) / rate == pytest.approx(lines[-1]["offset"] + lines[-1]["duration"], abs=2e-3)
        before_first = audio[: int(lines[0]["offset"] * rate)]
        assert np.abs(before_first).max() == 0  # silence until the first line's offset
        for line in lines:  # speech inside every spoken segment
            inside = audio[int(line["offset"] * rate): int((line["offset"] + line["duration"]) * rate)]
            assert np.sqrt(np.mean(inside ** 2)) > 0.01


def test_sweeps_are_cartesian_products_with_readable_labels():
    points = runs.parse_sweep(["speech_chunk_size=0.85,1.5", "border=1,2"])
    assert points == [{"speech_chunk_size": 0.85, "border": 1}, {"speech_chunk_size": 0.85, "border": 2},
                      {"speech_chunk_size": 1.5, "border": 1}, {"speech_chunk_size": 1.5, "border": 2}]
    assert runs.regime_label(points[1]) == "speech_chunk_size=0.85,border=2"
    assert runs.parse_sweep([]) == [{}]
    with pytest.raises(ValueError, match="KEY=V1,V2"):
        runs.parse_sweep(["speech_chunk_size"])


def test_variants_are_named_runs_of_one_configuration_with_their_own_changes():
    """The rows of an ablation: each variant's changes alone, in the order given."""
    variants = runs.parse_variants(["paper", "gate-off:border=1000", "filters:draft_filters=line_end+loop,k=3"])
    assert variants == [("paper", {}), ("gate-off", {"border": 1000}),
                        ("filters", {"draft_filters": "line_end+loop", "k": 3})]
    for bad, problem in ((["a:border"], "NAME:KEY=VALUE"), ([":border=1"], "needs a NAME"),
                         (["a", "a:k=2"], "share a name")):
        with pytest.raises(ValueError, match=problem):
            runs.parse_variants(bad)


def test_bad_test_sets_are_refused_with_the_problem_named(talks, tmp_path):
    short = write_lines(tmp_path / "short.txt", REFERENCES[:3])
    with pytest.raises(ValueError, match="3 lines but .* 4 segments"):
        data.speech_set(talks["wav_list"], talks["segments"], short, "en", "de")
    with pytest.raises(ValueError, match="4 lines but .* has 3"):
        data.text_set(talks["source"], short, "en", "de")
    only_a = tmp_path / "only_a.yaml"
    only_a.write_text(yaml.safe_dump([s for s in yaml.safe_load(talks["segments"].read_text()) if s["wav"] == "talkA.wav"]))
    with pytest.raises(ValueError, match="talkB .* has no segment in"):
        data.speech_set(talks["wav_list"], only_a, write_lines(tmp_path / "two.txt", REFERENCES[:2]), "en", "de")
    one_wav = write_lines(tmp_path / "one.txt", [str(talks["wav_list"].parent / "talkA.wav")])
    with pytest.raises(ValueError, match="segments of talkB, which .* does not list"):
        data.speech_set(one_wav, talks["segments"], talks["reference"], "en", "de")
    (tmp_path / "talkB.wav").write_bytes(b"RIFF but not audio")
    broken = write_lines(tmp_path / "broken.txt", [str(talks["wav_list"].parent / "talkA.wav"),
                                                   str(tmp_path / "talkB.wav")])
    with pytest.raises(ValueError, match="cannot read audio file .*talkB.wav"):
        data.speech_set(broken, talks["segments"], talks["reference"], "en", "de")
    blank = write_lines(tmp_path / "blank.txt", ["one line", ""])
    with pytest.raises(ValueError, match=r"source lines \[2\] .* empty"):
        data.text_set(blank, write_lines(tmp_path / "two_refs.txt", ["a", "b"]), "en", "de")


def eval_args(talks, out: Path, agent: str, *extra: str) -> list[str]:
    return ["eval", "--agent", agent, "--wav-list", str(talks["wav_list"]), "--segments", str(talks["segments"]),
            "--reference", str(talks["reference"]), "--source", str(talks["source"]), "--tgt-lang", "de",
            "--out", str(out), *extra]


def report_results(out: Path) -> dict[str, dict]:
    return {r["run"]["regime"]: r for r in json.loads((out / "report.json").read_text())["results"]}


def test_empty_hypothesis_gets_a_clear_error_with_fake_silent_agent(talks, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    code = simulagents(eval_args(talks, tmp_path / "out", "fake_agents:FakeSlowSpeechProcessor",
                                 "--set", "speech_chunk_size=2.0", "--set", "silent=true"))
    assert code == 2
    assert "hypothesis is empty for every talk" in capsys.readouterr().err


def test_slower_than_real_time_system_gets_ca_above_cu_with_fake_slow_agent(talks, tmp_path, monkeypatch):
    """Computation-aware delays add each chunk's computation time: with 1.5 s of work per 1 s chunk (RTF 1.5) every
    unit's CA delay is 1.5 s after its CU delay, and the reported CA latencies are above the CU ones."""
    from simulstream.config import yaml_config
    from simulstream.metrics.readers import LogReader

    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    out = tmp_path / "out"
    assert simulagents(eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set",
                                 "speech_chunk_size=1.0", "--set", "seconds_per_chunk=1.5")) == 0
    scores = report_results(out)["default"]["scores"]
    assert scores["RTF"] > 1.4
    assert scores["LongYAAL (CA)"] > scores["LongYAAL (CU)"] + 500  # ms
    assert scores["StreamLAAL (CA)"] > scores["StreamLAAL (CU)"] + 0.5  # s
    log = out / "runs/fake_agents_default/metrics.jsonl"
    for output in LogReader(yaml_config(f"{log}.config.yaml"), str(log)).final_outputs_and_latencies().values():
        assert output.ideal_delays and all(ca - cu >= 1.5 for cu, ca in zip(output.ideal_delays,
                                                                            output.computational_aware_delays))
    assert (out / "table.md").read_text().count("| en→de |") == 1
    environment = json.loads((out / "runs/fake_agents_default/environment.json").read_text())
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=TESTS.parent, capture_output=True, text=True).stdout
    assert environment["commit"] == (head.strip() or None) and environment["cores"] and environment["packages"]
    heard = data.speech_set(talks["wav_list"], talks["segments"], talks["reference"], "en", "de", talks["source"])
    assert environment["inputs_sha1"] == heard.inputs_sha1()


def test_the_input_digest_changes_with_one_audio_sample_and_with_the_source_lines(talks, tmp_path):
    """EvalSet.inputs_sha1, written into every run's environment.json: a copy of the same talks has the same digest;
    one changed audio sample (what another espeak-ng build would make) or one changed source line gives another."""
    import shutil

    def speech(folder: Path) -> data.EvalSet:
        return data.speech_set(folder / "wavs.txt", folder / "audio-segments.yaml", talks["reference"], "en", "de")

    original = speech(talks["wav_list"].parent)
    copy = tmp_path / "copy"
    shutil.copytree(talks["wav_list"].parent, copy)
    assert speech(copy).inputs_sha1() == original.inputs_sha1()
    audio, rate = soundfile.read(copy / "talkB.wav", dtype="int16")
    audio[len(audio) // 2] += 1
    soundfile.write(copy / "talkB.wav", audio, rate, subtype="PCM_16")
    assert speech(copy).inputs_sha1() != original.inputs_sha1()
    text = data.EvalSet("set", "en", "de", ("a", "b"), ("one", "two"))
    assert text.inputs_sha1() == data.EvalSet("set", "en", "de", ("x", "y"), ("one", "two")).inputs_sha1()
    assert text.inputs_sha1() != data.EvalSet("set", "en", "de", ("a", "b"), ("one", "three")).inputs_sha1()


def test_each_run_records_the_code_it_started_with(tmp_path, monkeypatch):
    """Runs queued behind others (an offline row after its streamed row, `--jobs 1`) import the code of their own
    start, so environment.json is read as each one starts, not once per command. Fake harness command (a Python
    that does nothing) and a fake environment that changes between the two starts."""
    starts = iter(["aaa", "bbb"])
    monkeypatch.setattr(runs, "environment", lambda root, inputs_sha1: {"changes": next(starts)})
    monkeypatch.setattr(runs, "command", lambda spec, dataset, run_dir, threads: [sys.executable, "-c", "pass"])
    specs = [runs.RunSpec("system", "agent", "text", regime) for regime in ("first", "second")]
    dataset = data.EvalSet("set", "en", "de", ("a",), ("a",))
    runs.execute(specs, dataset=dataset, out=tmp_path, jobs=1, report=lambda line: None, poll_seconds=0.01)
    recorded = [json.loads((spec.directory(tmp_path) / "environment.json").read_text())["changes"]
                for spec in specs]
    assert recorded == ["aaa", "bbb"]


def test_score_only_scores_the_runs_left_in_out_without_running_them_with_fake_agent(talks, tmp_path, monkeypatch,
                                                                                     capsys):
    """A command cut after its runs finished but before scoring (no result.json): `--score-only` scores them from
    their logs, runs nothing again, and gives the scores the full command gave."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    out = tmp_path / "out"
    arguments = eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set", "speech_chunk_size=1.0")
    assert simulagents(arguments) == 0
    scored = report_results(out)["default"]["scores"]
    run_dir = out / "runs" / "fake_agents_default"
    (run_dir / "result.json").unlink()
    (out / "report.json").unlink()
    log_written = (run_dir / "metrics.jsonl").stat().st_mtime_ns
    assert simulagents([*arguments, "--score-only"]) == 0
    assert (run_dir / "metrics.jsonl").stat().st_mtime_ns == log_written  # the agent did not run again
    assert report_results(out)["default"]["scores"] == scored
    assert simulagents([*arguments, "--score-only", "--name", "another-system"]) == 2
    assert "no runs of system 'another-system'" in capsys.readouterr().err
    assert simulagents([*arguments, "--score-only", "--sweep", "speech_chunk_size=1.0,2.0"]) == 2
    assert "--score-only runs nothing" in capsys.readouterr().err


def test_mp4_talks_and_language_names_score_as_their_wavs_with_fake_agent(talks, tmp_path, monkeypatch):
    """The talks as MP4 (lossless ALAC, so the audio is the same samples) and `--tgt-lang German`: the same scores."""
    from media import encode_audio

    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    stems = [Path(name).stem for name in talks["wav_list"].read_text().split()]
    for stem in stems:
        audio, rate = soundfile.read(talks["wav_list"].parent / f"{stem}.wav", dtype="float32")
        encode_audio(audio, rate, tmp_path / f"{stem}.mp4", "alac")
    mp4_list = write_lines(tmp_path / "mp4s.txt", [f"{stem}.mp4" for stem in stems])
    scores = {}
    for kind, wav_list, language in (("wav", talks["wav_list"], "de"), ("mp4", mp4_list, "German")):
        arguments = eval_args({**talks, "wav_list": wav_list}, tmp_path / kind, "fake_agents:FakeSlowSpeechProcessor",
                              "--set", "speech_chunk_size=1.0")
        arguments[arguments.index("--tgt-lang") + 1] = language
        assert simulagents(arguments) == 0
        scores[kind] = report_results(tmp_path / kind)["default"]["scores"]
    for metric in ("BLEU", "chrF", "LongYAAL (CU)", "StreamLAAL (CU)"):
        assert scores["mp4"][metric] == scores["wav"][metric], metric
    assert (tmp_path / "mp4" / "table.md").read_text().count("| en→de |") == 1


@pytest.mark.real_model
@pytest.mark.harness
def test_speech_report_equals_the_official_tools_run_by_hand(talks, tmp_path, embedded_model_path):
    """The AlignAtt cascade (embedded default) at two chunk sizes plus both offline rows; then OmniSTEval,
    simulstream_score_latency and simulstream_stats run by hand on each metrics log must give the report's numbers,
    and sacrebleu and the WER of the transcripts the offline rows'."""
    out = tmp_path / "out"
    assert simulagents(eval_args(talks, out, "agents.alignatt4llm:Agent", "--config",
                                 "eval_configs/alignatt4llm_cpu.yaml", "--sweep", "speech_chunk_size=2.0,3.0",
                                 "--offline", "--offline-cascade", "--jobs", "2")) == 0
    results = report_results(out)
    assert set(results) == {"speech_chunk_size=2.0", "speech_chunk_size=3.0", "offline", "offline-cascade"}
    for regime in ("speech_chunk_size=2.0", "speech_chunk_size=3.0"):
        scores = results[regime]["scores"]
        run_dir = out / "runs" / f"alignatt4llm_{regime}"
        log = run_dir / "metrics.jsonl"
        config = f"{log}.config.yaml"
        by_hand = tmp_path / f"omnisteval-{regime}"
        subprocess.run([BIN / "omnisteval", "longform", "--speech_segmentation", talks["segments"],
                        "--ref_sentences_file", talks["reference"], "--hypothesis_file", log, "--hypothesis_format",
                        "simulstream", "--simulstream_config_file", config, "--word_level", "--lang", "de",
                        "--output_folder", by_hand], check=True, capture_output=True)
        official = dict(line.split("\t") for line in (by_hand / "scores.tsv").read_text().splitlines()[1:])
        for name in ("BLEU", "chrF", "LongYAAL (CU)", "LongYAAL (CA)"):
            assert scores[name] == pytest.approx(float(official[name]), abs=1e-4, nan_ok=True), name
        latency = subprocess.run([BIN / "simulstream_score_latency", "--eval-config", config, "--log-file", log,
                                  "--reference", talks["reference"], "--audio-definition", talks["segments"],
                                  "--scorer", "stream_laal"], check=True, capture_output=True, text=True).stdout
        ideal, aware = map(float, re.search(r"ideal_latency=([\d.e-]+), computational_aware_latency=([\d.e-]+)",
                                            latency).groups())
        assert (scores["StreamLAAL (CU)"], scores["StreamLAAL (CA)"]) == pytest.approx((ideal, aware))
        stats = subprocess.run([BIN / "simulstream_stats", "--eval-config", config, "--log-file", log],
                               check=True, capture_output=True, text=True).stdout
        stats = json.loads(stats[stats.index("{"):])
        assert scores["normalized_erasure"] == pytest.approx(stats["normalized_erasure"]["value"]) == 0
        assert scores["RTF"] == pytest.approx(stats["real_time_factor"]["value"])
        assert scores["LongYAAL (CA)"] >= scores["LongYAAL (CU)"] or math.isnan(scores["LongYAAL (CA)"])
        assert 0 < scores["BLEU"] <= 100
    offline = results["offline"]["scores"]
    hypotheses = (out / "runs/alignatt4llm_offline/offline.txt").read_text().splitlines()
    from sacrebleu.metrics import BLEU, CHRF

    assert offline["BLEU"] == pytest.approx(BLEU().corpus_score(hypotheses, [REFERENCES]).score)
    assert offline["chrF"] == pytest.approx(CHRF().corpus_score(hypotheses, [REFERENCES]).score)
    assert "WER (%)" not in offline
    cascade = results["offline-cascade"]["scores"]
    run_dir = out / "runs/alignatt4llm_offline-cascade"
    hypotheses = (run_dir / "offline.txt").read_text().splitlines()
    transcripts = (run_dir / "transcripts.txt").read_text().splitlines()
    assert len(hypotheses) == len(transcripts) == len(SOURCES) and all(transcripts) and all(hypotheses)
    assert cascade["BLEU"] == pytest.approx(BLEU().corpus_score(hypotheses, [REFERENCES]).score)
    assert cascade["WER (%)"] == pytest.approx(word_error_rate(transcripts, SOURCES))
    assert cascade["WER (%)"] < 40  # Whisper base hears espeak-ng's clear speech well
    table = (out / "table.md").read_text()
    assert "| en→de | alignatt4llm | speech_chunk_size=2.0 |" in table and "| en→de | Offline | - |" in table
    assert "| en→de | Offline cascade | - |" in table and "ASR WER %" in table
    assert "COMET skipped" in table
    assert (out / "quality_latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len((out / "report.tsv").read_text().splitlines()) == 5


@pytest.mark.harness
def test_text_report_equals_simuleval_and_omnisteval_run_by_hand_with_fake_agent(talks, tmp_path, monkeypatch):
    """A text agent through SimulEval's CLI at two lags: the report's BLEU/chrF/LAAL/AL/DAL/AP equal SimulEval's own
    re-scoring of its output folder (`--score-only`), and YAAL equals `omnisteval shortform` run by hand."""
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    out = tmp_path / "out"
    assert simulagents(["eval", "--agent", "fake_agents:FakeUppercaseTextAgent", "--source", str(talks["source"]),
                        "--reference", str(talks["source"]), "--src-lang", "en", "--tgt-lang", "de",
                        "--sweep", "lag=1,3", "--out", str(out), "--jobs", "2"]) == 0
    results = report_results(out)
    assert set(results) == {"lag=1", "lag=3"}
    assert results["lag=3"]["scores"]["LAAL"] > results["lag=1"]["scores"]["LAAL"]
    for regime, result in results.items():
        output = out / "runs" / f"fake_agents_{regime}" / "simuleval"
        subprocess.run([BIN / "simuleval", "--score-only", "--output", output, "--quality-metrics", "BLEU", "CHRF",
                        "--latency-metrics", "LAAL", "AL", "DAL", "AP", "--user-dir", "agents/simuleval_plugins"],
                       check=True, capture_output=True, cwd=TESTS.parent, env={"PYTHONPATH": str(TESTS)})
        names, values = (output / "scores.tsv").read_text().splitlines()[:2]
        official = dict(zip(names.split("\t"), map(float, values.split("\t"))))
        for name in ("BLEU", "CHRF", "LAAL", "AL", "DAL", "AP"):
            assert result["scores"][name] == pytest.approx(official[name], abs=1e-3), name
        by_hand = tmp_path / f"omnisteval-{regime}"
        subprocess.run([BIN / "omnisteval", "shortform", "--hypothesis_file", output / "instances.log",
                        "--ref_sentences_file", talks["source"], "--word_level", "--output_folder", by_hand],
                       check=True, capture_output=True)
        yaal = dict(line.split("\t") for line in (by_hand / "scores.tsv").read_text().splitlines()[1:])["YAAL (CU)"]
        assert result["scores"]["OmniSTEval YAAL (CU)"] == pytest.approx(float(yaal), abs=1e-4)
    assert "| en→de | fake_agents | lag=1 |" in (out / "table.md").read_text()


def test_comet_runs_in_its_own_environment_with_fake_omnisteval(talks, tmp_path, monkeypatch):
    """COMET needs transformers<5, so it runs as OmniSTEval --comet from another venv; a fake `omnisteval` there
    records what it was asked and answers a score. Without the environment the report says COMET was skipped."""
    env = tmp_path / "comet-env"
    (env / "bin").mkdir(parents=True)
    fake = env / "bin" / "omnisteval"
    fake.write_text(f"""#!{sys.executable}
import json, sys, pathlib
args = sys.argv[1:]
out = pathlib.Path(args[args.index("--output_folder") + 1]); out.mkdir(parents=True, exist_ok=True)
(out / "args.json").write_text(json.dumps(args))
(out / "scores.tsv").write_text("metric\\tvalue\\nBLEU\\t1.0\\nCOMET\\t0.8125\\n")
""")
    fake.chmod(0o755)
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    out = tmp_path / "out"
    assert simulagents(eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set", "speech_chunk_size=2.0",
                                 "--comet-env", str(env), "--comet-model", "Unbabel/XCOMET-XL")) == 0
    result = report_results(out)["default"]
    assert result["scores"]["COMET"] == 0.8125 and not result["notes"]
    asked = json.loads((out / "runs/fake_agents_default/comet-Unbabel_XCOMET-XL/args.json").read_text())
    assert asked[:2] == ["longform", "--resegmented_hypothesis"] and Path(asked[2]).is_file()
    assert {"--comet", "Unbabel/XCOMET-XL", "--source_sentences_file"} <= set(asked)
    assert "| 0.81 |" in (out / "table.md").read_text()
    with pytest.raises(FileNotFoundError, match="make comet-env"):
        from evaluation.comet import comet_environment

        comet_environment(str(tmp_path / "nowhere"))


def test_results_accumulate_across_commands_in_one_folder(tmp_path):
    """Two systems evaluated by separate commands into one folder share one table and one plot."""
    out = tmp_path / "out"
    for system, bleu in (("alpha", 10.0), ("beta", 20.0)):
        spec = runs.RunSpec(system, "m:C", runs.SPEECH, "speech_chunk_size=1.0", {"speech_chunk_size": 1.0})
        spec.directory(out).mkdir(parents=True)
        Result(spec.to_json(), "set", "de", {"BLEU": bleu, "chrF": 2 * bleu, "LongYAAL (CU)": 1500.0,
                                             "LongYAAL (CA)": float("nan")}).save(spec.directory(out))
    from evaluation.report import write_report

    paths = write_report(out, {})
    table = paths["table"].read_text()
    assert "| en→de | alpha | speech_chunk_size=1.0 | 10.00 | 20.00 | 1.50 | late |" in table
    assert "| en→de | beta |" in table and "late:" in table
    assert paths["plot"].stat().st_size > 0


def test_offline_rows_of_several_systems_are_told_apart(tmp_path):
    """Two presets evaluated with --offline into one folder: each offline row names its system."""
    from evaluation.report import write_report

    out = tmp_path / "out"
    for system, bleu in (("alpha", 10.0), ("beta", 20.0)):
        for spec, scores in ((runs.RunSpec(system, "m:C", runs.SPEECH, "default"), {"LongYAAL (CU)": 1500.0}),
                             (runs.RunSpec(system, "m:C", runs.OFFLINE, "offline"), {})):
            spec.directory(out).mkdir(parents=True)
            Result(spec.to_json(), "set", "de", {"BLEU": bleu, "chrF": 2 * bleu, **scores}).save(spec.directory(out))
    table = write_report(out, {})["table"].read_text()
    assert "| en→de | Offline (alpha) | - | 10.00 |" in table and "| en→de | Offline (beta) | - | 20.00 |" in table


def test_the_plot_draws_each_panel_against_latency_with_both_offline_rows_as_lines():
    import matplotlib.pyplot as plt

    from evaluation.report import quality_latency_figure

    results = [Result(runs.RunSpec("alpha", "m:C", runs.SPEECH, f"chunk={x}").to_json(), "set", "de",
                      {"BLEU": 8.0 + x, "chrF": 38.0 + x, "LongYAAL (CU)": 1000.0 * x, "LongYAAL (CA)": 2000.0 * x})
               for x in (1, 2)]
    results += [Result(runs.RunSpec("alpha", "m:C", kind, kind).to_json(), "set", "de", {"BLEU": bleu, "chrF": 40.0})
                for kind, bleu in ((runs.OFFLINE, 12.0), (runs.OFFLINE_CASCADE, 9.5))]
    figure = quality_latency_figure(results)
    for panel, quality in zip(figure.axes, ("BLEU", "chrF")):
        assert (panel.get_xlabel(), panel.get_ylabel()) == ("LongYAAL (s)", quality)
        lines = {line.get_label(): line for line in panel.get_lines()}
        assert list(lines["alpha CU"].get_xdata()) == [1.0, 2.0] and list(lines["alpha CA"].get_xdata()) == [2.0, 4.0]
        assert lines["alpha offline"].get_linestyle() == ":" and lines["alpha offline cascade"].get_linestyle() == "-."
    assert list(figure.axes[0].get_lines()[-1].get_ydata()) == [9.5, 9.5]
    plt.close(figure)


def test_progress_is_read_from_what_the_harness_has_written(tmp_path):
    segments = ({"wav": "a.wav", "offset": 0.0, "duration": 6.0}, {"wav": "b.wav", "offset": 1.0, "duration": 3.0})
    speech = data.EvalSet("set", "en", "de", ("x", "y"), wav_list=tmp_path / "w.txt", segment_entries=segments)
    spec = runs.RunSpec("s", "m:C", runs.SPEECH, "default")
    assert runs.progress_fraction(spec, speech, tmp_path) == 0  # nothing written yet
    records = [{"id": 0, "metadata": {}}, {"id": 0, "total_audio_processed": 2.0}, {"id": 0, "total_audio_processed": 4.0},
               {"id": 1, "total_audio_processed": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"id": 1, "tot')
    assert runs.progress_fraction(spec, speech, tmp_path) == pytest.approx(5.0 / 10.0)
    text = data.EvalSet("set", "en", "de", ("a", "b", "c", "d"), ("a", "b", "c", "d"))
    (tmp_path / "harness.log").write_text("  0%|   | 0/4 [00:00<?]\r 75%|██ | 3/4 [00:09<00:03]")
    assert runs.progress_fraction(runs.RunSpec("s", "m:C", runs.TEXT, "k=3"), text, tmp_path) == 0.75


class ScriptedRecognizerFake:
    """Stands in for a recogniser (the real one runs in the speech report test): answers each call with the next
    scripted words and records what it heard."""

    def __init__(self, answers: list[list[str]]):
        self.answers, self.heard = list(answers), []

    def transcribe(self, audio, language, context="", prefix=""):
        from common.stream import TimedWord

        self.heard.append((len(audio) / SAMPLE_RATE, language, context))
        return [TimedWord(word, 0.0, 0.1) for word in self.answers.pop(0)]


def test_offline_cascade_hears_each_segment_whole_in_pieces_of_at_most_28_s_and_cuts_loops(tmp_path):
    from evaluation.offline import transcribe_segments

    for name, seconds in (("a.wav", 70.0), ("b.wav", 5.0)):
        soundfile.write(tmp_path / name, np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32), SAMPLE_RATE)
    segments = [{"wav": "a.wav", "offset": 1.0, "duration": 3.0}, {"wav": "a.wav", "offset": 5.0, "duration": 60.0},
                {"wav": "b.wav", "offset": 0.5, "duration": 4.0}]
    (tmp_path / "segments.yaml").write_text(yaml.safe_dump(segments))
    recognizer = ScriptedRecognizerFake([["Hello", "there."], ["one", "two"], ["three"], ["four."],
                                         ["so", "it", "goes.", "so", "it", "goes.", "so"]])
    written = tmp_path / "transcripts.txt"
    with open(written, "w") as out:
        transcripts = list(transcribe_segments(recognizer, tmp_path / "segments.yaml", "en", out))
    assert transcripts == ["Hello there.", "one two three four.", "so it goes."]
    assert written.read_text().splitlines() == transcripts
    # 60 s in three pieces of 20 s, each given the words before it as context; every segment exactly its length.
    assert [round(seconds, 3) for seconds, _, _ in recognizer.heard] == [3.0, 20.0, 20.0, 20.0, 4.0]
    assert [context for _, _, context in recognizer.heard] == ["", "", "one two", "one two three", ""]
    assert {language for _, language, _ in recognizer.heard} == {"en"}


@pytest.mark.parametrize("agent", ["agents.alignatt4llm:Agent", "agents.alignatt4llm:WaitkTextAgent",
                                   "agents.ssbd:Agent"])
def test_the_offline_row_runs_on_the_agents_own_runtime_and_prompt(agent):
    """The offline row reads a llama.cpp agent's GGUF weights and threads, not the transformers default (it once ran
    every agent's offline row on transformers), and its prompt layout."""
    from evaluation.offline import offline_config
    from agents.systems.config import DraftingConfig

    config = runs.agent_class(agent).config_class(
        model="embedded", backend="llama_cpp", gguf_weights="q4_0", n_threads=1, n_ctx=1024,
        instruction_position="before_source", max_new_tokens=9, final_max_new_tokens=99)
    offline = offline_config(config)
    for name in ("backend", "gguf_weights", "n_threads", "n_ctx", "instruction_position", "model",
                 "final_max_new_tokens", "source_lang", "target_lang"):
        assert getattr(offline, name) == getattr(config, name), name
    assert isinstance(offline, DraftingConfig)


def test_offline_cascade_is_refused_for_a_text_agent_and_for_an_agent_without_recogniser(tmp_path, talks, capsys):
    import argparse

    from evaluation import offline
    from evaluation.command import run_specs

    args = argparse.Namespace(name=None, agent="agents.alignatt4llm:TextAgent", set=[], config=None, sweep=[],
                              variant=[], jobs=1, offline=False, offline_cascade=True, offline_only=False)
    with pytest.raises(ValueError, match="--offline-cascade needs a speech agent"):
        run_specs(args, runs.TEXT)
    speech = argparse.Namespace(**{**vars(args), "agent": "agents.alignatt4llm:Agent", "offline_only": True})
    assert [spec.kind for spec in run_specs(speech, runs.SPEECH)] == [runs.OFFLINE_CASCADE]  # no streamed run
    with pytest.raises(ValueError, match="add --offline"):
        run_specs(argparse.Namespace(**{**vars(speech), "offline_cascade": False}), runs.SPEECH)
    assert offline.main(["--agent", "agents.alignatt4llm:TextAgent", "--segments", str(talks["segments"]),
                         "--source-lang", "en", "--target-lang", "de", "--out", str(tmp_path / "o.txt")]) == 2
    assert "--segments needs a speech cascade agent" in capsys.readouterr().err


def test_fake_synthesis_two_evaluations_building_one_mcif_speech_set_at_once_both_get_it(tmp_path, monkeypatch):
    """Two `simulagents eval` commands started together both find the synthetic set missing and build it: each in
    its own staging folder (they once shared one, and the slower crashed reading a file the faster had moved away).
    The synthesis is faked (a slow writer of the set's files); the rename race is the real code's."""
    import threading
    import time

    from common.datasets import MCIFLine

    lines = [MCIFLine(i, i, talk, 0.5 + 3 * i, 2.5, src, ref)
             for i, (talk, src, ref) in enumerate(zip(["t1", "t1", "t2", "t2"], SOURCES, REFERENCES))]
    monkeypatch.setattr(data, "mcif_lines", lambda *args, **kwargs: lines)
    started = threading.Barrier(2)

    def slow_synthesis(sources, segments, out_dir, progress=None):
        started.wait(timeout=10)  # both builders are inside before either finishes
        out_dir.mkdir(parents=True, exist_ok=True)  # as synthesize_long_form: the folder may already exist
        for wav in dict.fromkeys(segment["wav"] for segment in segments):
            soundfile.write(str(out_dir / wav), np.zeros(SAMPLE_RATE * 15, np.float32), SAMPLE_RATE)
            time.sleep(0.05)
        (out_dir / "wavs.txt").write_text("".join(f"{out_dir / w}\n" for w in ("t1.wav", "t2.wav")))
        (out_dir / "audio-segments.yaml").write_text(yaml.safe_dump(segments))

    monkeypatch.setattr(data, "synthesize_long_form", slow_synthesis)
    results, errors = [], []

    def build():
        try:
            results.append(data.mcif_speech_set("de", "calibration", tmp_path))
        except Exception as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(results) == 2 and results[0].segments == results[1].segments
    assert results[0].segments.is_file() and len(results[0].segment_entries) == 4
    assert [p.name for p in tmp_path.iterdir()] == [results[0].segments.parent.name]  # no staging folder left


def test_runs_side_by_side_get_their_share_of_the_cores_in_every_thread_knob(tmp_path, monkeypatch):
    """`--jobs 2` on 2 cores: each run's harness command gives llama.cpp and Whisper one thread (the presets fix 2,
    which OMP_NUM_THREADS does not reach), as the processor config simulstream builds from it shows; a count the user
    set stays, and a run alone keeps the preset's. Fake harness command; the real command() builds the arguments."""
    from types import SimpleNamespace

    from agents.simulstream_cli import build_parser, processor_config

    monkeypatch.setattr(runs.os, "cpu_count", lambda: 2)
    seen = {}
    real_command = runs.command

    def recording_command(spec, dataset, run_dir, threads):
        seen[spec.regime] = real_command(spec, dataset, run_dir, threads)
        return [sys.executable, "-c", "pass"]

    monkeypatch.setattr(runs, "command", recording_command)
    dataset = SimpleNamespace(wav_list=tmp_path / "wavs.txt", source_lang="en", target_lang="de",
                              inputs_sha1=lambda: None)
    preset = str(TESTS.parent / "eval_configs/alignatt4llm_cpu_low.yaml")
    specs = [runs.RunSpec("alignatt", "agents.alignatt4llm:Agent", runs.SPEECH, "preset", {}, preset),
             runs.RunSpec("alignatt", "agents.alignatt4llm:Agent", runs.SPEECH, "user-set", {"n_threads": 2}, preset)]

    def processor(regime: str) -> dict:
        args = build_parser().parse_args(seen[regime][3:])  # after: python -m agents.simulstream_cli
        return processor_config(args.agent, args.config, args.set)

    runs.execute(specs, dataset=dataset, out=tmp_path, jobs=2, report=lambda line: None, poll_seconds=0.01)
    assert (processor("preset")["n_threads"], processor("preset")["asr_threads"]) == (1, 1)
    assert (processor("user-set")["n_threads"], processor("user-set")["asr_threads"]) == (2, 1)
    assert yaml.safe_load(Path(preset).read_text())["n_threads"] == 2  # the preset's own count, for a run alone
    runs.execute(specs[:1], dataset=dataset, out=tmp_path / "alone", jobs=1, report=lambda line: None,
                 poll_seconds=0.01)
    assert processor("preset")["n_threads"] == 2 and "asr_threads" not in processor("preset")


def test_a_chinese_offline_row_is_scored_against_its_streamed_rows_references_with_fake_agent(talks, tmp_path,
                                                                                             monkeypatch):
    """OmniSTEval's long-form scoring removes the spaces of character-level references ("Sara Papi" -> "SaraPapi");
    SimulEval's keeps them. An offline row of a Chinese speech set is scored against the references its streamed
    rows are (it was scored against the lines as written, so the two did not compare and the paired bootstrap
    refused them); a text set's offline row keeps the lines as SimulEval does."""
    from evaluation import scoring
    from evaluation.report import Result
    from evaluation import paired_bootstrap

    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    written = ["大家好，我是 Sara Papi。", "今天 我 讲 同声传译。", "这些系统在演讲者说话时翻译。", "谢谢 大家。"]
    reference = write_lines(tmp_path / "zh.txt", written)
    out = tmp_path / "out"
    arguments = eval_args({**talks, "reference": reference}, out, "fake_agents:FakeSlowSpeechProcessor",
                          "--set", "speech_chunk_size=1.0")
    arguments[arguments.index("--tgt-lang") + 1] = "zh"
    assert simulagents(arguments) == 0
    streamed = out / "runs" / "fake_agents_default"
    _, streamed_references, _ = runs.run_lines(streamed)
    assert streamed_references == [line.replace(" ", "") for line in written]  # what OmniSTEval scored against

    speech = data.speech_set(talks["wav_list"], talks["segments"], reference, "en", "zh", source=talks["source"])
    text = data.text_set(talks["source"], reference, "en", "zh")
    for dataset, expected in ((speech, streamed_references), (text, written)):
        spec = runs.RunSpec("offline-system", "fake_agents:FakeSlowSpeechProcessor", runs.OFFLINE, "offline")
        run_dir = spec.directory(out if dataset is speech else tmp_path / "text")
        runs.command(spec, dataset, run_dir)  # writes the files the offline harness reads
        hypotheses = ["大家好，我是 Sara Papi。", "今天我讲同声传译。", "这些系统翻译。", "谢谢大家。"]
        write_lines(run_dir / "offline.txt", hypotheses)
        scores = scoring.score_run(spec, run_dir, dataset)
        Result(spec.to_json(), dataset.name, "zh", scores).save(run_dir)
        assert runs.run_lines(run_dir)[1] == expected
        assert scores["BLEU"] == pytest.approx(scoring.corpus_quality(hypotheses, expected, "zh")["BLEU"])
    # The streamed row and the speech set's offline row now compare line by line.
    paired_bootstrap.main([str(out), "--baseline", streamed.name, "--samples", "20"])


def test_skip_talks_selects_the_next_talks_after_a_max_talks_run(shared_data):
    first = data.mcif_lines("de", "evaluation", 4, shared_data)
    following = data.mcif_lines("de", "evaluation", 4, shared_data, skip_talks=4)
    rest = data.mcif_lines("de", "evaluation", None, shared_data, skip_talks=4)
    whole = data.mcif_lines("de", "evaluation", None, shared_data)
    talks = list(dict.fromkeys(line.talk for line in whole))
    assert [line.talk for line in first] + [line.talk for line in rest] == [line.talk for line in whole]
    assert list(dict.fromkeys(line.talk for line in following)) == talks[4:8]
    assert following == rest[:len(following)]
    with pytest.raises(ValueError, match=f"--skip-talks must be from 0 to {len(talks) - 1}.* has {len(talks)} talks"):
        data.mcif_lines("de", "evaluation", None, shared_data, skip_talks=len(talks))
    with pytest.raises(ValueError, match="--skip-talks must be"):
        data.mcif_lines("de", "evaluation", None, shared_data, skip_talks=-1)


def test_talk_choices_on_your_own_files_are_refused_instead_of_ignored(talks, tmp_path, capsys):
    for choice in (["--skip-talks", "1"], ["--max-talks", "1"]):
        code = simulagents(eval_args(talks, tmp_path / "out", "agents.alignatt4llm:Agent", *choice))
        assert code != 0
        assert "--max-talks and --skip-talks choose talks of --dataset mcif-dev" in capsys.readouterr().err
