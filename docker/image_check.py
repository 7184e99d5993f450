"""`make image-check`: build the submission images and drive the CPU one as the IWSLT organizers do, with
simulstream's own `simulstream_inference` + `HttpProxySpeechProcessor` from the host, languages given as names.

What it asserts (each failure stops the check with what went wrong):
- the CPU image: no torch and no CUDA library inside, a non-root user, a HEALTHCHECK, weights already prepared;
- en→de and en→it on a synthetic MCIF talk (the first evaluation talk, 4.9 min of espeak-ng speech): the final
  text through the container equals the same image's in-process run (simulstream's runner inside a throwaway
  container of the image); scored with OmniSTEval (LongYAAL CU/CA) and simulstream's RTF on the harness's own log;
- the same container, a pool of two: two clients at once each get the text of their single run; a client killed
  mid-talk leaves the server serving; a talk with 60 s of silence inside is translated after the silence; a
  malformed request is answered 400 and logged, and the server serves on;
- the GPU image builds with tiny random checkpoints laid out as the real ones, and its server answers a chunk on
  the CPU (`--set asr_device=cpu --set model_device=cpu`).
Then it stops the containers and removes what it built (`--keep` keeps the images).

    python docker/image_check.py                  # podman where installed, else docker
    python docker/image_check.py --skip-gpu --keep
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks"), str(REPO / "tests")]

from evaluation.data import mcif_speech_set  # noqa: E402
from evaluation.scoring import score_speech  # noqa: E402
from backends.cpu import cpu_info  # noqa: E402
from common.audio import decode_audio_16k  # noqa: E402

CPU_IMAGE, GPU_IMAGE = "localhost/simulagents-cpu:image-check", "localhost/simulagents-gpu:image-check"
BASE_IMAGE = "python:3.11-slim-bookworm"
DIRECTIONS = (("German", "de"), ("Italian", "it"))
SAMPLE_RATE = 16_000
PROBE_CHUNK_SECONDS = 2.0


class CheckFailed(AssertionError):
    """A check of the deliverable that did not hold, with what was seen."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


