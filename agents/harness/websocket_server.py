"""simulstream's websocket server serving any of our agents, with every fault answered to the client that caused it
(an `{"error": message}` text frame, then a close frame whose code and reason say what went wrong).

It is simulstream's own pool (`SpeechProcessorPool`), message handling (`MessageProcessor`: int16 PCM frames buffered
into chunks, JSON metadata, `{"end_of_stream": true}`) and metrics log; only the per-connection loop is ours, because
simulstream's `handle_connection` logs and drops what it cannot use: a malformed text message or a bad sample rate is
silently ignored, a failing model step closes the connection as if the stream had ended normally, and a failure in
`end_of_stream` leaves the client waiting for `end_of_processing` forever. Here each of these ends that stream with an
error the client can read, the processor is cleared and goes back to the pool, and the other streams carry on. And
audio at another rate than 16 kHz is resampled by soxr directly (`PcmMessageProcessor`), as librosa would.
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import time

import numpy as np
import soxr
import websockets
from simulstream.config import yaml_config
from simulstream.metrics.logger import METRICS_LOGGER, setup_metrics_logger
from simulstream.server.message_processor import MessageProcessor
from simulstream.server.speech_processors import SAMPLE_RATE
from simulstream.server.speech_processors.incremental_output import IncrementalOutput
from simulstream.server.websocket_server import SpeechProcessorPool
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import CloseCode

LOGGER = logging.getLogger("agents.harness.websocket_server")
SAMPLE_RATE_RANGE = (1_000, 384_000)  # Hz a client may announce (librosa resamples any, but these are not audio)
METADATA_KEYS = ("sample_rate", "source_lang", "target_lang", "metrics_metadata", "end_of_stream")
CLOSE_REASON_BYTES = 123  # the websocket protocol's limit on a close reason


class StreamFault(ValueError):
    """A client's message that cannot be used: the stream ends with this message and close `code`."""

    def __init__(self, message: str, code: CloseCode = CloseCode.INVALID_DATA):
        super().__init__(message)
        self.code = code


def read_metadata(message: str) -> dict:
    """A text frame as simulstream's metadata dict, checked: a JSON object whose `sample_rate`, if any, is a whole
    number of Hz in SAMPLE_RATE_RANGE."""
    try:
        data = json.loads(message)
    except json.JSONDecodeError as error:
        raise StreamFault(f"text message is not JSON ({error}): {message[:60]!r}; send a JSON object with any of "
                          f"{', '.join(METADATA_KEYS)}") from None
    if not isinstance(data, dict):
        raise StreamFault(f"text message must be a JSON object with any of {', '.join(METADATA_KEYS)}, got "
                          f"{type(data).__name__}: {message[:60]!r}")
    if "sample_rate" in data:
        rate = data["sample_rate"]
        low, high = SAMPLE_RATE_RANGE
        whole = isinstance(rate, int) and not isinstance(rate, bool) or isinstance(rate, float) and rate.is_integer()
        if not whole or not low <= rate <= high:
            raise StreamFault(f"sample_rate must be a whole number of Hz in [{low}, {high}] (the rate of the int16 "
                              f"PCM that follows, e.g. 16000), got {rate!r}")
    return data


def looks_like_float32(frame: bytes) -> bool:
    """Whether 16-bit samples are really float32 audio in [-1, 1] sent as raw bytes: then every other int16 is the
    upper half of a float, whose exponent bits sit in a narrow band (values 2**-27 .. 1) or are zero, which speech in
    int16 PCM never does for a whole frame."""
    samples = np.frombuffer(frame, dtype="<u2")
    if len(samples) < 64:
        return False
    for upper in (samples[1::2], samples[0::2]):  # a frame may start on either half of a float
        exponent = (upper & 0x7FFF) >> 7
        zero = (upper & 0x7FFF) == 0
        if np.mean(((exponent >= 100) & (exponent <= 127)) | zero) >= 0.9 and np.mean(zero) < 0.5:
            return True
    return False


def check_audio_frame(frame: bytes) -> None:
    """Refuse a binary frame that is not 16-bit little-endian PCM (simulstream's wire format)."""
    if len(frame) % 2:
        raise StreamFault(f"binary audio frame of {len(frame)} bytes is not a whole number of 16-bit samples; send "
                          f"int16 little-endian PCM (2 bytes per sample)")
    if looks_like_float32(frame):
        raise StreamFault("binary audio frame looks like float32 samples; send int16 little-endian PCM (scale by "
                          "2**15 and convert, as simulstream's float32_to_int16 does)")


