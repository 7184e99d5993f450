"""The HTTP server's sessions, driven by simulstream's own `HttpProxySpeechProcessor` on loopback, over a fake
translator (no model: one word "w1", "w2", ... per chunk, so each session's state is visible in its words): two
sessions at once get their own processors, a session beyond the pool is refused, a cleared or idle (TTL) session
gives its processor back clean, and a failing model step answers 500 to its session while the others carry on."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("simulstream")

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
CHUNK = np.zeros(16_000, dtype=np.float32)  # one full 1 s chunk


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fake_server(tmp_path):
    """Start `simulstream --agent fake_agents:FakeSlowSpeechProcessor --serve-http` with extra flags; stop it."""
    servers = []

    def start(*flags: str) -> int:
        port = free_port()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(TESTS)])}
        server = subprocess.Popen(
            [sys.executable, "-m", "agents.simulstream_cli", "--agent", "fake_agents:FakeSlowSpeechProcessor",
             "--set", "speech_chunk_size=1.0", "--serve-http", "--host", "127.0.0.1", "--port", str(port),
             "--metrics-log", str(tmp_path / f"{port}.jsonl"), *flags],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        servers.append(server)
        deadline = time.time() + 60
        while True:
            assert server.poll() is None, server.stdout.read()
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return port
            assert time.time() < deadline, "the HTTP server did not start"
            time.sleep(0.2)

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=30)


def proxy(port: int):
    from simulstream.server.speech_processors.remote.http_proxy_speech_processor import HttpProxySpeechProcessor

    return HttpProxySpeechProcessor(SimpleNamespace(hostname="127.0.0.1", port=port))


def words(session) -> list[str]:
    return session.process_chunk(CHUNK).new_tokens


def refused(call) -> tuple[int, str]:
    with pytest.raises(urllib.error.HTTPError) as error:
        call()
    return error.value.code, error.value.read().decode()


def test_two_sessions_get_their_own_processors_and_a_third_is_refused_until_one_clears(fake_server):
    port = fake_server("--pool-size", "2")
    first, second, third = proxy(port), proxy(port), proxy(port)
    assert words(first) == ["w1"] and words(second) == ["w1"] and words(first) == [" w2"]  # no shared state
    code, body = refused(lambda: words(third))
    assert code == 503 and "all 2 speech processor(s) are busy" in body
    first.clear()
    assert words(third) == ["w1"]  # first's processor, cleared before it was handed on
    assert words(second) == [" w2"]


def test_an_idle_session_is_cleared_after_the_ttl(fake_server):
    port = fake_server("--pool-size", "1", "--session-ttl", "1")
    idle, waiting = proxy(port), proxy(port)
    assert words(idle) == ["w1"]
    assert refused(lambda: words(waiting))[0] == 503
    time.sleep(3.5)  # the cleanup loop runs every TTL seconds and closes sessions idle for longer
    assert words(waiting) == ["w1"]


def test_a_failing_model_step_answers_its_session_and_the_others_carry_on(fake_server):
    port = fake_server("--pool-size", "2", "--set", "fail_above=0.5")
    failing, healthy = proxy(port), proxy(port)
    assert words(failing) == ["w1"] and words(healthy) == ["w1"]
    code, body = refused(lambda: failing.process_chunk(np.ones(16_000, dtype=np.float32)))
    assert code == 500 and "RuntimeError: fake model step failure on a chunk above 0.5" in body
    assert words(healthy) == [" w2"] and words(healthy) == [" w3"]  # as if nothing had happened elsewhere
    failing.clear()
    assert words(failing) == ["w1"]  # its processor, cleared, serves again


def post(port: int, route: str, body: bytes):
    import urllib.request

    request = urllib.request.Request(f"http://127.0.0.1:{port}/{route}", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(request, timeout=10)


def test_malformed_requests_are_answered_with_what_is_wrong(fake_server):
    import base64
    import json

    port = fake_server("--pool-size", "1")
    code, body = refused(lambda: post(port, "process_chunk", b"{not json"))
    assert code == 400 and "is not JSON" in body
    odd_bytes = base64.b64encode(b"\x00\x01\x02").decode()  # not a whole float32 sample
    code, body = refused(lambda: post(port, "process_chunk", json.dumps({"session_id": "s",
                                                                         "waveform": odd_bytes}).encode()))
    assert code == 400 and "buffer size must be a multiple of element size" in body
    code, body = refused(lambda: post(port, "process_chunk", json.dumps({"session_id": "s"}).encode()))
    assert code == 400 and "waveform" in body
    code, body = refused(lambda: post(port, "translate", b"{}"))
    assert code == 404 and "no route POST /translate" in body
    post(port, "clear", json.dumps({"session_id": "s"}).encode())
    assert words(proxy(port)) == ["w1"]  # the server still serves
