"""`simulagents eval --ray`: the runs of `runs.execute` as Ray tasks on a cluster (a long-form speech run one task
per talk), their outputs brought back into the same OUT/runs/... layout and merged there for the driver's scoring."""
from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import yaml

from evaluation import runs
from evaluation.data import EvalSet
from evaluation.provenance import ENVIRONMENT_FILE, environment
from common.audio import wav_list_paths

INSTALL_HINT = "install the cluster extra: pip install -e '.[cluster]'"
DEFAULT_RETRIES = 2  # times Ray runs a shard again whose worker (or harness) was killed
DEFAULT_STALL_SECONDS = 1800.0  # a shard without progress this long is cancelled (model loading is no progress)
TICK_SECONDS = 2.0  # how often a running shard reports its progress
REPORT_SECONDS = 30.0  # how often the driver prints the runs' progress (as runs.execute does)
LOG_TAIL_BYTES = 4000  # of a running shard's harness log, kept by the board for a shard whose worker dies
SHARDS = "shards"  # OUT/runs/RUN/shards/TALK/: each talk's harness outputs (speech runs)
METRICS_LOG = "metrics.jsonl"
SIBLING_FAILED = "another shard of its run failed"  # why the driver cancels a failed run's other shards
# Run as `python -c DIE_WITH_PARENT PARENT_PID HARNESS...`: the harness is killed when the Ray worker running its
# shard dies (Linux's parent-death signal survives exec), so a killed worker leaves no harness computing on.
DIE_WITH_PARENT = """import ctypes, os, signal, sys
if sys.platform.startswith("linux"):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != int(sys.argv[1]):
        sys.exit("simulagents: the Ray worker of this shard died before its harness started")
os.execv(sys.argv[2], sys.argv[2:])
"""


class ShardKilled(RuntimeError):
    """A shard's harness was killed by a signal (its worker, the OOM killer): Ray runs the shard again."""


@dataclass(frozen=True)
class ShardJob:
    """What one task needs: the run, the set (driver paths; the task writes its inputs to a scratch folder), the
    input files it is sent (by name, contents passed beside it) and the preset's text."""

    key: str
    spec: runs.RunSpec
    dataset: EvalSet
    input_names: tuple[str, ...]
    config_text: str | None
    inputs_sha1: str
    num_cpus: int


@dataclass
class Shard:
    """One task of a run on the driver: where its outputs go and how much audio (or how many lines) it covers."""

    key: str
    name: str
    run: "RunState"
    directory: Path
    weight: float
    task: object = None  # the task's ObjectRef
    fraction: float = 0.0
    attempts: int = 0
    node: dict = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)  # the node of each attempt, as the board saw them
    result: dict | None = None
    error: str | None = None


@dataclass
class RunState:
    """A run on the driver: its shards, when it was submitted and when its first shard started (monotonic)."""

    spec: runs.RunSpec
    run_dir: Path
    submitted: float
    shards: list[Shard] = field(default_factory=list)
    started: float | None = None

    @property
    def done(self) -> bool:
        return all(s.result is not None or s.error is not None for s in self.shards)


@dataclass
class ClusterOutcome:
    """The runs that finished (in the order they did) and the failed ones, each with where its log is."""

    finished: list[tuple[runs.RunSpec, Path]]
    failed: list[str]


class ShardBoard:
    """A Ray actor the shards report to (start, node, progress, the tail of the harness log); the driver reads it
    for progress lines, retries and stalls. Times are the actor's clock."""

    def __init__(self):
        self.shards: dict[str, dict] = {}

    def started(self, key: str, node: dict) -> int:
        entry = self.shards.setdefault(key, {"attempts": 0, "nodes": []})
        entry["nodes"].append(node["ip"])
        entry.update(attempts=entry["attempts"] + 1, node=node, fraction=0.0, log_tail="", changed=time.time())
        return entry["attempts"]

    def tick(self, key: str, fraction: float, log_tail: str) -> None:
        entry = self.shards.get(key)
        if entry is None:
            return
        if fraction > entry["fraction"]:
            entry.update(fraction=fraction, changed=time.time())
        entry["log_tail"] = log_tail

    def snapshot(self) -> tuple[float, dict]:
        """(now, every shard's entry without its log tail: the driver reads this every second)."""
        return time.time(), {key: {k: v for k, v in entry.items() if k != "log_tail"}
                             for key, entry in self.shards.items()}

    def last_log(self, key: str) -> str:
        return self.shards.get(key, {}).get("log_tail", "")