def resample_chunk(waveform: np.ndarray, sample_rate: int) -> np.ndarray:
    """One chunk at `sample_rate` as 16 kHz: what simulstream's `librosa.resample` call returns (librosa's default,
    soxr's 'HQ' filter on the chunk alone, padded or cut to ceil(n * ratio) samples), without librosa."""
    resampled = soxr.resample(waveform, sample_rate, SAMPLE_RATE, quality="soxr_hq")
    size = math.ceil(len(waveform) * SAMPLE_RATE / sample_rate)
    return np.pad(resampled, (0, max(0, size - len(resampled))))[:size].astype(np.float32, copy=False)


class PcmMessageProcessor(MessageProcessor):
    """simulstream's MessageProcessor with the resampling of a non-16 kHz stream done by `resample_chunk`. Its own
    `librosa.resample` imports and compiles librosa's numba code on first use, inside that stream's first chunk: 5 s
    with numba's cache, 47 s without it on a loaded 2-core EPYC (a fresh venv), so the first 8 kHz client waited that
    long and its computation-aware latency paid for it."""

    def _run_speech_processor(self) -> IncrementalOutput:
        if self.sample_rate == SAMPLE_RATE:
            return super()._run_speech_processor()
        waveform = np.frombuffer(self.client_buffer, dtype=np.int16).astype(np.float32) / 2 ** 15
        output = self.speech_processor.process_chunk(resample_chunk(waveform, self.sample_rate))
        self.client_buffer = b""
        return output


async def answer_error(websocket: ServerConnection, code: CloseCode, message: str) -> None:
    """Tell the client what went wrong (a JSON error frame, then the close reason), if it is still there."""
    LOGGER.warning("stream closed with %d: %s", code, message)
    reason = message.encode("utf-8")[:CLOSE_REASON_BYTES].decode("utf-8", errors="ignore")
    try:
        await websocket.send(json.dumps({"error": message}))
        closing = asyncio.create_task(websocket.close(code, reason))
        # Frames the client sent before it saw the close wait, unread, in front of its close reply (flow control
        # pauses reading): discard them, or the close handshake waits for its 10 s timeout.
        async for _ in websocket:
            pass
        await closing
    except websockets.exceptions.ConnectionClosed:
        pass


def connection_handler(pool: SpeechProcessorPool):
    """simulstream's connection loop over `pool`, answering each fault (see the module docstring)."""

    async def handle_connection(websocket: ServerConnection) -> None:
        loop = asyncio.get_running_loop()
        client_id = id(websocket)
        try:
            async with pool.acquire() as speech_processor:
                message_processor = PcmMessageProcessor(client_id, speech_processor)
                try:
                    async for message in websocket:
                        if isinstance(message, bytes):
                            check_audio_frame(message)
                            output = await loop.run_in_executor(None, message_processor.process_speech, message)
                            if output is not None:
                                await websocket.send(output.strings_to_json())
                            continue
                        metadata = read_metadata(message)
                        if "end_of_stream" in metadata:
                            output = await loop.run_in_executor(None, message_processor.end_of_stream)
                            await websocket.send(output.strings_to_json())
                            await websocket.send(json.dumps({"end_of_processing": True}))
                        else:
                            message_processor.process_metadata(metadata)
                except websockets.exceptions.ConnectionClosed:
                    LOGGER.info("client %d disconnected", client_id)
                except StreamFault as error:
                    await answer_error(websocket, error.code, str(error))
                except ValueError as error:  # ConfigError (language), AudioError and the like: the client's input
                    await answer_error(websocket, CloseCode.INVALID_DATA, str(error))
                except Exception as error:  # noqa: BLE001 - one stream's failure is answered, the server carries on
                    LOGGER.exception("stream of client %d failed", client_id)
                    await answer_error(websocket, CloseCode.INTERNAL_ERROR,
                                       f"speech processor failed: {type(error).__name__}: {error}")
                finally:
                    message_processor.clear()
        except TimeoutError:
            await answer_error(websocket, CloseCode.TRY_AGAIN_LATER,
                               f"all {pool.size} speech processor(s) stayed busy for {pool.acquire_timeout} s; retry "
                               f"later or start the server with a larger pool size")

    return handle_connection


async def main(server_config: str, processor_config: str) -> None:
    """Serve the two YAMLs (server: hostname, port, pool_size, acquire_timeout, metrics; processor: `type:` and the
    agent's knobs) until cancelled, as simulstream's `websocket_server.main` does."""
    server = yaml_config(server_config)
    setup_metrics_logger(server.metrics)
    started = time.time()
    pool = SpeechProcessorPool(yaml_config(processor_config), server.pool_size, server.acquire_timeout)
    loading_time = time.time() - started
    LOGGER.info("loaded %d speech processor(s) in %.1f s", server.pool_size, loading_time)
    METRICS_LOGGER.info(json.dumps({"model_loading_time": loading_time}))
    async with serve(connection_handler(pool), server.hostname, server.port, ping_timeout=None) as websocket_server:
        print(f"serving simulstream's websocket API on ws://{server.hostname}:{server.port}/", flush=True)
        await websocket_server.serve_forever()

