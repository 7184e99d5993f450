"""simulstream's HTTP speech-processor server (what the IWSLT organizers' `HttpProxySpeechProcessor` talks to, inside
a participant's container) serving any of our agents, with every failure answered as a JSON error instead of a
dropped connection.

It is simulstream's own code: its `SpeechProcessorSessionManager` (a pool of processors, one per session, idle ones
cleared after the TTL) and its `HttpSpeechProcessorHandler` (one route per `SpeechProcessor` method). The handler is
subclassed only to answer what the original lets escape: a session beyond the pool (503), a bad language or chunk
(400: a waveform that is not float32 audio in [-1, 1] is refused before it reaches the model), an unknown route
(404), an exception in a processor (500) - each naming the problem; and to add `GET /health` for a container's
HEALTHCHECK.
"""
from __future__ import annotations

import base64
import binascii
import json
import logging
import queue
import time
from functools import partial
from http import HTTPStatus
from http.server import ThreadingHTTPServer
from pathlib import Path

import numpy as np
from simulstream.config import yaml_config
from simulstream.server.speech_processors.remote.http_speech_processor_server import (
    HttpSpeechProcessorHandler,
    SpeechProcessorSessionManager,
)

from common.audio import AudioError

LOGGER = logging.getLogger("agents.harness.http_server")
MAX_SAMPLE_MAGNITUDE = 2.0  # float PCM is in [-1, 1]; a little headroom for resampling overshoot


def decode_waveform(waveform) -> np.ndarray:
    """The `waveform` of POST /process_chunk (base64 of little-endian float32 samples in [-1, 1], 16 kHz) as an array,
    checked: anything else (e.g. int16 PCM bytes, whose negative samples read as NaN or huge floats) is an AudioError
    naming the problem."""
    if not isinstance(waveform, str):
        raise AudioError(f"waveform must be a base64 string of float32 samples, got {type(waveform).__name__}")
    try:
        data = base64.b64decode(waveform, validate=True)
    except binascii.Error as error:
        raise AudioError(f"waveform is not base64 ({error}); send base64 of little-endian float32 samples") from None
    if len(data) % 4:
        raise AudioError(f"waveform of {len(data)} bytes is not a whole number of float32 samples (4 bytes each; "
                         f"buffer size must be a multiple of element size): send float32, not int16 PCM")
    samples = np.frombuffer(data, dtype="<f4")
    if samples.size and not (np.all(np.isfinite(samples)) and np.abs(samples).max() <= MAX_SAMPLE_MAGNITUDE):
        raise AudioError(f"waveform samples must be float32 in [-1, 1], got values up to "
                         f"{np.nanmax(np.abs(samples)):.3g} or NaN/inf: it looks like another encoding (e.g. int16 "
                         f"PCM bytes); send base64 of little-endian float32 at 16 kHz")
    return samples.astype(np.float32)


class ErrorAnsweringHandler(HttpSpeechProcessorHandler):
    """simulstream's handler; a request it cannot serve gets a status and `{"error": message}`."""

    def do_GET(self):
        self._dispatch("get_")

    def do_POST(self):
        self._dispatch("post_")

    def do_PUT(self):
        self._dispatch("put_")

    def _dispatch(self, prefix: str) -> None:
        route = self.path.strip("/")
        handler = getattr(self, prefix + route, None)
        if handler is None:
            self._send_error(HTTPStatus.NOT_FOUND, f"no route {self.command} /{route}")
            return
        try:
            arguments = self._read_json() if int(self.headers.get("Content-Length") or 0) else {}
        except (ValueError, UnicodeDecodeError) as error:
            self._send_error(HTTPStatus.BAD_REQUEST, f"the body of {self.command} /{route} is not JSON: {error}")
            return
        try:
            handler(**arguments)
        except ConnectionError as error:  # the client went away before its answer (BrokenPipe, reset)
            LOGGER.warning("%s /%s: the client left before its answer (%s); its session stays until cleared or idle "
                           "for the TTL", self.command, route, error)
        except queue.Empty:
            size = self.speech_processor_manager.size
            self._send_error(HTTPStatus.SERVICE_UNAVAILABLE,
                             f"all {size} speech processor(s) are busy with other sessions; retry when one ends "
                             f"(clear) or is idle for the session TTL, or start the server with a larger pool_size")
        except TypeError as error:  # missing or unexpected fields
            self._send_error(HTTPStatus.BAD_REQUEST, f"{self.command} /{route}: {error}")
        except ValueError as error:  # ConfigError (language), AudioError (chunk) and the like: the client's input
            self._send_error(HTTPStatus.BAD_REQUEST, f"{self.command} /{route}: {error}")
        except Exception as error:  # noqa: BLE001 - one stream's failure is answered, the server carries on
            LOGGER.exception("%s /%s failed", self.command, route)
            self._send_error(HTTPStatus.INTERNAL_SERVER_ERROR,
                             f"{self.command} /{route} failed: {type(error).__name__}: {error}")

    def get_health(self):
        """Readiness for a container's HEALTHCHECK (not a simulstream route): the server listens only once its
        processors are loaded; the body says how many are free for a new session."""
        manager = self.speech_processor_manager
        self._send_json_response(HTTPStatus.OK, {"status": "ok", "pool_size": manager.size,
                                                 "free": manager.available.qsize()})

    def post_process_chunk(self, session_id, waveform):
        """simulstream's route, with the waveform checked to be float32 audio before it reaches the processor."""
        samples = decode_waveform(waveform)
        output = self.speech_processor_manager.get(session_id).process_chunk(samples)
        self._send_json_response(HTTPStatus.OK, {"new_tokens": output.new_tokens, "new_string": output.new_string,
                                                 "deleted_tokens": output.deleted_tokens,
                                                 "deleted_string": output.deleted_string})

    def _send_error(self, status: HTTPStatus, message: str) -> None:
        LOGGER.warning("%d %s", status, message)
        self.send_response(status)
        self.send_header("Content-type", "application/json; charset=utf-8")
        self.end_headers()
        self.wfile.write(json.dumps({"error": message}).encode("utf-8"))


def build_server(server_config: str | Path, processor_config: str | Path) -> tuple[ThreadingHTTPServer,
                                                                                      SpeechProcessorSessionManager]:
    """simulstream's server pieces for the two YAMLs (server: hostname, port, pool_size, ttl; processor: `type:`
    and the agent's knobs). Loads the pool's processors; `serve_forever()` on the first item starts serving."""
    server = yaml_config(str(server_config))
    started = time.time()
    manager = SpeechProcessorSessionManager(yaml_config(str(processor_config)), server.pool_size, server.ttl)
    LOGGER.info("loaded %d speech processor(s) in %.1f s", server.pool_size, time.time() - started)
    httpd = ThreadingHTTPServer((server.hostname, server.port),
                                partial(ErrorAnsweringHandler, speech_processor_manager=manager))
    return httpd, manager


def serve(server_config: str | Path, processor_config: str | Path) -> None:
    """Serve until interrupted."""
    httpd, _ = build_server(server_config, processor_config)
    host, port = httpd.server_address[:2]
    print(f"serving simulstream's HTTP speech-processor API on http://{host}:{port}/", flush=True)
    try:
        httpd.serve_forever()
    finally:
        httpd.server_close()  # the manager's TTL thread is a daemon: it ends with the process