def import_ray():
    try:
        import ray
    except ImportError:
        raise runs.EvaluationError(f"--ray needs Ray: {INSTALL_HINT}") from None
    return ray


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """EvaluationError naming the address when nothing listens at HOST:PORT (Ray's own connect retries for minutes)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # `auto` and ray:// (Ray Client) addresses are Ray's to resolve
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as error:
        raise runs.EvaluationError(
            f"--ray {address}: no Ray cluster answers there ({error}); start its head with `ray start --head "
            f"--port={port}` on {host}, or give the address `ray start --head` printed") from None


def connect(ray, address: str) -> bool:
    """Attach this process to the cluster at `address` ('' : the one `ray start` left running here, else a new local
    one; `auto`: a running one only). True when this call connected (and so should disconnect)."""
    if ray.is_initialized():  # the caller connected already (a notebook, a test)
        return False
    check_reachable(address)
    try:
        ray.init(address=address or None, log_to_driver=False, logging_level="WARNING")
    except ConnectionError as error:
        where = "a running cluster (`auto`)" if address == "auto" else address or "a local cluster"
        raise runs.EvaluationError(f"--ray: cannot connect to {where}: {error}; start one with `ray start --head` "
                                   "(docs/cluster.md) or drop --ray's address for a local one") from None
    return True


def run_config(spec: runs.RunSpec) -> Path | None:
    """The preset a run reads: its --config or, for a speech run, the agent's default preset (as simulstream_cli)."""
    from agents.simulstream_cli import default_config

    if spec.config:
        return Path(spec.config)
    return default_config(spec.agent) if spec.kind == runs.SPEECH else None


def run_values(spec: runs.RunSpec) -> dict:
    """The knob values a run's agent is built with: its config class's defaults, the preset, the run's settings."""
    from common.config import read_yaml

    defaults = {f.name: f.default for f in dataclasses.fields(runs.agent_class(spec.agent).config_class)
                if f.default is not dataclasses.MISSING}
    config = run_config(spec)
    return {**defaults, **(read_yaml(config) if config else {}), **spec.settings}


def task_resources(spec: runs.RunSpec) -> dict[str, int]:
    """Ray resources of one task of the run: a CPU per thread of its largest thread knob (llama.cpp's, Whisper's; 1
    when none is set) and a GPU when a device knob names cuda."""
    values = run_values(spec)
    threads = [values[k] for k in runs.THREAD_KNOBS
               if isinstance(values.get(k), int) and not isinstance(values[k], bool) and values[k] > 0]
    cuda = any(str(value).startswith("cuda") for key, value in values.items() if key.endswith("device"))
    return {"num_cpus": max(threads, default=1), "num_gpus": 1 if cuda else 0}


def check_feasible(ray, specs: Sequence[runs.RunSpec], resources: dict[str, dict]) -> None:
    """EvaluationError when no node of the cluster could ever run a run's tasks (they would wait forever)."""
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    for spec in specs:
        needs = resources[spec.slug]
        if not any(node.get("CPU", 0) >= needs["num_cpus"] and node.get("GPU", 0) >= needs["num_gpus"]
                   for node in nodes):
            largest = max((node.get("CPU", 0) for node in nodes), default=0)
            raise runs.EvaluationError(
                f"{spec.slug} needs {needs['num_cpus']} CPU(s) and {needs['num_gpus']} GPU(s) per task (its thread "
                f"and device knobs), but no node of the cluster has them (largest: {largest:g} CPUs): lower "
                f"n_threads/asr_threads with --set, or add a bigger node")


def shard_inputs(spec: runs.RunSpec, dataset: EvalSet) -> list[tuple[str, tuple[Path, ...]]]:
    """(shard name, the talk files it streams) for each task of a run: one per talk for a speech run (simulstream
    streams each wav on its own, so the talks' logs merge into the run's), one for the others (the offline cascade
    hears every talk)."""
    if spec.kind == runs.SPEECH:
        return [(path.stem, (path,)) for path in wav_list_paths(dataset.wav_list)]
    if spec.kind == runs.OFFLINE_CASCADE:
        return [("all", tuple(wav_list_paths(dataset.wav_list)))]
    return [("all", ())]


