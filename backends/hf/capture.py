"""Capture of the selected heads' queries and keys exactly as the attention kernel consumes them.

transformers 5 calls attention through `AttentionInterface` with q/k already normed, rotated and (on KV-shared
layers) taken from the sharing layer. We register `alignatt_sdpa`, which records into the `QKRecorder` passed as a
forward kwarg and then runs stock SDPA: outputs are bit-identical and nothing is stored on the module.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.modeling_utils import AttentionInterface

CAPTURE_IMPLEMENTATION = "alignatt_sdpa"
RECORDER_KWARG = "alignatt_recorder"


def _capturing_sdpa(module, query, key, value, attention_mask, **kwargs):
    recorder = kwargs.pop(RECORDER_KWARG, None)
    if recorder is not None:
        recorder.record(module.layer_idx, query, key, kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


# Registering a function (code, not state) under a new name; the SDPA mask builder must be registered with it,
# otherwise the mask arrives in another format and logits change (notes/transformers5-attention-capture.md).
AttentionInterface.register(CAPTURE_IMPLEMENTATION, _capturing_sdpa)
AttentionMaskInterface.register(CAPTURE_IMPLEMENTATION, sdpa_mask)


@dataclass(frozen=True)
class LayerGeometry:
    """What the replay needs to redo one layer's attention algebra."""

    scaling: float
    sliding_window: int | None
    softcap: float | None


class _GrowingRows:
    """A [heads, positions, head_dim] buffer indexed by absolute position, grown by doubling."""

    def __init__(self, heads: int, head_dim: int, dtype: torch.dtype, device: torch.device, contiguous: bool):
        self.data = torch.zeros(heads, 64, head_dim, dtype=dtype, device=device)
        self.length = 0
        self.contiguous = contiguous  # keys cover every position; query rows exist only for draft positions

    def write(self, start: int, rows: torch.Tensor) -> None:
        end = start + rows.shape[1]
        if end > self.data.shape[1]:
            grown = torch.zeros(
                self.data.shape[0], max(end, 2 * self.data.shape[1]), self.data.shape[2],
                dtype=self.data.dtype, device=self.data.device,
            )
            grown[:, : self.length] = self.data[:, : self.length]
            self.data = grown
        if self.contiguous and start > self.length:
            raise RuntimeError(f"capture gap: writing position {start} but only {self.length} positions are recorded")
        self.data[:, start:end] = rows
        self.length = end if self.contiguous else max(self.length, end)

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)


