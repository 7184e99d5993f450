"""The HTTP server's sessions, driven by simulstream's own `HttpProxySpeechProcessor` on loopback, over a fake
translator (no model: one word "w1", "w2", ... per chunk, so each session's state is visible in its words): two
sessions at once get their own processors, a session beyond the pool is refused, a cleared or idle (TTL) session
gives its processor back clean, and a failing model step answers 500 to its session while the others carry on."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("simulstream")

from agent_servers import (  # noqa: E402,F401 - agent_server and fake_server are fixtures
    agent_server,
    fake_server,
    post,
    proxy,
    refused,
    words,
)


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


def test_health_says_how_many_processors_are_free_and_needs_no_body(fake_server):
    import json
    import urllib.request

    port = fake_server("--pool-size", "2")

    def health() -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as response:
            assert response.status == 200
            return json.loads(response.read())

    assert health() == {"status": "ok", "pool_size": 2, "free": 2}
    session = proxy(port)
    words(session)
    assert health()["free"] == 1  # a session holds its processor until it clears
    session.clear()
    assert health()["free"] == 2
