"""Faults over both servers, with real clients on loopback: simulstream's websocket server (`simulstream --serve`,
driven by simulstream's own wav client and `send_audio`, and by the `websockets` library for raw protocol faults) and
the HTTP server (`--serve-http`, driven by simulstream's `HttpProxySpeechProcessor` and raw requests).

Covered: a client that disconnects mid-talk (its processor is cleared, languages included, and the next stream's
output equals a fresh run's); malformed messages; a wrong sample rate or sample type (a clear error naming it, the
server survives); an exception in one stream's model step (that stream gets the error, the others carry on unchanged),
over a fake translator (`fake_agents:FakeSlowSpeechProcessor`, no model: one word "w1", "w2", ... per chunk, so any
state left over shows in the words). And 60 s of silence or of noise inside a talk on the real embedded cascade
(Whisper base + Qwen2.5 0.5B): no crash and no words translated from the gap. tests/test_http_sessions.py covers the
HTTP pool, TTL, failing step and malformed requests already.
"""
from __future__ import annotations

import asyncio
import base64
import json
import signal
import subprocess
import sys
import time
import urllib.error
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("simulstream")

from agent_servers import (  # noqa: E402,F401 - agent_server and fake_server are fixtures
    FAKE_AGENT,
    agent_server,
    fake_server,
    post,
    proxy,
    refused,
    words,
)

RATE = 16_000


# -- the websocket protocol, as simulstream's client speaks it -----------------------------------------------------

@dataclass
class StreamResult:
    """What a websocket client saw: the text its outputs build (each removes its "deleted" string from the end and
    adds its "new" one), whether the stream finished (end_of_processing), the server's error message, and the close
    code and reason."""

    text: str = ""
    finished: bool = False
    error: str | None = None
    close_code: int | None = None
    close_reason: str = ""


def int16(audio: np.ndarray) -> np.ndarray:
    from simulstream.client.wav_reader_client import float32_to_int16

    return float32_to_int16(audio.astype(np.float32))


async def websocket_stream(port: int, audio: np.ndarray | None = None, metadata: dict | None = None,
                           raw_frames: tuple = (), end_of_stream: bool = True, timeout: float = 60) -> StreamResult:
    """One client on ws://127.0.0.1:port: `metadata` (JSON), `raw_frames` as they are (str or bytes), then `audio`
    (int16) in 100 ms frames by simulstream's `send_audio`, then end_of_stream; collects what comes back."""
    import websockets
    from simulstream.client.wav_reader_client import send_audio

    result = StreamResult()

    async def collect(websocket):
        try:
            async for message in websocket:
                data = json.loads(message)
                if data.get("deleted"):
                    result.text = result.text[: len(result.text) - len(data["deleted"])]
                result.text += data.get("new", "")
                result.error = data.get("error", result.error)
                if data.get("end_of_processing"):
                    result.finished = True
                    return
        except websockets.exceptions.ConnectionClosed:
            pass

    async with websockets.connect(f"ws://127.0.0.1:{port}", ping_timeout=None) as websocket:
        receiver = asyncio.create_task(collect(websocket))
        try:
            if metadata is not None:
                await websocket.send(json.dumps(metadata))
            for frame in raw_frames:
                await websocket.send(frame)
            if audio is not None:
                await send_audio(websocket, RATE, audio)
            if end_of_stream:
                await websocket.send(json.dumps({"end_of_stream": True}))
        except websockets.exceptions.ConnectionClosed:
            pass  # the server ended the stream: what it said is in the receiver's result
        await asyncio.wait_for(receiver, timeout)
    result.close_code, result.close_reason = websocket.close_code, websocket.close_reason or ""
    return result


def stream(port: int, audio=None, **kwargs) -> StreamResult:
    return asyncio.run(websocket_stream(port, audio, **kwargs))


def streams_at_once(port: int, *calls: dict) -> list[StreamResult]:
    async def run():
        return await asyncio.gather(*(websocket_stream(port, **call) for call in calls))

    return asyncio.run(run())


SILENCE_3S = int16(np.zeros(3 * RATE))
# Three full 1 s chunks, then end_of_stream's 0.1 s remainder: simulstream's send_audio sends the last frame twice.
FRESH_TEXT = "w1 w2 w3 w4"


@pytest.fixture
def fake_websocket_server(agent_server):  # noqa: F811
    """start(*flags) -> port: `simulstream --agent fake_agents:FakeSlowSpeechProcessor --serve` with 1 s chunks."""
    return lambda *flags: agent_server(FAKE_AGENT, "--set", "speech_chunk_size=1.0", "--serve", *flags)


