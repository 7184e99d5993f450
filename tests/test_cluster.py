"""`simulagents eval --ray` on real Ray clusters: a local one (`ray.init(num_cpus=2)`) gives the report of `--jobs 1`,
failing and stalled runs fail alone; a two-node cluster on loopback (`ray start` twice) runs shards on both nodes,
retries a killed worker and cancels its tasks on Ctrl-C. The speech agent is STAR on its tiny random checkpoint
(the cheapest real agent that streams talks), the text agent wait-k GPE on a tiny Qwen2."""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest
import ray
from test_evaluation import eval_args, report_results, talks  # noqa: F401 (talks: the two-talk set fixture)

from evaluation.cli import main as simulagents
from evaluation import cluster

BIN = Path(sys.executable).parent
TESTS = Path(__file__).resolve().parent
# Scores that depend on how fast the machine computed (every other score must be equal).
TIMED = ("(CA)", "RTF")


@contextlib.contextmanager
def ray_environment(scratch: Path, token: bool):
    """What every Ray process of a test runs with: token authentication with a token of its own (`token`; this
    process's Ray read its mode at import, so a cluster it starts itself runs without) and nothing written to ~/.ray,
    no usage statistics, shard scratch folders under `scratch` and the fake agents importable."""
    authentication = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)} if token else {
        "RAY_AUTH_MODE": "disabled"}
    variables = {**authentication, "RAY_USAGE_STATS_ENABLED": "0", "TMPDIR": str(scratch), "PYTHONPATH": str(TESTS)}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in variables.items():
            patch.setenv(name, value)
        yield


@pytest.fixture
def short_folder():
    """A folder with a short path (Ray's unix sockets live under its temp dir, at most 107 characters), removed after
    the test."""
    folder = Path(tempfile.mkdtemp(prefix="sa-ray-"))
    (folder / "scratch").mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def local_cluster(short_folder):
    """A local Ray cluster of 2 CPUs on a loopback address, stopped after the test."""
    with ray_environment(short_folder / "scratch", token=False):
        ray.init(num_cpus=2, _temp_dir=str(short_folder / "ray"), _node_ip_address="127.0.0.2",
                 include_dashboard=False, log_to_driver=False, logging_level="WARNING")
        try:
            yield short_folder
        finally:
            ray.shutdown()


def comparable(result: dict) -> dict:
    return {name: value for name, value in result["scores"].items() if not any(tag in name for tag in TIMED)}


def output_records(log: Path) -> list[tuple]:
    """A metrics log's output records without their timings: (stream, audio heard, tokens written, deleted)."""
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return [(r["id"], r["total_audio_processed"], r["generated_tokens"], r["deleted_tokens"]) for r in records
            if "generated_tokens" in r]


def star_arguments(talks: dict, checkpoint: Path, *extra: str) -> list[str]:
    """`simulagents eval` of STAR on the two talks, without --out: the tiny checkpoint transcribes (en->en), so the
    references are the sources."""
    return ["eval", "--agent", "agents.star:Agent", "--wav-list", str(talks["wav_list"]), "--segments",
            str(talks["segments"]), "--reference", str(talks["source"]), "--tgt-lang", "en", "--set",
            f"checkpoint={checkpoint}", "--set", "max_tokens=24", *extra]


@pytest.mark.harness
def test_a_sweep_on_a_local_ray_cluster_reports_what_jobs_1_reports(local_cluster, talks, star_checkpoint,
                                                                     tiny_checkpoint, tmp_path):
    """A speech agent at two chunk sizes (each run one task per talk) and a text agent (one task), by `--jobs 1` and
    by `--ray` on the same inputs: the same report (every score but the computation-aware ones and the real-time
    factor, the same notes and line counts), the talks' logs merged into the one a single process writes."""
    speech = star_arguments(talks, star_checkpoint, "--sweep", "speech_chunk_size=0.32,0.64")
    text = ["eval", "--agent", "agents.waitk_gpe:TextAgent", "--source", str(talks["source"]), "--reference",
            str(talks["reference"]), "--tgt-lang", "de", "--set", f"model={tiny_checkpoint('qwen2')}", "--set", "k=2",
            "--set", "max_word_tokens=3"]
    for name, arguments in (("speech", speech), ("text", text)):
        local, on_ray = tmp_path / f"{name}-local", tmp_path / f"{name}-ray"
        assert simulagents([*arguments, "--out", str(local), "--jobs", "1"]) == 0
        assert simulagents([*arguments, "--out", str(on_ray), "--ray"]) == 0
        expected, got = report_results(local), report_results(on_ray)
        assert set(got) == set(expected) and len(got) == (2 if name == "speech" else 1)
        for regime, result in expected.items():
            assert comparable(got[regime]) == comparable(result), (name, regime)
            assert set(got[regime]["scores"]) == set(result["scores"]) and got[regime]["notes"] == result["notes"]
        for table in ("table.md", "report.tsv"):
            assert len((on_ray / table).read_text().splitlines()) == len((local / table).read_text().splitlines())
    for regime in ("speech_chunk_size=0.32", "speech_chunk_size=0.64"):
        run, alone = tmp_path / "speech-ray/runs" / f"star_{regime}", tmp_path / "speech-local/runs" / f"star_{regime}"
        records = output_records(run / "metrics.jsonl")
        assert records == output_records(alone / "metrics.jsonl") and {r[0] for r in records} == {0, 1}
        assert [len(output_records(run / "shards" / talk / "metrics.jsonl")) for talk in ("talkA", "talkB")] == [
            sum(r[0] == number for r in records) for number in (0, 1)]
        shards = json.loads((run / "environment.json").read_text())["ray"]["shards"]
        assert set(shards) == {"talkA", "talkB"} and all(s["attempts"] == 1 and s["nodes"] == ["127.0.0.2"]
                                                         for s in shards.values())
    assert not list((local_cluster / "scratch").glob("simulagents-shard-*"))  # each shard removed its scratch folder


