"""Streaming STAR/CIF inference without oracle lengths: audio -> causal log-mel -> cached encoder -> segmenter
scores accumulated to β = 1 (policies.integrate_fire) -> one anchor per fire, stamped with the audio it had read ->
greedy KV-cached decoding, wait-k over anchors (token i reads min(i + k − 1, |A|) anchors; k = 0: offline).

The semantic state of a frame that did not fire is computed one frame late: if the stream ends there, the end
forces a fire and that frame must enter the semantic encoder marked as an anchor, as in training."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from backends.star.encoder import EncoderStream, frame_end_ms
from backends.star.features import HOP, WINDOW, frame_count, log_mel
from backends.star.layers import KVCache
from backends.star.model import StarModel
from policies.integrate_fire import IntegrateAndFire
from policies.waitk import units_read_before


@dataclass(frozen=True)
class Token:
    id: int
    delay_ms: float  # audio read when the anchors this token needed were all available


class StreamingRecognizer:
    """One stream at a time; `reset()` starts the next one. Weights are shared read-only."""

    def __init__(self, model: StarModel, eos_id: int, bos_id: int, wait_k: int = 3, max_tokens: int = 256,
                 threshold: float = 1.0, pad_id: int = 0):
        if wait_k < 0:
            raise ValueError(f"wait_k must be >= 0 (0 decodes after the whole stream), got {wait_k}")
        self.model, self.eos_id, self.bos_id, self.pad_id = model, eos_id, bos_id, pad_id
        self.wait_k, self.max_tokens, self.threshold = wait_k, max_tokens, threshold
        self.reset()

    def reset(self) -> None:
        self.pending_audio = np.zeros(0, dtype=np.float32)
        self.samples_fed = 0
        self.encoder = EncoderStream()
        self.semantic_caches: list[KVCache] = self.model.semantic.new_caches()
        self.fire = IntegrateAndFire(self.threshold)
        self.held: tuple[torch.Tensor, torch.Tensor] | None = None  # (state, score) not yet semantically encoded
        self.last_anchor: tuple[torch.Tensor, torch.Tensor] | None = None  # (anchor, score) of the last fire
        self.open_segment: torch.Tensor | None = None  # CIF: the weighted sum integrating so far
        self.decoder = self.model.decoder.new_stream()
        self.anchor_times_ms: list[float] = []
        self.tokens: list[Token] = []
        self.finished = False

    @property
    def done(self) -> bool:
        return bool(self.tokens) and (self.tokens[-1].id == self.eos_id or len(self.tokens) >= self.max_tokens)

    @torch.no_grad()
    def feed_audio(self, samples: np.ndarray) -> list[Token]:
        """Add 16 kHz float32 samples; returns the tokens decoded because of them."""
        if self.finished:
            raise RuntimeError("the stream is finished; reset() before feeding another one")
        self.samples_fed += len(samples)
        self.pending_audio = np.concatenate([self.pending_audio, np.asarray(samples, dtype=np.float32)])
        frames = frame_count(len(self.pending_audio))
        if frames:
            used = (frames - 1) * HOP + WINDOW
            mel = log_mel(torch.from_numpy(self.pending_audio[:used]))
            self.pending_audio = self.pending_audio[frames * HOP:]
            self._encode(mel.unsqueeze(0))
        return self._decode()

    @torch.no_grad()
    def finish(self) -> list[Token]:
        """End of stream: force the last fire if frames arrived after it, then decode to the end."""
        self.finished = True
        if self.fire.finish():
            end_ms = self.samples_fed * 1000 / 16_000
            if self.model.config.compressor == "star":
                if self.held is not None:  # the last frame: now an anchor
                    state, score = self.held
                    self.held = None
                    self._add_anchors(self._semantic([state], [1])[-1:], end_ms, score)
                else:  # the last frame fired already and is fired again
                    anchor, score = self.last_anchor
                    self._add_anchors(anchor, end_ms, score)
            elif self.open_segment is not None:
                self._add_anchors(self.open_segment.unsqueeze(0), end_ms)
        return self._decode()

    # ---- encoding ----------------------------------------------------------------------------------------
    def _semantic(self, states: list[torch.Tensor], types: list[int]) -> torch.Tensor:
        x = torch.stack(states).unsqueeze(0)
        if self.model.anchor_type is not None:
            x = x + self.model.anchor_type(torch.tensor([types]))
        return self.model.semantic.step(x, self.semantic_caches)[0]

    def _encode(self, mel: torch.Tensor) -> None:
        first = self.encoder.frames
        states = self.model.acoustic.step(mel, self.encoder)[0]
        if states.shape[0] == 0:
            return
        logits = self.model.scores(states.unsqueeze(0))[0]
        alphas = torch.sigmoid(logits).tolist()
        if self.model.config.compressor == "cif":
            semantic = self._semantic(list(states), [0] * len(states))
            for offset, alpha in enumerate(alphas):
                self._integrate(semantic[offset], alpha, first + offset)
            return
        fires = [len(self.fire.push(alpha)[0]) for alpha in alphas]
        run = ([self.held[0]] if self.held is not None else []) + list(states)
        types = ([0] if self.held is not None else []) + [int(count > 0) for count in fires]
        shift = len(run) - len(states)  # 1 when the frame held back from the last chunk leads
        self.held = None
        if not fires[-1]:  # its type is final only when the next frame arrives or the stream ends
            self.held = (run.pop(), logits[-1:])
            types.pop()
        out = self._semantic(run, types) if run else None
        for offset, count in enumerate(fires):
            if count:
                anchor, score = out[shift + offset:shift + offset + 1], logits[offset:offset + 1]
                self.last_anchor = (anchor, score)
                for _ in range(count):
                    self._add_anchors(anchor, frame_end_ms(first + offset), score)

    def _integrate(self, state: torch.Tensor, alpha: float, frame: int) -> None:
        completed, left = self.fire.push(alpha)
        for share in completed:
            segment = share * state if self.open_segment is None else self.open_segment + share * state
            self._add_anchors(segment.unsqueeze(0), frame_end_ms(frame))
            self.open_segment = None
        if left > 0:
            self.open_segment = left * state if self.open_segment is None else self.open_segment + left * state

    def _add_anchors(self, anchor: torch.Tensor, time_ms: float, score: torch.Tensor | None = None) -> None:
        """One anchor [1, dim] read by the decoder from now on; STAR's bias is its segmenter logit `score` [1]."""
        self.model.decoder.add_anchors(self.decoder, anchor.unsqueeze(0), score)
        self.anchor_times_ms.append(time_ms)

    # ---- decoding ----------------------------------------------------------------------------------------
    def _decode(self) -> list[Token]:
        new: list[Token] = []
        available = len(self.anchor_times_ms)
        while available and not self.done:
            index = len(self.tokens) + 1  # 1-based index of the token to write
            needed = units_read_before(index, self.wait_k) if self.wait_k else None
            if needed is None or needed > available:
                if not self.finished:
                    break
                visible, delay = available, self.samples_fed * 1000 / 16_000
            else:
                visible, delay = needed, self.anchor_times_ms[needed - 1]
            previous = self.tokens[-1].id if self.tokens else self.bos_id
            logits = self.model.decoder.step(self.decoder, previous, visible)
            logits[[self.bos_id, self.pad_id]] = float("-inf")  # never written
            token = Token(int(logits.argmax()), delay)
            self.tokens.append(token)
            new.append(token)
        return new