@dataclass
class Engine:
    """podman or docker, with the flags this machine needs (no registry: never pull an image that is here)."""

    name: str
    figures: dict = field(default_factory=dict)

    @classmethod
    def find(cls, preferred: str | None) -> "Engine":
        for name in ([preferred] if preferred else ["podman", "docker"]):
            if shutil.which(name):
                return cls(name)
        raise SystemExit("image-check: neither podman nor docker is installed (on these machines: "
                         "../shared/tools/oci-local-base, then export CONTAINERS_CONF as it prints)")

    def __call__(self, *args: str, check: bool = True, capture: bool = True, timeout: float | None = None,
                 ) -> subprocess.CompletedProcess:
        result = subprocess.run([self.name, *args], capture_output=capture, text=True, timeout=timeout)
        if check and result.returncode != 0:
            tail = (result.stderr or "")[-3000:] if capture else ""
            raise CheckFailed(f"{self.name} {' '.join(args[:3])} ... failed (exit {result.returncode}): {tail}")
        return result

    def has_image(self, image: str) -> bool:
        return self("image", "inspect", image, check=False).returncode == 0

    def build(self, dockerfile: str, tag: str, log: Path, *build_args: str) -> float:
        """Build `tag`; the seconds it took. The output goes to `log`."""
        flags = ["--network", "host"]
        if self.name == "podman":
            flags += ["--format", "docker"]  # OCI images drop HEALTHCHECK
            if self.has_image(BASE_IMAGE):
                flags += ["--pull=never"]
        elif not (REPO / ".dockerignore").is_file():
            raise CheckFailed("the repository's .dockerignore is missing: the old docker builder would send venvs")
        started = time.monotonic()
        with open(log, "w") as out:
            result = subprocess.run([self.name, "build", *flags, *build_args, "-f", dockerfile, "-t", tag, str(REPO)],
                                    stdout=out, stderr=subprocess.STDOUT, text=True)
        check(result.returncode == 0, f"building {tag} from {dockerfile} failed: see {log}")
        return time.monotonic() - started

    def run_detached(self, name: str, image: str, *command: str) -> None:
        self("rm", "-f", name, check=False)
        self("run", "-d", "--name", name, "--network", "host", image, *command)

    def remove_container(self, name: str) -> None:
        self("rm", "-f", "-t", "0", name, check=False) if self.name == "podman" else self("rm", "-f", name,
                                                                                           check=False)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def health(port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def wait_ready(port: int, started: float, limit: float, engine: Engine, container: str) -> float:
    """Seconds from `started` until GET /health answers; CheckFailed with the container's log after `limit`."""
    outcome = f"did not answer GET /health within {limit:.0f} s"
    while time.monotonic() - started < limit:
        if health(port) is not None:
            return time.monotonic() - started
        if engine("inspect", "--format", "{{.State.Running}}", container, check=False).stdout.strip() == "false":
            outcome = f"exited after {time.monotonic() - started:.0f} s without answering GET /health"
            break
        time.sleep(0.2)
    logs = engine("logs", container, check=False)
    raise CheckFailed(f"{container} {outcome}:\n{(logs.stdout + logs.stderr)[-3000:]}")


def server_command(port: int, pool_size: int, *extra: str) -> list[str]:
    return ["simulstream", "--agent", "agents.alignatt4llm:Agent", *extra, "--serve-http", "--pool-size",
            str(pool_size), "--host", "127.0.0.1", "--port", str(port), "--metrics-log", "/tmp/simulagents/server.jsonl"]


def proxy_config(port: int, folder: Path) -> Path:
    """docker/http_proxy.yaml (the organizers' side) pointed at `port`."""
    config = yaml.safe_load((REPO / "docker" / "http_proxy.yaml").read_text()) | {"port": port}
    path = folder / f"http_proxy_{port}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def first_answer_seconds(port: int, wav: Path) -> float:
    """One session through simulstream's own HttpProxySpeechProcessor: languages as names, one chunk of the talk
    (float32, as its client sends), cleared after. Seconds the chunk took to be answered."""
    from types import SimpleNamespace

    from simulstream.server.speech_processors.remote.http_proxy_speech_processor import HttpProxySpeechProcessor

    samples = decode_audio_16k(wav)[: int(PROBE_CHUNK_SECONDS * SAMPLE_RATE)].astype(np.float32)
    processor = HttpProxySpeechProcessor(SimpleNamespace(hostname="127.0.0.1", port=port))
    processor.set_target_language("German")
    processor.set_source_language("English")
    started = time.monotonic()
    processor.process_chunk(samples)
    elapsed = time.monotonic() - started
    processor.clear()
    return elapsed


def inference_command(proxy: Path, wav_list: Path, target: str, log: Path) -> list[str]:
    """simulstream's own client, as the organizers run it."""
    return [str(Path(sys.executable).parent / "simulstream_inference"), "--speech-processor-config", str(proxy),
            "--wav-list-file", str(wav_list), "--src-lang", "English", "--tgt-lang", target,
            "--metrics-log-file", str(log)]


def run_client(proxy: Path, wav_list: Path, target: str, run_dir: Path) -> subprocess.Popen:
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(proxy, run_dir / "metrics.jsonl.config.yaml")  # what the scorers rebuild the text with
    harness_log = open(run_dir / "harness.log", "w")
    return subprocess.Popen(inference_command(proxy, wav_list, target, run_dir / "metrics.jsonl"),
                            stdout=harness_log, stderr=subprocess.STDOUT, text=True)


def finish(client: subprocess.Popen, run_dir: Path, limit: float = 3600) -> None:
    code = client.wait(timeout=limit)
    check(code == 0, f"simulstream_inference exited {code}: see {run_dir / 'harness.log'}")


def final_texts(log: Path, latency_unit: str = "word") -> dict[str, str]:
    """Each talk's final text, as simulstream's LogReader rebuilds it from a metrics log and its config."""
    from simulstream.config import yaml_config
    from simulstream.metrics.readers import LogReader

    return LogReader(yaml_config(str(log) + ".config.yaml"), str(log), latency_unit=latency_unit).final_outputs()


def in_process_texts(engine: Engine, talk_dir: Path, out: Path, log: Path) -> dict[str, dict[str, str]]:
    """The same image's in-process run (simulstream's runner, `simulstream --wav-list`) of both directions, in a
    throwaway container given the runner's own imports (websockets, librosa: the server needs neither), as root so
    they install into that container only. Final texts by target code."""
    versions = {name: metadata.version(name) for name in ("websockets", "librosa")}
    commands = [f"pip install -q {' '.join(f'{n}=={v}' for n, v in versions.items())}"]
    for target, code in DIRECTIONS:
        commands.append(f"simulstream --agent agents.alignatt4llm:Agent --wav-list /talk/wavs.txt --src-lang English "
                        f"--tgt-lang {target} --metrics-log /out/in-process-{code}/metrics.jsonl")
    with open(log, "w") as output:
        result = subprocess.run([engine.name, "run", "--rm", "--network", "host", "--user", "0",
                                 "-v", f"{talk_dir}:/talk:ro", "-v", f"{out}:/out", CPU_IMAGE,
                                 "sh", "-c", " && ".join(commands)], stdout=output, stderr=subprocess.STDOUT)
    check(result.returncode == 0, f"the in-process run inside the image failed: see {log}")
    return {code: final_texts(out / f"in-process-{code}" / "metrics.jsonl") for _, code in DIRECTIONS}


def inspect_cpu_image(engine: Engine) -> dict:
    """Size, where the bytes go, and the properties a shipped image must have."""
    size = int(engine("image", "inspect", "--format", "{{.Size}}", CPU_IMAGE).stdout.strip())
    inspected = json.loads(engine("image", "inspect", CPU_IMAGE).stdout)[0]
    config = inspected.get("Config") or {}
    # docker keeps the HEALTHCHECK in Config, podman beside it
    healthcheck = config.get("Healthcheck") or inspected.get("Healthcheck") or {}
    check(bool(healthcheck.get("Test")), f"{CPU_IMAGE} has no HEALTHCHECK: {config}")
    check(str(config.get("User", "")) not in ("", "0", "root"), f"{CPU_IMAGE} runs as root (User={config.get('User')!r})")
    probe = engine("run", "--rm", "--network", "host", CPU_IMAGE, "sh", "-c",
                   "id -u; python -c 'import importlib.util as u; print(u.find_spec(\"torch\") is None)'; "
                   "pip list --format freeze | grep -i -E '^(torch|nvidia|triton)' ; "
                   "find / -xdev \\( -name 'libcudart*' -o -name 'libcublas*' -o -name 'libcudnn*' \\) 2>/dev/null; "
                   "echo ---; du -sm /opt/venv /opt/simulagents-cache /usr/lib /usr/share /app 2>/dev/null; echo ---; "
                   "du -sm /opt/venv/lib/python3*/site-packages/* | sort -rn | head -8; echo ---; "
                   "ls -la /opt/simulagents-cache/*")
    uid, no_torch, *rest = probe.stdout.splitlines()
    cuda_lines = rest[: rest.index("---")]
    check(uid != "0", f"the container's user is root (uid {uid})")
    check(no_torch == "True" and not cuda_lines, f"torch or CUDA libraries inside {CPU_IMAGE}: {cuda_lines}")
    sections = "\n".join(rest).split("---")
    return {"image size (MB)": round(size / 1e6), "uid": uid, "where the bytes go (MB)": sections[1].strip(),
            "largest packages (MB)": sections[2].strip(), "cache": sections[3].strip()}


def silence_talk(wav: Path, out: Path, at: float = 60.0, seconds: float = 60.0) -> Path:
    """The talk's first two minutes with `seconds` of silence inserted `at` seconds in; its wav list."""
    import soundfile

    audio = decode_audio_16k(wav)[: int(120 * SAMPLE_RATE)]
    cut = int(at * SAMPLE_RATE)
    padded = np.concatenate([audio[:cut], np.zeros(int(seconds * SAMPLE_RATE), np.float32), audio[cut:]])
    out.mkdir(parents=True, exist_ok=True)
    soundfile.write(out / "silence.wav", padded, SAMPLE_RATE, subtype="PCM_16")
    (out / "wavs.txt").write_text("silence.wav\n")
    return out / "wavs.txt"


def post_raw(port: int, route: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/{route}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def quality_and_latency(run_dir: Path, dataset) -> dict:
    scores = score_speech(run_dir, dataset)
    keep = {name: round(value, 2) for name, value in scores.items()
            if name in ("BLEU", "chrF", "RTF") or "LongYAAL" in name}
    return keep


def cpu_check(engine: Engine, out: Path, figures: dict) -> None:
    figures["cpu build (s)"] = round(engine.build("docker/Dockerfile.cpu", CPU_IMAGE, out / "build-cpu.log"))
    figures["cpu image"] = inspect_cpu_image(engine)
    sets = {code: mcif_speech_set(code, "evaluation", REPO / "runs" / "test-sets", max_talks=1,
                                  announce=print) for _, code in DIRECTIONS}
    wav_list = sets["de"].wav_list
    talk_dir = wav_list.parent
    wav = talk_dir / wav_list.read_text().split()[0]
    figures["talk"] = f"{wav.name}: {sets['de'].audio_seconds / 60:.1f} min, {len(sets['de'].references)} lines"
    check(sets["de"].audio_seconds >= 180, f"the test talk is {sets['de'].audio_seconds:.0f} s; 3 minutes needed")

    port = free_port()
    proxy = proxy_config(port, out)
    container = "simulagents-image-check"
    started = time.monotonic()
    engine.run_detached(container, CPU_IMAGE, *server_command(port, 2))
    try:
        figures["start to ready (s)"] = round(wait_ready(port, started, 180, engine, container), 1)
        figures["first chunk answered (s)"] = round(first_answer_seconds(port, wav), 2)
        figures["start to first answer (s)"] = round(time.monotonic() - started, 1)

        # 1. each direction alone, then the in-process reference of the same image
        single = {}
        for target, code in DIRECTIONS:
            run_dir = out / f"http-{code}"
            finish(run_client(proxy, wav_list, target, run_dir), run_dir)
            single[code] = final_texts(run_dir / "metrics.jsonl")
            figures[f"en-{code} through the container"] = quality_and_latency(run_dir, sets[code])
        reference = in_process_texts(engine, talk_dir, out, out / "in-process.log")
        for _, code in DIRECTIONS:
            check(single[code] == reference[code], f"en-{code}: the container's final text differs from the "
                  f"in-process run:\n  http:       {single[code]}\n  in-process: {reference[code]}")
            check(all(len(text.split()) > 100 for text in single[code].values()),
                  f"en-{code}: the final text is too short to be a translation of the talk: {single[code]}")
        figures["final text = in-process"] = "en-de, en-it: equal"

        # 2. two clients at once on the pool of two
        clients = {code: run_client(proxy, wav_list, target, out / f"concurrent-{code}") for target, code in DIRECTIONS}
        for code, client in clients.items():
            finish(client, out / f"concurrent-{code}")
            concurrent = final_texts(out / f"concurrent-{code}" / "metrics.jsonl")
            check(concurrent == single[code], f"en-{code} beside another stream differs from its single run")
        figures["two clients at once = single runs"] = "yes"

        # 3. a client killed mid-talk: its session stays until the TTL, the other processor serves
        leaving = run_client(proxy, wav_list, "German", out / "disconnect")
        time.sleep(40)
        leaving.send_signal(signal.SIGKILL)
        leaving.wait()
        time.sleep(3)
        state = health(port)
        check(state is not None and state["free"] == 1, f"after a client left mid-talk: /health says {state}")

        # 4. 60 s of silence inside a talk, on the processor left
        silence = silence_talk(wav, out / "silence-talk")
        finish(run_client(proxy, silence, "German", out / "silence"), out / "silence")
        text = "".join(final_texts(out / "silence" / "metrics.jsonl").values())
        records = [json.loads(line) for line in (out / "silence" / "metrics.jsonl").read_text().splitlines()]
        after = [r for r in records if r.get("generated_tokens") and r.get("total_audio_processed", 0) > 125]
        check(len(text.split()) > 20 and after, f"the talk with 60 s of silence: {len(text.split())} words, "
              f"{len(after)} chunks after the silence emitted: {text[:300]}")
        figures["60 s of silence"] = f"{len(text.split())} words; {len(after)} chunks emitted after the silence"

        # 5. a malformed request: answered, logged, and the server serves on
        status, body = post_raw(port, "process_chunk", b"{not json")
        check(status == 400 and "not JSON" in body.get("error", ""), f"malformed JSON: {status} {body}")
        int16_pcm = (np.arange(9, dtype="<i2") * 1000).tobytes()  # 18 bytes: not whole float32 samples
        status, body = post_raw(port, "process_chunk", json.dumps(
            {"session_id": "malformed", "waveform": base64.b64encode(int16_pcm).decode()}).encode())
        check(status == 400 and "float32" in body.get("error", ""), f"int16 bytes as a chunk: {status} {body}")
        logs = engine("logs", container, check=False)
        check("is not JSON" in logs.stdout + logs.stderr, "the malformed request was not logged by the server")
        check(health(port) is not None, "the server stopped answering after the malformed requests")
        figures["faults"] = "client killed mid-talk: served on; malformed JSON and int16 chunk: 400, logged"
    finally:
        logs = engine("logs", container, check=False)
        (out / "server.log").write_text((logs.stdout or "") + (logs.stderr or ""))
        engine.remove_container(container)


def gpu_check(engine: Engine, out: Path, figures: dict) -> None:
    """Dockerfile.gpu with the tiny paper-shaped checkpoints as MODELS; its server answers a chunk on the CPU."""
    from gpu_check import build_checkpoints  # benchmarks/gpu_check.py: the real structures, tiny widths

    models = REPO / ".image-check" / "models"
    shutil.rmtree(models, ignore_errors=True)
    build_checkpoints(models, narrow=True, device="cpu")
    try:
        figures["gpu build (s)"] = round(engine.build("docker/Dockerfile.gpu", GPU_IMAGE, out / "build-gpu.log",
                                                      "--build-arg", f"MODELS={models.relative_to(REPO)}"))
    finally:
        shutil.rmtree(REPO / ".image-check", ignore_errors=True)
    size = int(engine("image", "inspect", "--format", "{{.Size}}", GPU_IMAGE).stdout.strip())
    figures["gpu image size (MB)"] = round(size / 1e6)
    port, container = free_port(), "simulagents-image-check-gpu"
    started = time.monotonic()
    engine.run_detached(container, GPU_IMAGE, *server_command(
        port, 1, "--config", "eval_configs/alignatt4llm_low.yaml", "--set", "asr_device=cpu", "--set",
        "model_device=cpu", "--set", "asr_dtype=float32", "--set", "model_dtype=float32"))
    try:
        wait_ready(port, started, 600, engine, container)
        talk = next((REPO / "runs" / "test-sets").glob("mcif-evaluation-1talks-*/*.wav"))
        figures["gpu image on CPU: first chunk answered (s)"] = round(first_answer_seconds(port, talk), 2)
    finally:
        logs = engine("logs", container, check=False)
        (out / "server-gpu.log").write_text((logs.stdout or "") + (logs.stderr or ""))
        engine.remove_container(container)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="image_check.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("podman", "docker"), help="default: podman where installed, else docker")
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "image-check")
    parser.add_argument("--skip-gpu", action="store_true", help="the CPU image only")
    parser.add_argument("--keep", action="store_true", help="keep the images it built")
    args = parser.parse_args(argv)
    engine = Engine.find(args.engine)
    version = engine("--version").stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    model, flags = cpu_info()
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")
    cpu = f"{model}; flags: {' '.join(flag for flag in wanted if flag in flags)}"
    figures = {"date": time.strftime("%Y-%m-%d"), "engine": version, "cpu": cpu,
               "host": f"{platform.machine()}, {os.cpu_count()} cores"}
    print(f"image-check: {version}; {figures['cpu']}", flush=True)
    failed = None
    try:
        cpu_check(engine, args.out, figures)
        if not args.skip_gpu:
            gpu_check(engine, args.out, figures)
    except CheckFailed as error:
        failed = str(error)
    finally:
        if not args.keep:
            for image in (CPU_IMAGE, GPU_IMAGE):
                engine("rmi", "-f", image, check=False)
        (args.out / "figures.json").write_text(json.dumps(figures, indent=2, ensure_ascii=False))
    for name, value in figures.items():
        print(f"{name}: {json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value}")
    if failed:
        print(f"image-check FAILED: {failed}", file=sys.stderr)
        return 1
    print(f"image-check passed; figures in {args.out / 'figures.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