def test_a_failing_run_and_a_stalled_run_fail_alone_and_the_others_score_with_fake_agent(local_cluster, talks,
                                                                                         tmp_path, capsys,
                                                                                         monkeypatch):
    """A run no node could hold is refused before anything runs; a run whose harness fails on every talk fails with
    its log, without retries; a run that stops making progress is cancelled after --ray-stall (its harness killed),
    with the local progress lines (share of audio per run) while it waits; the other run of each sweep is scored and
    reported."""
    assert simulagents(eval_args(talks, tmp_path / "gpu", "agents.alignatt4llm:Agent", "--set", "asr_device=cuda",
                                 "--ray")) == 2
    assert ("alignatt4llm_default needs 2 CPU(s) and 1 GPU(s) per task (its thread and device knobs), but no node of "
            "the cluster has them (largest: 2 CPUs)") in capsys.readouterr().err
    assert not (tmp_path / "gpu" / "runs").exists()
    out = tmp_path / "failing"
    assert simulagents(eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set", "speech_chunk_size=1.0",
                                 "--sweep", "fail_above=0.0,0.01", "--ray")) == 2
    error = capsys.readouterr().err
    failed = out / "runs/fake_agents_fail_above=0.01"
    assert f"runs failed: fake_agents_fail_above=0.01 (see {failed}/shards/talk" in error
    log = next(failed.glob("shards/*/harness.log")).read_text()
    assert "fake model step failure on a chunk above 0.01" in log and "attempt 2" not in error
    assert set(report_results(out)) == {"fail_above=0.0"}
    assert (out / "runs/fake_agents_fail_above=0.0/result.json").is_file()

    out = tmp_path / "stalled"  # each chunk of its second run takes 600 s: only the stall's cancel ends it soon
    monkeypatch.setattr(cluster, "REPORT_SECONDS", 0.0)  # a progress line at every poll, not every 30 s
    assert simulagents(eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set", "speech_chunk_size=1.0",
                                 "--sweep", "seconds_per_chunk=0.0,600", "--ray", "--ray-stall", "20")) == 2
    error = capsys.readouterr().err
    assert "runs failed: fake_agents_seconds_per_chunk=600" in error and "no progress for 20 s" in error
    assert re.search(r"^  (.*; )?fake_agents_seconds_per_chunk=600 0% \(\d+ s\)", error, re.MULTILINE), error
    assert set(report_results(out)) == {"seconds_per_chunk=0.0"}
    assert wait_until(lambda: not harness_processes("seconds_per_chunk=600"), 30), "a cancelled harness runs on"


