"""The queries and keys of the selected attention heads of one decode session, kept by absolute position as the
runtime's own arrays (torch tensors on its device, or numpy arrays from llama.cpp), for the replay to read."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class LayerGeometry:
    """What the replay needs to redo one layer's attention algebra."""

    scaling: float
    sliding_window: int | None
    softcap: float | None


def zeros_like_rows(rows: Any, shape: tuple[int, ...]) -> Any:
    """Zeros of `shape` with the array type, dtype and device of `rows` (a numpy array or a torch tensor)."""
    if isinstance(rows, np.ndarray):
        return np.zeros(shape, dtype=rows.dtype)
    return rows.new_zeros(shape)


class _GrowingRows:
    """A [heads, positions, head_dim] buffer indexed by absolute position, grown by doubling; made of the arrays it
    is first given."""

    def __init__(self, first_rows: Any, contiguous: bool):
        self.data = zeros_like_rows(first_rows, (first_rows.shape[0], 64, first_rows.shape[2]))
        self.length = 0
        self.contiguous = contiguous  # keys cover every position; query rows exist only for draft positions

    def write(self, start: int, rows: Any) -> None:
        end = start + rows.shape[1]
        if end > self.data.shape[1]:
            grown = zeros_like_rows(self.data, (self.data.shape[0], max(end, 2 * self.data.shape[1]),
                                                self.data.shape[2]))
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
    query head h reads KV head h // (num_heads // num_kv_heads). Arrays are [batch, heads, positions, head_dim], as
    transformers' attention functions receive them.
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
    def record(self, layer: int, query: Any, key: Any, kwargs: dict) -> None:
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
        self._keys[layer].write(self._start, key[0, self._kv_heads[layer], end - self._new : end, :])
        if self._record_queries:
            q_len = query.shape[2]
            self._queries[layer].write(self._start + self._new - q_len, query[0, self._query_heads[layer], :, :])

    def _configure(self, layer: int, query: Any, key: Any, kwargs: dict) -> None:
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
        self._keys[layer] = _GrowingRows(key[0, kv_heads, :0, :], contiguous=True)
        self._queries[layer] = _GrowingRows(query[0, self._query_heads[layer], :0, :], contiguous=False)

    # -- read by the replay -----------------------------------------------------------------------------------
    def queries(self, layer: int, head: int, positions: slice) -> Any:
        buffer = self._queries[layer]
        if positions.stop > buffer.length:
            raise RuntimeError(f"no captured query rows up to position {positions.stop} (have {buffer.length})")
        return buffer.data[self._query_heads[layer].index(head), positions]

    def keys(self, layer: int, head: int, length: int) -> Any:
        buffer = self._keys[layer]
        if length > buffer.length:
            raise RuntimeError(f"captured keys cover {buffer.length} positions, replay needs {length}")
        return buffer.data[self.kv_head_of[(layer, head)], :length]