class QKRecorder:
    """Queries and keys of selected (layer, query head) pairs for one decode session, indexed by absolute position.

    Keys are recorded for every position fed to the model (they persist with the KV cache and are truncated with
    it); queries only while `begin(..., record_queries=True)`, i.e. for draft rows. Under grouped-query attention
    query head h reads KV head h // (num_heads // num_kv_heads).
    """

    def __init__(self, heads: Sequence[tuple[int, int]]):
        if not heads:
            raise ValueError("QKRecorder needs at least one (layer, head) pair")
        self.heads: tuple[tuple[int, int], ...] = tuple((int(l), int(h)) for l, h in heads)
        self.layers = sorted({layer for layer, _ in self.heads})
        self._query_heads = {l: sorted({h for layer, h in self.heads if layer == l}) for l in self.layers}
        self.geometry: dict[int, LayerGeometry] = {}
        self.kv_head_of: dict[tuple[int, int], int] = {}
        self._keys: dict[int, _GrowingRows] = {}
        self._queries: dict[int, _GrowingRows] = {}
        self._kv_heads: dict[int, list[int]] = {}
        self._start = 0
        self._new = 0
        self._record_queries = False
        self.seen_layers: set[int] = set()
        self.generation = 0  # drafts decoded so far; a draft's rows are valid only while this is unchanged

    # -- driven by the decode session -------------------------------------------------------------------------
    def begin(self, start: int, new_positions: int, record_queries: bool) -> None:
        """The next forward feeds positions [start, start + new_positions)."""
        self._start, self._new, self._record_queries = start, new_positions, record_queries
        self.seen_layers = set()

    def truncate(self, length: int) -> None:
        """Forget everything at positions >= length (the KV cache was cropped to `length`)."""
        for buffer in (*self._keys.values(), *self._queries.values()):
            buffer.truncate(length)

    @property
    def recorded_positions(self) -> int:
        """Positions 0..n-1 whose keys every selected layer has recorded (0 before the first forward)."""
        return min((buffer.length for buffer in self._keys.values()), default=0)

    def check_complete(self) -> None:
        missing = set(self.layers) - self.seen_layers
        if missing:
            raise RuntimeError(
                f"q/k capture saw no attention call for layers {sorted(missing)}: the model does not route attention "
                f"through transformers' AttentionInterface, or the head file names layers it does not have"
            )

    # -- called from inside the attention function ------------------------------------------------------------
    def record(self, layer: int, query: torch.Tensor, key: torch.Tensor, kwargs: dict) -> None:
        if layer not in self._query_heads:
            return
        self.seen_layers.add(layer)
        if layer not in self.geometry:
            self._configure(layer, query, key, kwargs)
        # The new keys end the keys passed (a dynamic cache's, the sharing layer's full-length ones on KV-shared
        # layers, llama.cpp's batch rows alone), unless a static cache passes more slots after them: then they sit
        # at their absolute positions. Query rows may be fewer than the new positions (Gemma-4 slices KV-shared
        # layers to the kept logits during prefill); they are always the last ones.
        end = min(key.shape[2], self._start + self._new)
        new_keys = key[0, self._kv_heads[layer], end - self._new : end, :]
        self._keys[layer].write(self._start, new_keys.detach())
        if self._record_queries:
            q_len = query.shape[2]
            rows = query[0, self._query_heads[layer], :, :].detach()
            self._queries[layer].write(self._start + self._new - q_len, rows)

    def _configure(self, layer: int, query: torch.Tensor, key: torch.Tensor, kwargs: dict) -> None:
        num_heads, num_kv_heads = query.shape[1], key.shape[1]
        group = num_heads // num_kv_heads
        for head in self._query_heads[layer]:
            if head >= num_heads:
                raise ValueError(f"head ({layer}, {head}) does not exist: layer {layer} has {num_heads} query heads")
        kv_heads = sorted({h // group for h in self._query_heads[layer]})
        self._kv_heads[layer] = kv_heads
        for head in self._query_heads[layer]:
            self.kv_head_of[(layer, head)] = kv_heads.index(head // group)
        scaling = kwargs.get("scaling")
        self.geometry[layer] = LayerGeometry(
            scaling=float(scaling) if scaling is not None else query.shape[-1] ** -0.5,
            sliding_window=kwargs.get("sliding_window"),
            softcap=kwargs.get("softcap"),
        )
        self._keys[layer] = _GrowingRows(len(kv_heads), key.shape[-1], key.dtype, key.device, contiguous=True)
        self._queries[layer] = _GrowingRows(
            len(self._query_heads[layer]), query.shape[-1], query.dtype, query.device, contiguous=False
        )

    # -- read by the replay -----------------------------------------------------------------------------------
    def queries(self, layer: int, head: int, positions: slice) -> torch.Tensor:
        buffer = self._queries[layer]
        if positions.stop > buffer.length:
            raise RuntimeError(f"no captured query rows up to position {positions.stop} (have {buffer.length})")
        return buffer.data[self._query_heads[layer].index(head), positions]

    def keys(self, layer: int, head: int, length: int) -> torch.Tensor:
        buffer = self._keys[layer]
        if length > buffer.length:
            raise RuntimeError(f"captured keys cover {buffer.length} positions, replay needs {length}")
        return buffer.data[self.kv_head_of[(layer, head)], :length]