def test_a_worker_that_dies_past_its_retries_fails_its_run_alone_with_ray_s_reason_with_fake_agent(
        local_cluster, talks, tmp_path, capsys):
    """--ray-retries 0 and the Ray worker of a shard killed while its harness runs: the run fails with that shard's
    harness.log (Ray's reason), its other shard is cancelled, the other run of the sweep is scored and reported."""
    killed: list[str] = []

    def kill_a_worker() -> None:
        def kill() -> bool:
            for harness in harness_processes("seconds_per_chunk=600"):
                with contextlib.suppress(psutil.Error):
                    worker, command = harness.parent(), " ".join(harness.cmdline())
                    if worker.cmdline()[0].startswith("ray::"):  # a worker names itself after its task
                        worker.kill()  # its harness dies with it: nothing of it is read after this
                        killed.append(command)
                        return True
            return False
        wait_until(kill, 180)

    killer = threading.Thread(target=kill_a_worker, daemon=True)
    killer.start()
    out = tmp_path / "out"
    assert simulagents(eval_args(talks, out, "fake_agents:FakeSlowSpeechProcessor", "--set", "speech_chunk_size=1.0",
                                 "--sweep", "seconds_per_chunk=0.0,600", "--ray", "--ray-retries", "0",
                                 "--ray-stall", "120")) == 2  # the stall: should no worker be killed
    killer.join(timeout=10)
    assert killed, "no harness of the slow run started"
    error = capsys.readouterr().err
    failed = out / "runs/fake_agents_seconds_per_chunk=600"
    assert f"runs failed: fake_agents_seconds_per_chunk=600 (see {failed}/shards/talk" in error
    assert "(ran 1 time(s))" in error  # the FAILED line names the killed shard, not the one cancelled for it
    logs = {path.parent.name: path.read_text() for path in failed.glob("shards/*/harness.log")}
    assert set(logs) == {"talkA", "talkB"}
    # The killed shard has Ray's reason, the other one was cancelled for it.
    assert sorted("== Ray: " in log for log in logs.values()) == [False, True], logs
    assert any("another shard of its run failed" in log for log in logs.values())
    assert set(report_results(out)) == {"seconds_per_chunk=0.0"}
    assert wait_until(lambda: not harness_processes("seconds_per_chunk=600"), 30), "a cancelled harness runs on"