def talk_seconds(dataset: EvalSet, stem: str) -> float:
    return max((float(s["offset"]) + float(s["duration"]) for s in dataset.segment_entries
                if Path(str(s["wav"])).stem == stem), default=0.0)


# -- the task, on a worker ------------------------------------------------------------------------------------------

def local_inputs(job: ShardJob, scratch: Path, contents: Sequence[bytes]) -> tuple[runs.RunSpec, EvalSet]:
    """The shard's inputs written to `scratch` and the run and set pointing at them."""
    inputs = scratch / "inputs"
    inputs.mkdir()
    for name, content in zip(job.input_names, contents):
        (inputs / name).write_bytes(content)
    spec = job.spec
    if job.config_text is not None:
        (inputs / "config.yaml").write_text(job.config_text)
        spec = dataclasses.replace(spec, config=str(inputs / "config.yaml"))
    dataset = job.dataset
    if job.input_names:
        stems = {Path(name).stem for name in job.input_names}
        entries = tuple({**s, "wav": Path(str(s["wav"])).name} for s in dataset.segment_entries
                        if Path(str(s["wav"])).stem in stems)
        (inputs / "wavs.txt").write_text("".join(name + "\n" for name in job.input_names))
        (inputs / "audio-segments.yaml").write_text(yaml.safe_dump(list(entries), sort_keys=False))
        dataset = dataclasses.replace(dataset, wav_list=inputs / "wavs.txt",
                                      segments=inputs / "audio-segments.yaml", segment_entries=entries)
    return spec, dataset


def log_tail(path: Path) -> str:
    if not path.is_file():
        return ""
    with open(path, "rb") as log:
        log.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
        return log.read().decode(errors="replace")