def expect_refused(result: StreamResult, code: int, *fragments: str) -> None:
    """The stream was ended by the server with `code`, an error frame holding every fragment, and a close reason
    that starts the same message."""
    assert not result.finished and result.close_code == code, result
    assert result.error and all(fragment in result.error for fragment in fragments), result.error
    assert result.close_reason and result.error.startswith(result.close_reason), result


# -- (a) a client that disconnects mid-talk ------------------------------------------------------------------------

def metrics_tokens(log: Path) -> list[str]:
    return [token for line in log.read_text().splitlines() if line.strip()
            for token in json.loads(line).get("generated_tokens", [])]


def test_websocket_client_killed_mid_talk_leaves_its_processor_clean_for_the_next_stream(fake_websocket_server,
                                                                                      tmp_path):
    """simulstream's own wav client, killed (SIGKILL) while the server computes its talk in Italian; the pool's one
    processor then serves the next stream exactly as a fresh one (German, from w1)."""
    import soundfile

    port = fake_websocket_server("--pool-size", "1", "--set", "seconds_per_chunk=0.2", "--set", "tag_language=true")
    fresh = stream(port, SILENCE_3S)
    assert fresh.finished and fresh.text == "de:w1 de:w2 de:w3 de:w4"
    soundfile.write(tmp_path / "long_talk.wav", np.zeros(30 * RATE, dtype=np.int16), RATE, subtype="PCM_16")
    (tmp_path / "wavs.txt").write_text("long_talk.wav\n")
    client = subprocess.Popen(
        [Path(sys.executable).parent / "simulstream_wavs_client", "--uri", f"ws://127.0.0.1:{port}",
         "--wav-list-file", str(tmp_path / "wavs.txt"), "--tgt-lang", "it"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = tmp_path / f"{port}.jsonl"
    deadline = time.time() + 30
    while "it:w2" not in " ".join(metrics_tokens(log)):
        assert client.poll() is None and time.time() < deadline, "the killed client's talk never started"
        time.sleep(0.05)
    client.send_signal(signal.SIGKILL)
    client.wait(timeout=10)
    assert "it:w30" not in " ".join(metrics_tokens(log))  # killed mid-talk
    after = stream(port, SILENCE_3S)  # waits for the processor to come back to the pool
    assert after.finished and after.text == fresh.text  # state and the Italian direction were cleared


def test_http_session_abandoned_mid_request_is_cleared_after_the_ttl_and_the_server_survives(fake_server):
    """A client that sets Italian, then gives up waiting for a slow chunk (timeout: it leaves before the answer) and
    never clears: after the TTL its processor serves a new session as a fresh one (German, from w1)."""
    port = fake_server("--pool-size", "1", "--session-ttl", "1", "--set", "seconds_per_chunk=0.5",
                       "--set", "tag_language=true")
    leaving = proxy(port)
    leaving.set_target_language("it")
    with pytest.raises(OSError):  # socket timeout (urllib wraps it as URLError, an OSError, on some versions)
        post(port, "process_chunk", json.dumps({"session_id": leaving.session_id, "waveform": base64.b64encode(
            np.zeros(RATE, dtype=np.float32).tobytes()).decode()}).encode(), timeout=0.2)
    time.sleep(3.5)  # the chunk finishes (its answer goes nowhere), then the session idles past the TTL
    assert words(proxy(port)) == ["de:w1"]


# -- (b) malformed messages, (c) a wrong sample rate or sample type ------------------------------------------------

def test_websocket_malformed_messages_end_that_stream_with_what_is_wrong(fake_websocket_server):
    """Raw protocol faults sent with the `websockets` library (simulstream's client cannot make them); simulstream's
    own loop would log and ignore them, or close as if the stream had ended."""
    port = fake_websocket_server("--pool-size", "1")
    expect_refused(stream(port, raw_frames=("{not json",)), 1007, "text message is not JSON", "'{not json'")
    expect_refused(stream(port, raw_frames=("[16000]",)), 1007, "must be a JSON object", "got list")
    expect_refused(stream(port, raw_frames=(b"\x00\x01\x02",)), 1007, "3 bytes is not a whole number of 16-bit "
                                                                     "samples", "int16")
    expect_refused(stream(port, metadata={"target_lang": "Klingon"}), 1007, "unknown language 'Klingon'")
    healthy = stream(port, SILENCE_3S, metadata={"metrics_metadata": {"wav_name": "x"}, "unknown_key": 1})
    assert healthy.finished and healthy.text == FRESH_TEXT  # the server survives, its processor clean


def test_websocket_wrong_sample_rate_or_sample_type_is_refused_by_name(fake_websocket_server):
    port = fake_websocket_server("--pool-size", "1")
    for rate in ("sixteen k", 0, -16000, 16000.5, True):
        expect_refused(stream(port, SILENCE_3S, metadata={"sample_rate": rate}), 1007,
                       "sample_rate must be a whole number of Hz", repr(rate))
    speech_like = np.sin(np.linspace(0, 2000 * np.pi, 3 * RATE)) * np.linspace(0.05, 0.6, 3 * RATE)
    as_float32_bytes = speech_like.astype(np.float32).tobytes()
    expect_refused(stream(port, raw_frames=(as_float32_bytes[:6400],)), 1007, "looks like float32 samples", "int16")
    # Real int16 audio at any level is accepted: a loud tone, white noise, 8 kHz audio resampled by the server.
    noise = np.random.default_rng(0).uniform(-0.9, 0.9, 3 * RATE)
    for audio, metadata in ((speech_like, None), (noise, None), (noise[: 3 * 8000], {"sample_rate": 8000})):
        accepted = stream(port, int16(audio), metadata=metadata)
        assert accepted.finished and accepted.text == FRESH_TEXT, accepted


def test_websocket_audio_at_another_rate_reaches_the_model_as_simulstreams_librosa_resampling_gives_it():
    """PcmMessageProcessor resamples a non-16 kHz stream with soxr itself (librosa's first call compiles numba code
    for up to 47 s inside the stream's first chunk): each chunk the model gets equals, sample for sample, what
    simulstream's own MessageProcessor (librosa.resample) gives it; a 16 kHz stream is left to simulstream's code.
    The model here records its chunks (a fake: none is needed to see the samples)."""
    from simulstream.server.message_processor import MessageProcessor
    from simulstream.server.speech_processors.incremental_output import IncrementalOutput

    from agents.harness.websocket_server import PcmMessageProcessor

    class RecordingProcessor:
        speech_chunk_size = 0.5

        def __init__(self):
            self.chunks = []

        def process_chunk(self, waveform):
            self.chunks.append(waveform)
            return IncrementalOutput([], "", [], "")

    audio = int16(np.random.default_rng(1).uniform(-0.8, 0.8, 3 * 44_100 + 77))
    for rate in (8_000, 22_050, 44_100, RATE):
        seen = {}
        for processor_class in (MessageProcessor, PcmMessageProcessor):
            model = RecordingProcessor()
            messages = processor_class(0, model)
            messages.process_metadata({"sample_rate": rate})
            for start in range(0, len(audio), 1_600):  # 100 ms frames at 16 kHz, as send_audio sends them
                messages.process_speech(audio[start:start + 1_600].tobytes())
            seen[processor_class] = model.chunks
        ours, simulstreams = seen[PcmMessageProcessor], seen[MessageProcessor]
        assert len(ours) == len(simulstreams) > 2
        for mine, theirs in zip(ours, simulstreams):
            assert mine.dtype == theirs.dtype == np.float32 and np.array_equal(mine, theirs), rate


def test_http_wrong_sample_type_is_refused_by_name(fake_server):
    """The HTTP protocol's waveform is base64 float32 at 16 kHz (the client resamples: no sample rate travels, so a
    wrong one cannot be seen here); int16 bytes or NaN are refused before they reach the model."""
    port = fake_server("--pool-size", "1")
    speech_like = np.sin(np.linspace(0, 2000 * np.pi, RATE)) * 0.3

    def send(samples: np.ndarray):
        body = {"session_id": "s", "waveform": base64.b64encode(samples.tobytes()).decode()}
        return post(port, "process_chunk", json.dumps(body).encode())

    code, body = refused(lambda: send(int16(speech_like)))
    assert code == 400 and "must be float32 in [-1, 1]" in body and "int16" in body
    code, body = refused(lambda: send(np.full(RATE, np.nan, dtype=np.float32)))
    assert code == 400 and "NaN" in body
    code, body = refused(lambda: post(port, "process_chunk", b'{"session_id": "s", "waveform": "not base64!"}'))
    assert code == 400 and "waveform is not base64" in body
    # The server survives and the refused chunks never reached a processor: session "s" starts from w1.
    assert json.loads(send(speech_like.astype(np.float32)).read())["new_tokens"] == ["w1"]


# -- (d) an exception in one stream's model step -------------------------------------------------------------------

def test_websocket_failing_model_step_ends_that_stream_and_the_others_carry_on(fake_websocket_server):
    """Fake model step failure (fail_above): in a full chunk, and in end_of_stream's remainder (where simulstream's
    own loop would leave the client waiting for end_of_processing forever)."""
    port = fake_websocket_server("--pool-size", "2", "--set", "fail_above=0.5", "--set", "seconds_per_chunk=0.1")
    long_silence = int16(np.zeros(8 * RATE))
    fresh = stream(port, long_silence)
    loud_chunk = int16(np.concatenate([np.zeros(2 * RATE), np.full(RATE, 0.9)]))
    loud_remainder = int16(np.concatenate([np.zeros(2 * RATE), np.full(RATE // 2, 0.9)]))
    for failing_audio in (loud_chunk, loud_remainder):
        failing, healthy = streams_at_once(port, {"audio": failing_audio}, {"audio": long_silence})
        expect_refused(failing, 1011, "RuntimeError: fake model step failure on a chunk above 0.5")
        assert failing.text == "w1 w2"  # what came before the failure
        assert healthy.finished and healthy.text == fresh.text
    again = streams_at_once(port, {"audio": SILENCE_3S}, {"audio": SILENCE_3S})
    assert all(r.finished and r.text == FRESH_TEXT for r in again)  # both processors back, clean


# -- (e) 60 s of silence or of noise inside a talk, on the real embedded cascade -----------------------------------

GAP_SECONDS = 60.0
GAP_SENTENCES = ("Today I will talk about the price of energy.", "The city will build three new schools in 2027.")


@dataclass(frozen=True)
class GapTalks:
    """The two-sentence talk as spoken (`baseline.wav`) and with 60 s of zeros / of white noise spliced into the pause
    between the sentences (`silence.wav`, `noise.wav`); the gap is [gap_start, gap_start + GAP_SECONDS)."""

    folder: Path
    first_sentence_end: float
    gap_start: float


@pytest.fixture(scope="module")
def gap_talks(tmp_path_factory) -> GapTalks:
    import soundfile

    from common.synthetic_speech import SynthesisError, synthesize_talk

    folder = tmp_path_factory.mktemp("gap_talks")
    try:
        first, _ = synthesize_talk(GAP_SENTENCES, folder / "baseline.wav")
    except SynthesisError as error:
        pytest.skip(str(error))
    talk, _ = soundfile.read(folder / "baseline.wav", dtype="int16")
    first_sentence_end = first.offset + first.duration
    gap_start = first_sentence_end + 0.3  # the middle of the 0.6 s pause
    cut = int(gap_start * RATE)
    gap_samples = int(GAP_SECONDS * RATE)
    noise = np.random.default_rng(0).normal(0, 0.01, gap_samples)  # white noise at -40 dBFS RMS
    for name, gap in (("silence", np.zeros(gap_samples)), ("noise", noise)):
        spliced = np.concatenate([talk[:cut], int16(gap), talk[cut:]])
        soundfile.write(folder / f"{name}.wav", spliced, RATE, subtype="PCM_16")
    (folder / "gaps.txt").write_text("silence.wav\nnoise.wav\n")
    (folder / "baseline.txt").write_text("baseline.wav\n")
    return GapTalks(folder, first_sentence_end, gap_start)


def timed_words(log: Path) -> dict[str, list[tuple[float, str]]]:
    """{wav stem: [(seconds of audio the stream had received, word)]} for every word a simulstream metrics log shows
    generated, for streams that came one after the other (each starts with its client's wav_name metadata)."""
    streams, current = {}, None
    for line in log.read_text().splitlines():
        record = json.loads(line)
        if "metadata" in record:
            current = streams.setdefault(Path(record["metadata"]["wav_name"]).stem, [])
        elif "generated_tokens" in record:
            assert not record["deleted_tokens"], record  # AlignAtt is append-only
            current += [(record["total_audio_processed"], word) for token in record["generated_tokens"]
                        for word in token.split()]
    return streams


@pytest.fixture(scope="module")
def baseline_words(gap_talks, embedded_model_path) -> list[tuple[float, str]]:
    """The talk without the gap, through simulstream's own inference runner (its chunking equals both servers')."""
    from agents.simulstream_cli import main

    log = gap_talks.folder / "baseline.jsonl"
    assert main(["--agent", "agents.alignatt4llm:Agent", "--wav-list", str(gap_talks.folder / "baseline.txt"),
                 "--src-lang", "en", "--tgt-lang", "de", "--metrics-log", str(log)]) == 0
    return timed_words(log)["baseline"]


def assert_nothing_made_of_the_gap(timed: list[tuple[float, str]], baseline: list[tuple[float, str]],
                                   talks: GapTalks) -> None:
    """No word emitted inside the gap once the first sentence had to be committed (the uncommitted tail is at most
    max_tail_seconds, plus two chunks to commit it), the second sentence translated after the gap (the number in it),
    and no flood of words (at most twice the talk without the gap).

    The window is the check that bites: with faster-whisper's VAD switched off, the noise gap's last chunk is heard as
    "I'm going to do a little bit of the same." and "Ich werde etwas der gleiche." is emitted at 62.5 s, inside it.
    The word count varies with the 0.5B model's wording (1.06x the talk without the gap on silence, 1.35x on noise,
    where the first chunk after the gap hears "The city" as "I said"), so its bound only catches a flood."""
    import yaml

    import eval_configs

    preset = yaml.safe_load(eval_configs.path("alignatt4llm_cpu").read_text())
    quiet_from = talks.first_sentence_end + preset["max_tail_seconds"] + 2 * preset["speech_chunk_size"]
    gap_end = talks.gap_start + GAP_SECONDS
    text = " ".join(word for _, word in timed)
    assert [(t, w) for t, w in timed if quiet_from < t <= gap_end] == [], text
    assert any("2027" in word for t, word in timed if t > gap_end), text
    assert len(timed) <= 2 * len(baseline), (text, " ".join(word for _, word in baseline))


@pytest.mark.real_model
@pytest.mark.harness
def test_websocket_60_s_of_silence_or_noise_inside_a_talk_makes_no_words(gap_talks, baseline_words,
                                                                         agent_server, tmp_path):  # noqa: F811
    """The real embedded cascade (default CPU preset) served over websocket; simulstream's own wav client streams the
    silence talk, then the noise talk."""
    port = agent_server("agents.alignatt4llm:Agent", "--serve", startup_seconds=300)
    client = subprocess.run(
        [Path(sys.executable).parent / "simulstream_wavs_client", "--uri", f"ws://127.0.0.1:{port}",
         "--wav-list-file", str(gap_talks.folder / "gaps.txt"), "--src-lang", "en", "--tgt-lang", "de"],
        capture_output=True, text=True, timeout=600)
    assert client.returncode == 0, client.stdout + client.stderr
    streams = timed_words(tmp_path / f"{port}.jsonl")  # the server's metrics log (agent_server)
    assert set(streams) == {"silence", "noise"}
    for timed in streams.values():
        assert_nothing_made_of_the_gap(timed, baseline_words, gap_talks)


@pytest.mark.real_model
@pytest.mark.harness
def test_http_60_s_of_silence_or_noise_inside_a_talk_makes_no_words(gap_talks, baseline_words,
                                                                    agent_server, tmp_path):  # noqa: F811
    """The real embedded cascade served over HTTP; the organizers' client (`simulstream_inference` with simulstream's
    HttpProxySpeechProcessor) streams the silence talk, then the noise talk."""
    import yaml

    port = agent_server("agents.alignatt4llm:Agent", "--serve-http", startup_seconds=300)
    proxy_yaml = tmp_path / "http_proxy.yaml"
    proxy_yaml.write_text(yaml.safe_dump({
        "type": "simulstream.server.speech_processors.remote.http_proxy_speech_processor.HttpProxySpeechProcessor",
        "hostname": "127.0.0.1", "port": port}))
    log = tmp_path / "client.jsonl"
    client = subprocess.run(
        [Path(sys.executable).parent / "simulstream_inference", "--speech-processor-config", str(proxy_yaml),
         "--wav-list-file", str(gap_talks.folder / "gaps.txt"), "--src-lang", "en", "--tgt-lang", "de",
         "--metrics-log-file", str(log)], capture_output=True, text=True, timeout=600)
    assert client.returncode == 0, client.stdout + client.stderr
    streams = timed_words(log)
    assert set(streams) == {"silence", "noise"}
    for timed in streams.values():
        assert_nothing_made_of_the_gap(timed, baseline_words, gap_talks)