def test_ctrl_c_while_shards_are_submitted_cancels_those_already_submitted_with_fake_agent(local_cluster, talks,
                                                                                           tmp_path, capsys,
                                                                                           monkeypatch):
    """Ctrl-C between two shards of a run (here: while the second talk goes into the object store) cancels the shard
    already on the cluster: its task ends cancelled, and nothing of the run computes on."""
    submitted: list[cluster.Shard] = []

    def recorded_shard(*args, **kwargs) -> cluster.Shard:
        submitted.append(cluster_shard(*args, **kwargs))
        return submitted[-1]

    def put_then_interrupt(value, *args, **kwargs):
        if submitted:  # the first talk's shard is on the cluster
            raise KeyboardInterrupt
        return ray_put(value, *args, **kwargs)

    cluster_shard, ray_put = cluster.Shard, ray.put
    monkeypatch.setattr(cluster, "Shard", recorded_shard)
    monkeypatch.setattr(ray, "put", put_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        simulagents(eval_args(talks, tmp_path / "out", "fake_agents:FakeSlowSpeechProcessor", "--set",
                              "speech_chunk_size=1.0", "--set", "seconds_per_chunk=600", "--ray"))
    assert "interrupted: cancelled 1 task(s) on the cluster" in capsys.readouterr().err
    assert [shard.name for shard in submitted] == ["talkA"]
    with pytest.raises(ray.exceptions.TaskCancelledError):
        ray.get(submitted[0].task, timeout=60)
    assert wait_until(lambda: not harness_processes("seconds_per_chunk=600"), 30), "a cancelled harness runs on"


def harness_processes(marker: str) -> list[psutil.Process]:
    """The harness processes (simulstream's runner) whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        line = " ".join(process.info["cmdline"] or ())
        if "agents.simulstream_cli" in line and marker in line:
            found.append(process)
    return found


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def ray_cli(*arguments: str) -> None:
    subprocess.run([str(BIN / "ray"), *arguments], check=True, capture_output=True, timeout=180)


def running_shard(scratch: Path, seconds: float = 180) -> dict:
    """The environment.json of the first shard whose harness is running (on either node; a child of its worker):
    mid-shard. Its "ray" entry has the worker's pid."""
    found: list[dict] = []

    def started() -> bool:
        for path in scratch.glob("simulagents-shard-*/run/environment.json"):
            with contextlib.suppress(OSError, ValueError, psutil.Error):  # written, or its worker ended, meanwhile
                environment = json.loads(path.read_text())
                if psutil.Process(environment["ray"]["pid"]).children():
                    found.append(environment)
                    return True
        return False

    assert wait_until(started, seconds), f"no shard's harness started within {seconds} s"
    return found[0]


@pytest.mark.harness
def test_a_two_node_loopback_cluster_runs_shards_on_both_and_retries_a_killed_worker(short_folder, talks,
                                                                                     star_checkpoint, tmp_path):
    """`ray start --head` and `ray start --address` (one CPU each, on 127.0.0.2 and 127.0.0.3) and the command as a
    user runs it: the two talks' shards start on both nodes; the worker of one, killed mid-shard, is retried and the
    report is complete and says so. Then Ctrl-C on a command whose shards never finish cancels them on the cluster."""
    scratch = short_folder / "scratch"
    with ray_environment(scratch, token=True):
        try:
            ray_cli("start", "--head", "--num-cpus=1", "--port=0", f"--temp-dir={short_folder / 'ray'}",
                    "--include-dashboard=false", "--node-ip-address=127.0.0.2", "--disable-usage-stats")
            address = (short_folder / "ray" / "ray_current_cluster").read_text().strip()
            ray_cli("start", f"--address={address}", "--num-cpus=1", "--node-ip-address=127.0.0.3",
                    "--disable-usage-stats")
            out = tmp_path / "out"
            arguments = star_arguments(talks, star_checkpoint, "--set", "speech_chunk_size=0.32", "--out", str(out),
                                       "--ray", address)
            with open(tmp_path / "driver.log", "w") as log:
                driver = subprocess.Popen([str(BIN / "simulagents"), *arguments], stdout=log, stderr=subprocess.STDOUT)
            try:
                killed = running_shard(scratch)["ray"]["pid"]
                os.kill(killed, signal.SIGKILL)
                assert driver.wait(timeout=300) == 0, (tmp_path / "driver.log").read_text()
            finally:
                driver.kill()
            (result,) = report_results(out).values()
            assert result["scores"]["BLEU"] >= 0 and result["scores"]["LongYAAL (CU)"] is not None
            shards = json.loads((out / "runs/star_default/environment.json").read_text())["ray"]["shards"]
            assert {shard["nodes"][0] for shard in shards.values()} == {"127.0.0.2", "127.0.0.3"}
            assert sorted(shard["attempts"] for shard in shards.values()) == [1, 2]
            retried = next(name for name, shard in shards.items() if shard["attempts"] == 2)
            note = f"star_default: the cluster ran shard {retried} 2 times"
            assert any(note in n for n in result["notes"]) and note in (out / "table.md").read_text()
            assert len(output_records(out / "runs/star_default/metrics.jsonl")) == sum(
                len(output_records(path)) for path in out.glob("runs/star_default/shards/*/metrics.jsonl"))

            stuck = eval_args(talks, tmp_path / "interrupted", "fake_agents:FakeSlowSpeechProcessor", "--set",
                              "speech_chunk_size=1.0", "--set", "seconds_per_chunk=600", "--ray", address)
            with open(tmp_path / "interrupted.log", "w") as log:
                driver = subprocess.Popen([str(BIN / "simulagents"), *stuck], stdout=log, stderr=subprocess.STDOUT)
            try:
                assert wait_until(lambda: len(harness_processes("seconds_per_chunk=600")) == 2, 180)
                driver.send_signal(signal.SIGINT)
                assert driver.wait(timeout=180) != 0  # a loaded 2-core machine took over 60 s to stop Ray
            finally:
                driver.kill()
            assert "interrupted: cancelled 2 task(s) on the cluster" in (tmp_path / "interrupted.log").read_text()
            assert wait_until(lambda: not harness_processes("seconds_per_chunk=600"), 30)
        finally:
            subprocess.run([str(BIN / "ray"), "stop"], capture_output=True, timeout=120)


def test_bad_cluster_input_is_refused_with_the_fix_named(talks, tmp_path, capsys, monkeypatch):
    """An address where no cluster answers, --jobs beside --ray and --ray without Ray: clear errors, at once; the
    resources a run's tasks ask for, from its preset and settings."""
    arguments = eval_args(talks, tmp_path / "out", "fake_agents:FakeSlowSpeechProcessor", "--set",
                          "speech_chunk_size=1.0")
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    # Refused before Ray's own connect, which retries an address where nothing listens for minutes.
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: pytest.fail("ray.init tried a dead address"))
    with socket_on_loopback() as free_port:
        assert simulagents([*arguments, "--ray", f"127.0.0.1:{free_port}"]) == 2
    assert f"--ray 127.0.0.1:{free_port}: no Ray cluster answers there" in capsys.readouterr().err
    assert simulagents([*arguments, "--ray", "--jobs", "2"]) == 2
    assert "with --ray the cluster runs as many tasks as its CPUs hold: drop --jobs" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "ray", None)  # as without the cluster extra
    assert simulagents([*arguments, "--ray"]) == 2
    assert "--ray needs Ray: install the cluster extra: pip install -e '.[cluster]'" in capsys.readouterr().err
    spec = cluster.runs.RunSpec("a", "agents.alignatt4llm:Agent", cluster.runs.SPEECH, "default", {},
                                str(TESTS.parent / "eval_configs/alignatt4llm_cpu.yaml"))
    assert cluster.task_resources(spec) == {"num_cpus": 2, "num_gpus": 0}  # the preset's n_threads: 2
    gpu = cluster.runs.RunSpec("a", "agents.alignatt4llm:Agent", cluster.runs.SPEECH, "gpu",
                               {"model_device": "cuda", "n_threads": 1, "asr_threads": 1}, spec.config)
    assert cluster.task_resources(gpu) == {"num_cpus": 1, "num_gpus": 1}


@contextlib.contextmanager
def socket_on_loopback():
    """A loopback port that nothing listens on (bound, not listening, during the block)."""
    import socket

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]