def run_shard(job: ShardJob, board, *contents: bytes) -> dict:
    """One shard on a worker: its inputs into a scratch folder, the run's harness command on them (as runs.execute
    starts it, with OMP_NUM_THREADS at the task's CPUs), progress to the board; returns the harness's exit code and
    every file it wrote. ShardKilled when a signal killed the harness (Ray retries it)."""
    import ray

    node = {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            "host": socket.gethostname(), "pid": os.getpid()}
    try:
        attempt = ray.get(board.started.remote(job.key, node), timeout=60)
    except Exception:  # the board is progress only: a shard runs without it
        attempt = None
    root = Path(runs.__file__).resolve().parents[1]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="simulagents-shard-") as scratch:
        spec, dataset = local_inputs(job, Path(scratch), contents)
        run_dir = Path(scratch) / "run"
        run_dir.mkdir()
        arguments = runs.command(spec, dataset, run_dir)
        (run_dir / "command.txt").write_text(" ".join(arguments) + "\n")
        env = {**os.environ, "OMP_NUM_THREADS": str(job.num_cpus)}
        (run_dir / ENVIRONMENT_FILE).write_text(json.dumps(
            {**environment(root, job.inputs_sha1), "omp_num_threads": env["OMP_NUM_THREADS"],
             "ray": {**node, "attempt": attempt}}, indent=2))
        with open(run_dir / "harness.log", "w") as log:
            process = subprocess.Popen([sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *arguments],
                                       stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        while True:
            try:
                process.wait(timeout=TICK_SECONDS)
                break
            except subprocess.TimeoutExpired:
                board.tick.remote(job.key, runs.progress_fraction(spec, dataset, run_dir),
                                  log_tail(run_dir / "harness.log"))
        if process.returncode < 0:
            raise ShardKilled(f"{job.key}: its harness was killed by signal {-process.returncode} on {node['host']} "
                              f"({node['ip']}); its log ended: {log_tail(run_dir / 'harness.log')[-500:]}")
        files = {str(path.relative_to(run_dir)): path.read_bytes()
                 for path in sorted(run_dir.rglob("*")) if path.is_file()}
    return {"returncode": process.returncode, "files": files, "node": node, "attempt": attempt,
            "seconds": time.monotonic() - started}


# -- the driver -----------------------------------------------------------------------------------------------------

def write_files(directory: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def merge_speech_shards(run: RunState, dataset: EvalSet) -> None:
    """The talks' metrics logs as one run's: each talk's records under its index in the wav list and its own path
    (as simulstream's runner numbers and names the streams of one list), in the list's order; the effective config,
    event log, harness logs and commands beside it, the environment of the first talk with every shard's node."""
    paths = {path.stem: path for path in wav_list_paths(dataset.wav_list)}
    order = list(paths)
    lines, events, harness, commands = [], [], [], []
    for shard in sorted(run.shards, key=lambda s: order.index(s.name)):
        talk_id = order.index(shard.name)
        for line in (shard.directory / METRICS_LOG).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if "id" in record:
                record["id"] = talk_id
            if "metadata" in record:
                record["metadata"] = {**record["metadata"], "wav_name": str(paths[shard.name])}
            lines.append(json.dumps(record) + "\n")
        if (shard.directory / runs.EVENT_LOG).is_file():
            events.append((shard.directory / runs.EVENT_LOG).read_text(encoding="utf-8"))
        harness.append(f"== {SHARDS}/{shard.name} on {shard.node.get('host')} ({shard.node.get('ip')}), attempt "
                       f"{shard.attempts} ==\n" + (shard.directory / "harness.log").read_text(errors="replace"))
        commands.append((shard.directory / "command.txt").read_text())
    (run.run_dir / METRICS_LOG).write_text("".join(lines), encoding="utf-8")
    config = yaml.safe_load((run.shards[0].directory / f"{METRICS_LOG}.config.yaml").read_text())
    if "event_log" in config:
        config["event_log"] = str(run.run_dir / runs.EVENT_LOG)
    (run.run_dir / f"{METRICS_LOG}.config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    if events:
        (run.run_dir / runs.EVENT_LOG).write_text("".join(events), encoding="utf-8")
    (run.run_dir / "harness.log").write_text("\n".join(harness))
    (run.run_dir / "command.txt").write_text("".join(commands))


def record_run(run: RunState) -> None:
    """The run's environment.json: its first shard's (code, CPU, packages, inputs) with where each shard ran (the
    node of each attempt)."""
    first = json.loads((run.shards[0].directory / ENVIRONMENT_FILE).read_text())
    first["ray"] = {"shards": {s.name: {**s.node, "attempts": s.attempts, "nodes": s.nodes} for s in run.shards}}
    (run.run_dir / ENVIRONMENT_FILE).write_text(json.dumps(first, indent=2))


def retry_notes(run_dir: Path) -> tuple[str, ...]:
    """Report notes for a run whose shards Ray ran more than once (read from its environment.json)."""
    path = run_dir / ENVIRONMENT_FILE
    shards = json.loads(path.read_text()).get("ray", {}).get("shards", {}) if path.is_file() else {}
    return tuple(f"{run_dir.name}: the cluster ran shard {name} {entry['attempts']} times (its worker or harness "
                 "was killed; Ray ran it again, and the report uses the last run)"
                 for name, entry in shards.items() if (entry.get("attempts") or 0) > 1)


def describe(ray) -> str:
    nodes = [node for node in ray.nodes() if node.get("Alive")]
    cpus = sum(node["Resources"].get("CPU", 0) for node in nodes)
    gpus = sum(node["Resources"].get("GPU", 0) for node in nodes)
    return f"{len(nodes)} node(s), {cpus:g} CPU(s), {gpus:g} GPU(s)"


def execute(specs: Sequence[runs.RunSpec], dataset: EvalSet, out: Path, address: str = "",
            report: Callable[[str], None] = print, retries: int = DEFAULT_RETRIES,
            stall_seconds: float = DEFAULT_STALL_SECONDS, poll_seconds: float = 1.0) -> ClusterOutcome:
    """Run every spec on the Ray cluster at `address` (see `connect`), printing progress as runs.execute does.

    A shard whose worker dies is run again up to `retries` times; a shard whose harness fails, that keeps dying, or
    that shows no progress for `stall_seconds` fails its run (the other runs go on); Ctrl-C cancels every task."""
    ray = import_ray()
    if retries < 0:
        raise ValueError(f"--ray-retries must be >= 0, got {retries}")
    connected = connect(ray, address)
    try:
        return _execute(ray, specs, dataset, out, report, retries, stall_seconds, poll_seconds)
    finally:
        if connected:
            ray.shutdown()


def submit(ray, specs: Sequence[runs.RunSpec], dataset: EvalSet, out: Path, board, resources: dict,
           retries: int, states: list[RunState]) -> None:
    """Every run's directory and run.json (as runs.execute writes them) and its shards submitted as tasks (with
    `resources` by run slug) into `states`, each talk file put in the object store once for every run that streams
    it."""
    remote_shard = ray.remote(run_shard)
    inputs_sha1 = dataset.inputs_sha1()
    stored: dict[Path, object] = {}
    for spec in specs:
        run_dir = spec.directory(out)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "run.json").write_text(json.dumps(spec.to_json(), indent=2))
        run = RunState(spec, run_dir, submitted=time.monotonic())
        states.append(run)  # before its shards: Ctrl-C between two of them cancels the first
        config = run_config(spec)
        sharded = spec.kind == runs.SPEECH
        for name, talks in shard_inputs(spec, dataset):
            talk_objects = [stored.setdefault(path, ray.put(path.read_bytes())) for path in talks]
            job = ShardJob(f"{spec.slug}/{name}", spec, dataset, tuple(path.name for path in talks),
                           config.read_text() if config else None, inputs_sha1, resources[spec.slug]["num_cpus"])
            submitted = remote_shard.options(**resources[spec.slug], max_retries=retries,
                                             retry_exceptions=[ShardKilled], name=job.key).remote(job, board,
                                                                                                 *talk_objects)
            run.shards.append(Shard(job.key, name, run, run_dir / SHARDS / name if sharded else run_dir,
                                    talk_seconds(dataset, name) if sharded else 1.0, submitted))


def board_snapshot(ray, board) -> tuple[float, dict]:
    """(the board's clock, its entries); (0, {}) when it does not answer in time (progress is not worth a hang)."""
    try:
        return ray.get(board.snapshot.remote(), timeout=30)
    except Exception:
        return 0.0, {}


def short(error: Exception) -> str:
    lines = [line for line in str(error).strip().splitlines() if line.strip()]
    return (lines[-1] if lines else type(error).__name__)[:400]


def collect(ray, shard: Shard, board) -> None:
    """A finished task's outputs into the shard's directory; `error` set when it failed (its harness's exit, or
    Ray's reason with the last of its harness log the board saw)."""
    try:
        result = ray.get(shard.task, timeout=60)
    except Exception as error:  # RayTaskError (ShardKilled after its retries), WorkerCrashedError, lost node...
        _, entries = board_snapshot(ray, board)
        shard.attempts = entries.get(shard.key, {}).get("attempts", shard.attempts)
        shard.error = f"{short(error)} (ran {shard.attempts} time(s))"
        try:
            last_log = ray.get(board.last_log.remote(shard.key), timeout=30)
        except Exception:
            last_log = ""
        shard.directory.mkdir(parents=True, exist_ok=True)
        (shard.directory / "harness.log").write_text(f"{last_log}\n== Ray: {error}\n")
        return
    shard.result, shard.node = result, result["node"]
    shard.attempts = result["attempt"] or max(shard.attempts, 1)
    write_files(shard.directory, result["files"])
    if result["returncode"] != 0:
        shard.error = f"exit {result['returncode']}"


def cancel(ray, shard: Shard, reason: str) -> None:
    """Cancel a shard's task (its worker is killed, and with it the harness) and fail it with `reason`."""
    ray.cancel(shard.task, force=True)
    shard.error = reason
    shard.directory.mkdir(parents=True, exist_ok=True)
    (shard.directory / "harness.log").write_text(f"== cancelled by simulagents: {reason}\n")


def run_fraction(run: RunState) -> float:
    total = sum(s.weight for s in run.shards)
    return sum(s.weight * (1.0 if s.result is not None else s.fraction) for s in run.shards) / max(total, 1e-9)


def conclude(run: RunState, dataset: EvalSet, finished: list, failed: list, report) -> None:
    """A run whose shards are all done: merged and recorded (finished), or failed with where its log is."""
    elapsed = time.monotonic() - (run.started or run.submitted)
    errors = [s for s in run.shards if s.error is not None]
    if errors:  # the shard that failed the run, not one cancelled for it
        shard = next((s for s in errors if s.error != SIBLING_FAILED), errors[0])
        log = shard.directory / "harness.log"
        tail = log.read_text(errors="replace").strip().splitlines()[-3:] if log.is_file() else []
        report(f"FAILED {run.spec.slug} ({shard.name}: {shard.error}): " + " | ".join(tail))
        failed.append(f"{run.spec.slug} (see {log})")
        return
    if run.spec.kind == runs.SPEECH:
        merge_speech_shards(run, dataset)
    record_run(run)
    finished.append((run.spec, run.run_dir))
    report(f"finished {run.spec.slug} in {elapsed:.0f} s ({len(run.shards)} task(s))")


def watch(ray, states: list[RunState], board, dataset: EvalSet, report, stall_seconds: float,
          poll_seconds: float) -> ClusterOutcome:
    """Wait for the tasks (never longer than `poll_seconds` at a time), following the board: start and retry lines,
    progress every REPORT_SECONDS, stalled shards cancelled; each run concluded once its shards are done."""
    finished, failed = [], []
    pending = {s.task: s for run in states for s in run.shards}
    concluded: set[int] = set()
    last_report = last_activity = time.monotonic()
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=poll_seconds)
        for task in ready:
            collect(ray, pending.pop(task), board)
            last_activity = time.monotonic()
        clock, entries = board_snapshot(ray, board)
        for shard in list(pending.values()):
            entry = entries.get(shard.key)
            if entry is None:
                continue
            shard.nodes = entry["nodes"]
            if entry["attempts"] != shard.attempts:
                shard.attempts, shard.node, last_activity = entry["attempts"], entry["node"], time.monotonic()
                again = f", attempt {shard.attempts}" if shard.attempts > 1 else ""
                report(f"started {shard.key} ({shard.run.spec.kind}) on {shard.node['host']} "
                       f"({shard.node['ip']}{again})")
                shard.run.started = shard.run.started or time.monotonic()
            if entry["fraction"] != shard.fraction:
                shard.fraction, last_activity = entry["fraction"], time.monotonic()
            if clock - entry["changed"] > stall_seconds:
                cancel(ray, pending.pop(shard.task), f"no progress for {stall_seconds:.0f} s")
        if pending and time.monotonic() - last_activity > stall_seconds:
            for shard in list(pending.values()):
                cancel(ray, pending.pop(shard.task), f"nothing started, progressed or finished on the cluster "
                                                     f"for {stall_seconds:.0f} s")
        for run in states:
            if id(run) in concluded:
                continue
            if any(s.error is not None for s in run.shards):  # the run has failed: its other shards stop
                for shard in run.shards:
                    if shard.task in pending:
                        cancel(ray, pending.pop(shard.task), SIBLING_FAILED)
            if run.done:
                concluded.add(id(run))
                _, entries = board_snapshot(ray, board)  # the attempts of shards that started and ended between polls
                for shard in run.shards:
                    shard.nodes = entries.get(shard.key, {}).get("nodes", shard.nodes)
                conclude(run, dataset, finished, failed, report)
        running = [run for run in states if id(run) not in concluded and run.started is not None]
        if running and time.monotonic() - last_report >= REPORT_SECONDS:
            last_report = time.monotonic()
            report("  " + "; ".join(f"{run.spec.slug} {100 * run_fraction(run):.0f}% "
                                    f"({time.monotonic() - run.started:.0f} s)" for run in running))
    return ClusterOutcome(finished, failed)


def _execute(ray, specs, dataset, out, report, retries, stall_seconds, poll_seconds) -> ClusterOutcome:
    resources = {spec.slug: task_resources(spec) for spec in specs}
    check_feasible(ray, specs, resources)
    report(f"Ray cluster: {describe(ray)}; " + ", ".join(
        f"{spec.slug}: {len(shard_inputs(spec, dataset))} task(s) of {resources[spec.slug]['num_cpus']} CPU(s)"
        + (f" and {resources[spec.slug]['num_gpus']} GPU" if resources[spec.slug]["num_gpus"] else "")
        for spec in specs))
    board = ray.remote(num_cpus=0)(ShardBoard).remote()
    states: list[RunState] = []
    try:
        submit(ray, specs, dataset, out, board, resources, retries, states)
        return watch(ray, states, board, dataset, report, stall_seconds, poll_seconds)
    except KeyboardInterrupt:
        unfinished = [s for run in states for s in run.shards if s.result is None and s.error is None]
        for shard in unfinished:
            ray.cancel(shard.task, force=True)
        report(f"interrupted: cancelled {len(unfinished)} task(s) on the cluster")
        raise
