"""Our `simulstream --agent X` servers (websocket `--serve` or HTTP `--serve-http`) started as subprocesses on a free
loopback port for the server tests and stopped when the test ends (fixtures), and the HTTP client helpers."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
FAKE_AGENT = "fake_agents:FakeSlowSpeechProcessor"
CHUNK = np.zeros(16_000, dtype=np.float32)  # one full 1 s chunk of the fake servers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(arguments: list[str], log: Path, startup_seconds: float = 60, describe: str = "the server",
                   port: int | None = None, module: str = "agents.simulstream_cli"):
    """`python -m MODULE *arguments --host 127.0.0.1 --port P` on `port` (default: a free one; MODULE: our
    `simulstream` command, or tests/without_torch.py);
    yields P once it accepts connections and stops the server on exit. Its output goes to `log` (a pipe nobody reads would block a
    talkative server); a server that exits early fails the test with that output."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as output:
        server = subprocess.Popen([sys.executable, "-m", module, *arguments, "--host", "127.0.0.1",
                                   "--port", str(port)], cwd=REPO, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  text=True)
    try:
        deadline = time.time() + startup_seconds
        while True:
            assert server.poll() is None, log.read_text()
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.time() < deadline, f"{describe} did not start in {startup_seconds} s"
            time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
def agent_server(tmp_path):
    """start(agent, *flags, startup_seconds=60) -> port: `simulstream --agent agent --host 127.0.0.1 --port P
    --metrics-log tmp/P.jsonl *flags` (flags include --serve or --serve-http), once it accepts connections. Its output
    goes to tmp/P.server.log."""
    with contextlib.ExitStack() as servers:

        def start(agent: str, *flags: str, startup_seconds: float = 60) -> int:
            port = free_port()
            return servers.enter_context(running_server(
                ["--agent", agent, "--metrics-log", str(tmp_path / f"{port}.jsonl"), *flags],
                tmp_path / f"{port}.server.log", startup_seconds, f"the server for {agent}", port))

        yield start


@pytest.fixture
def fake_server(agent_server):
    """start(*flags) -> port: `simulstream --agent fake_agents:FakeSlowSpeechProcessor --serve-http` with 1 s chunks
    (a fake translator: one word "w1", "w2", ... per chunk)."""
    return lambda *flags: agent_server(FAKE_AGENT, "--set", "speech_chunk_size=1.0", "--serve-http", *flags)


def proxy(port: int):
    """A new session of simulstream's own HTTP client (`HttpProxySpeechProcessor`) on the server at `port`."""
    from simulstream.server.speech_processors.remote.http_proxy_speech_processor import HttpProxySpeechProcessor

    return HttpProxySpeechProcessor(SimpleNamespace(hostname="127.0.0.1", port=port))


def words(session) -> list[str]:
    return session.process_chunk(CHUNK).new_tokens


def refused(call) -> tuple[int, str]:
    """The HTTP status and body of the error `call()` gets."""
    with pytest.raises(urllib.error.HTTPError) as error:
        call()
    return error.value.code, error.value.read().decode()


def post(port: int, route: str, body: bytes, timeout: float = 10):
    """A raw POST /route with a JSON `body` (for requests simulstream's client cannot make)."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}/{route}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=timeout)
