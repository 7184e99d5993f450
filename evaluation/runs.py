"""One evaluation run = one agent at one operating point on one test set, executed by the real harness in its own
process (simulstream's runner for speech agents, SimulEval's CLI for text agents, whole sentences for the offline
row); several run in parallel, each reporting how far it got."""
from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml

from evaluation.data import EvalSet
from evaluation.policy_stats import EVENT_LOG, POLICY_LOG
from evaluation.provenance import ENVIRONMENT_FILE, environment

SPEECH, TEXT, OFFLINE = "speech", "text", "offline"
OFFLINE_CASCADE = "offline-cascade"  # the model on the recogniser's transcript of each whole segment (speech only)
OFFLINE_KINDS = (OFFLINE, OFFLINE_CASCADE)
TQDM_COUNT = re.compile(r"\| *(\d+)/\d+ \[")  # "| 3/12 [00:41<..." in a tqdm progress bar
# The knobs that fix a runtime's CPU threads (llama.cpp's, CTranslate2's Whisper's); OMP_NUM_THREADS reaches torch only.
THREAD_KNOBS = ("n_threads", "asr_threads")


class EvaluationError(RuntimeError):
    """A run failed or its output cannot be scored; the message names the run and where its log is."""


@dataclass(frozen=True)
class RunSpec:
    """`system` at operating point `regime`: `settings` (the swept and the fixed ones) on top of `config`; `kind`
    says which harness runs it."""

    system: str
    agent: str
    kind: str
    regime: str
    settings: dict = field(default_factory=dict)
    config: str | None = None

    @property
    def slug(self) -> str:
        return re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{self.system}/{self.regime}").strip("_")

    def directory(self, out: Path) -> Path:
        return out / "runs" / self.slug

    def to_json(self) -> dict:
        return {"system": self.system, "agent": self.agent, "kind": self.kind, "regime": self.regime,
                "settings": self.settings, "config": self.config}


def agent_class(spec: str):
    """MODULE:CLASS (or MODULE.CLASS) imported; ValueError naming what is wrong."""
    module_name, sep, class_name = spec.partition(":")
    if not sep:
        module_name, _, class_name = spec.rpartition(".")
    if not module_name or not class_name:
        raise ValueError(f"--agent must look like MODULE:CLASS (e.g. agents.alignatt4llm:Agent), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ValueError(f"--agent {spec}: cannot import {module_name!r} ({error})") from None
    try:
        return getattr(module, class_name)
    except AttributeError:
        raise ValueError(f"--agent {spec}: {module_name} has no {class_name!r}") from None


def agent_kind(spec: str) -> str:
    """SPEECH for simulstream speech processors, TEXT for SimulEval text-to-text agents."""
    cls = agent_class(spec)
    try:
        from simulstream.server.speech_processors import SpeechProcessor

        if isinstance(cls, type) and issubclass(cls, SpeechProcessor):
            return SPEECH
    except ImportError:
        pass
    try:
        from simuleval.agents import TextToTextAgent

        if isinstance(cls, type) and issubclass(cls, TextToTextAgent):
            return TEXT
    except ImportError:
        pass
    raise ValueError(f"--agent {spec} is neither a simulstream speech processor nor a SimulEval text-to-text agent")


def parse_sweep(sweeps: Sequence[str]) -> list[dict]:
    """`KEY=V1,V2` options -> one settings dict per point of their cartesian product (values read as YAML)."""
    axes = []
    for sweep in sweeps:
        key, sep, values = sweep.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ValueError(f"--sweep expects KEY=V1,V2,..., got {sweep!r}")
        axes.append([(key.strip(), yaml.safe_load(value)) for value in values.split(",")])
    return [dict(point) for point in itertools.product(*axes)] if axes else [{}]


def parse_variants(variants: Sequence[str]) -> list[tuple[str, dict]]:
    """`NAME:KEY=V,KEY=V` options (NAME alone: the configuration as it is) -> one named settings dict each: the rows
    of an ablation, each the configuration with its own changes (values read as YAML; a list joins names with +)."""
    parsed = []
    for variant in variants:
        name, _, changes = variant.partition(":")
        settings = {}
        for change in filter(None, changes.split(",")):
            key, sep, value = change.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--variant expects NAME:KEY=VALUE,KEY=VALUE, got {variant!r}")
            settings[key.strip()] = yaml.safe_load(value)
        if not name.strip() or "/" in name:
            raise ValueError(f"--variant needs a NAME (no /) before its changes, got {variant!r}")
        parsed.append((name.strip(), settings))
    if len({name for name, _ in parsed}) != len(parsed):
        raise ValueError(f"two --variant options share a name: {[name for name, _ in parsed]}")
    return parsed


def regime_label(settings: dict) -> str:
    return ",".join(f"{key}={value}" for key, value in settings.items()) or "default"


TRANSCRIPTS = "transcripts.txt"  # the offline cascade's recogniser output, one line per segment


def config_knobs(agent: str) -> set[str]:
    """The knob names of the agent's config class (what `--set` and SimulEval's arguments may give it)."""
    return {f.name for f in dataclasses.fields(agent_class(agent).config_class)}


def with_event_log(spec: RunSpec, run_dir: Path) -> dict:
    """The run's settings plus `event_log` in its directory, when the agent's translator has that knob."""
    settings = dict(spec.settings)
    if spec.kind not in OFFLINE_KINDS and "event_log" not in settings:
        if "event_log" in config_knobs(spec.agent):
            settings["event_log"] = str(run_dir / EVENT_LOG)
    return settings


def with_thread_share(settings: dict, agent: str, threads: int) -> dict:
    """`settings` plus each thread knob of the agent's config (THREAD_KNOBS) that they leave unset, at `threads`: a
    run beside others (`--jobs`) keeps to its share of the cores. Preset counts are for a run alone: two runs with
    2-thread llama.cpp teams on 2 cores spin at each other's barriers (docs/cpu_low_latency.md)."""
    knobs = config_knobs(agent)
    return {**settings, **{knob: threads for knob in THREAD_KNOBS if knob in knobs and knob not in settings}}


def command(spec: RunSpec, dataset: EvalSet, run_dir: Path, threads: int = 0) -> list[str]:
    """The harness command line of one run (the same a user would type); `threads` > 0 (runs side by side): the
    run's share of the CPU threads, given to every thread knob its settings leave unset."""
    settings = with_event_log(spec, run_dir)
    if threads:
        settings = with_thread_share(settings, spec.agent, threads)
    if spec.kind == SPEECH:
        arguments = [sys.executable, "-m", "agents.simulstream_cli", "--agent", spec.agent,
                     "--wav-list", str(dataset.wav_list), "--src-lang", dataset.source_lang,
                     "--tgt-lang", dataset.target_lang, "--metrics-log", str(run_dir / "metrics.jsonl")]
        arguments += ["--config", spec.config] if spec.config else []
        for key, value in settings.items():
            arguments += ["--set", f"{key}={value}"]
        return arguments
    references = dataset.offline_references if spec.kind in OFFLINE_KINDS else None
    reference, source = dataset.write_text_files(run_dir, references)
    if spec.kind == TEXT:
        plugins = Path(__file__).resolve().parents[1] / "agents" / "simuleval_plugins"
        arguments = [str(Path(sys.executable).parent / "simuleval"), "--agent-class", spec.agent.replace(":", "."),
                     "--source", str(source), "--target", str(reference), "--output", str(run_dir / "simuleval"),
                     "--user-dir", str(plugins), *simuleval_scorers(dataset.latency_unit)]
        knobs = config_knobs(spec.agent)
        for knob, language in (("source_lang", dataset.source_lang), ("target_lang", dataset.target_lang)):
            arguments += [f"--{knob.replace('_', '-')}", language] if knob in knobs else []
        arguments += ["--config", spec.config] if spec.config else []
        for key, value in settings.items():
            arguments += [f"--{key.replace('_', '-')}", str(value)]
        return arguments
    arguments = [sys.executable, "-m", "evaluation.offline", "--agent", spec.agent,
                 "--source-lang", dataset.source_lang, "--target-lang", dataset.target_lang,
                 "--out", str(run_dir / "offline.txt")]
    if spec.kind == OFFLINE_CASCADE:
        arguments += ["--segments", str(dataset.segments), "--transcripts", str(run_dir / TRANSCRIPTS)]
    else:
        arguments += ["--source", str(source)]
    arguments += ["--config", spec.config] if spec.config else []
    for key, value in settings.items():
        arguments += ["--set", f"{key}={value}"]
    return arguments


def progress_fraction(spec: RunSpec, dataset: EvalSet, run_dir: Path) -> float:
    """How much of the test set a running run has done, read from what its harness has written so far."""
    if spec.kind == SPEECH:
        log = run_dir / "metrics.jsonl"
        heard: dict[int, float] = {}
        if log.is_file():
            for line in log.read_text().splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # the line being written
                    continue
                if "total_audio_processed" in record:
                    heard[record["id"]] = max(heard.get(record["id"], 0.0), record["total_audio_processed"])
        return min(1.0, sum(heard.values()) / max(dataset.audio_seconds, 1e-9))
    if spec.kind == TEXT:  # SimulEval writes instances.log at the end; its progress bar counts instances
        log = run_dir / "harness.log"
        bars = TQDM_COUNT.findall(log.read_text(errors="replace")) if log.is_file() else []
        done = int(bars[-1]) if bars else 0
    else:
        written = run_dir / "offline.txt"
        done = len(written.read_text().splitlines()) if written.is_file() else 0
    return min(1.0, done / max(len(dataset.references), 1))


@dataclass
class RunningRun:
    spec: RunSpec
    run_dir: Path
    process: subprocess.Popen
    started: float


def runs_of(system: str, out: Path) -> list[tuple[RunSpec, Path]]:
    """(spec, run directory) of every run of `system` that `execute` left in `out` (read from its run.json)."""
    found = []
    for run_json in sorted(out.glob("runs/*/run.json")):
        spec = RunSpec(**json.loads(run_json.read_text()))
        if spec.system == system:
            found.append((spec, run_json.parent))
    if not found:
        raise EvaluationError(f"no runs of system {system!r} in {out / 'runs'}: --score-only scores the runs an "
                              "earlier `simulagents eval --out` left there (pass that command's --name)")
    return found


def finished_runs(out: Path) -> dict[str, Path]:
    """{run folder name: run directory} of every run in `out` that was scored (has its result.json)."""
    runs = {p.name: p for p in sorted(out.glob("runs/*")) if (p / "result.json").exists()}
    if not runs:
        raise EvaluationError(f"no finished runs (OUT/runs/*/result.json) in {out}")
    return runs


def run_lines(run_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """(hypotheses, references, sources) of one finished run, one entry per reference line: SimulEval's instances
    log (text runs), OmniSTEval's output resegmented onto the reference lines (speech runs; sources: the transcripts
    the set was spoken from), or the offline rows' files."""
    log = run_dir / "simuleval" / "instances.log"
    if log.exists():
        rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [r["prediction"] for r in rows], [r["reference"].strip() for r in rows], [r["source"] for r in rows]
    resegmented = run_dir / "omnisteval" / "instances.resegmented.jsonl"
    if resegmented.exists():
        rows = [json.loads(line) for line in resegmented.read_text(encoding="utf-8").splitlines() if line.strip()]
        sources = (run_dir / "source.txt").read_text(encoding="utf-8").splitlines()
        return [r["prediction"] for r in rows], [r["reference"].strip() for r in rows], sources
    if (run_dir / "offline.txt").exists():
        return tuple((run_dir / name).read_text(encoding="utf-8").splitlines()
                     for name in ("offline.txt", "reference.txt", "source.txt"))
    raise EvaluationError(f"{run_dir} holds no output to read (simuleval/instances.log, "
                          "omnisteval/instances.resegmented.jsonl or offline.txt): the run did not finish")


def simuleval_scorers(latency_unit: str) -> list[str]:
    """SimulEval's scorer arguments for a text run (and for scoring its instances log again): BLEU, chrF and the
    latencies, Chinese by characters."""
    unit = ["--sacrebleu-tokenizer", "zh", "--eval-latency-unit", "char"] if latency_unit == "char" else []
    return ["--quality-metrics", "BLEU", "CHRF", "--latency-metrics", "LAAL", "AL", "DAL", "AP", *unit]


def harness_environment(root: Path) -> dict[str, str]:
    """The environment a run's harness starts in: this checkout's code first on PYTHONPATH. A console script
    (`simuleval`) does not put its working directory on the path, so without it a run started from another checkout
    (a worktree of older code) imported the code of the checkout the venv was installed from."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    return env


def execute(specs: Sequence[RunSpec], dataset: EvalSet, out: Path, jobs: int = 1, report=print,
            poll_seconds: float = 1.0) -> list[tuple[RunSpec, Path]]:
    """Run every spec (at most `jobs` at once, each with its share of the CPU threads: OMP_NUM_THREADS and the
    agent's thread knobs), printing progress.

    Returns (spec, run directory) of each run in the order they finished; EvaluationError names the runs that failed
    and where their logs are."""
    pending, running, finished, failed = list(specs), [], [], []
    threads = max(1, (os.cpu_count() or 1) // max(jobs, 1))
    root = Path(__file__).resolve().parents[1]
    inputs_sha1 = dataset.inputs_sha1()
    last_report = time.monotonic()
    while pending or running:
        while pending and len(running) < jobs:
            spec = pending.pop(0)
            run_dir = spec.directory(out)
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "run.json").write_text(json.dumps(spec.to_json(), indent=2))
            arguments = command(spec, dataset, run_dir, threads if jobs > 1 else 0)
            (run_dir / "command.txt").write_text(" ".join(arguments) + "\n")
            env = harness_environment(root)
            if jobs > 1:
                env.setdefault("OMP_NUM_THREADS", str(threads))  # torch's share; the thread knobs are in `arguments`
            # Read as each run starts: a run queued behind others imports the code of its own start.
            (run_dir / ENVIRONMENT_FILE).write_text(json.dumps(
                {**environment(root, inputs_sha1), "omp_num_threads": env.get("OMP_NUM_THREADS")}, indent=2))
            with open(run_dir / "harness.log", "w") as log:
                process = subprocess.Popen(arguments, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
            running.append(RunningRun(spec, run_dir, process, time.monotonic()))
            report(f"started {spec.slug} ({spec.kind}): {run_dir / 'harness.log'}")
        for run in list(running):
            if run.process.poll() is None:
                continue
            running.remove(run)
            elapsed = time.monotonic() - run.started
            if run.process.returncode == 0:
                finished.append((run.spec, run.run_dir))
                report(f"finished {run.spec.slug} in {elapsed:.0f} s")
            else:
                failed.append(run)
                tail = (run.run_dir / "harness.log").read_text(errors="replace").strip().splitlines()[-3:]
                report(f"FAILED {run.spec.slug} (exit {run.process.returncode}): " + " | ".join(tail))
        if running and time.monotonic() - last_report >= 30:
            last_report = time.monotonic()
            report("  " + "; ".join(f"{r.spec.slug} {100 * progress_fraction(r.spec, dataset, r.run_dir):.0f}% "
                                    f"({time.monotonic() - r.started:.0f} s)" for r in running))
        if running:
            time.sleep(poll_seconds)
    if failed:
        raise EvaluationError("runs failed: " + ", ".join(f"{r.spec.slug} (see {r.run_dir / 'harness.log'})"
                                                        for r in failed))
    return finished
