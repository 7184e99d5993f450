"""Per-engine q/k capture inside a loaded vLLM model: wrap the rotary embedding of the selected attention layers
so that the rotated queries and keys of the selected heads are written, by position, into fixed-shape buffers.

Everything lives on this engine's model instance (one wrapper per selected layer, its own buffers); nothing is
global. Every family vLLM serves here (Gemma-3/4, Qwen2/3, Llama) calls `q, k = self.rotary_emb(positions, q, k)`
right before `self.attn(q, k, v)`; Gemma-4's KV-shared layers call it with k=None and read the keys of the layer
named by `attn.kv_sharing_target_layer_name`, whose wrapper then captures the keys they need.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from backends.recorder import LayerGeometry
from backends.vllm import capture_op  # noqa: F401  (registers torch.ops.simulagents.capture_rows)

LAYER_INDEX = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True)
class LayerLayout:
    """Where one selected layer's rows live: its query heads, and the layer and KV heads its keys come from."""

    layer: int
    query_heads: tuple[int, ...]
    key_layer: int  # this layer, or the layer whose KV cache a KV-shared layer reads
    group: int  # query heads per KV head (grouped-query attention)
    geometry: LayerGeometry


class CapturingRotary(nn.Module):
    """The layer's rotary embedding, followed by the capture op on the selected query and key heads."""

    def __init__(self, rotary: nn.Module, query_heads: Sequence[int], key_heads: Sequence[int], capacity: int,
                 head_dim: int):
        super().__init__()
        self.rotary = rotary
        self.register_buffer("query_heads", torch.tensor(sorted(query_heads), dtype=torch.long), persistent=False)
        self.register_buffer("key_heads", torch.tensor(sorted(key_heads), dtype=torch.long), persistent=False)
        # One row per position, plus the trash row that positions past the capacity and padding rows go to.
        self.register_buffer("query_rows", torch.zeros(len(query_heads), capacity + 1, head_dim), persistent=False)
        self.register_buffer("key_rows", torch.zeros(len(key_heads), capacity + 1, head_dim), persistent=False)

    def forward(self, positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor | None = None):
        query, key = self.rotary(positions, query, key)
        zero = query.new_zeros(())
        if self.query_heads.numel():
            zero = zero + torch.ops.simulagents.capture_rows(positions, query, self.query_heads, self.query_rows)
        if key is not None and self.key_heads.numel():
            zero = zero + torch.ops.simulagents.capture_rows(positions, key, self.key_heads, self.key_rows)
        # x + 0.0 == x bit for bit (the attention reads the same values); the data dependency keeps the op alive.
        return query + zero, key


def attention_modules(model: nn.Module) -> dict[int, nn.Module]:
    """Decoder attention modules (those with `rotary_emb` and a vLLM `attn`) by layer index."""
    found = {}
    for name, module in model.named_modules():
        match = LAYER_INDEX.search(name + ".")
        if match and hasattr(module, "rotary_emb") and hasattr(module, "attn") and hasattr(module, "num_heads"):
            found[int(match.group(1))] = module
    if not found:
        raise NotImplementedError(
            f"{type(model).__name__}: no attention module with rotary_emb and attn found; q/k capture supports "
            f"Gemma-3, Gemma-4, Qwen2, Qwen3 and Llama attention"
        )
    return found


def plan_capture(model: nn.Module, heads: Sequence[tuple[int, int]]) -> dict[int, LayerLayout]:
    """Validate `heads` against the model and say where each selected layer's rows are captured."""
    modules = attention_modules(model)
    layouts = {}
    for layer in sorted({layer for layer, _ in heads}):
        if layer not in modules:
            raise ValueError(f"head layer {layer} does not exist: the model has attention layers "
                             f"0..{max(modules)}; check the head file against the model")
        module = modules[layer]
        query_heads = tuple(sorted({h for l, h in heads if l == layer}))
        if query_heads[-1] >= module.num_heads:
            raise ValueError(f"head ({layer}, {query_heads[-1]}) does not exist: layer {layer} has "
                             f"{module.num_heads} query heads on this rank")
        target = getattr(module.attn, "kv_sharing_target_layer_name", None)
        key_layer = int(LAYER_INDEX.search(target).group(1)) if target else layer
        impl = module.attn.impl
        window = getattr(module.attn, "sliding_window", None)
        softcap = getattr(impl, "logits_soft_cap", None)
        layouts[layer] = LayerLayout(
            layer=layer,
            query_heads=query_heads,
            key_layer=key_layer,
            group=module.num_heads // module.num_kv_heads,
            geometry=LayerGeometry(scaling=float(impl.scale),
                                   sliding_window=window if window and window > 0 else None,
                                   softcap=float(softcap) if softcap else None),
        )
    return layouts


def key_heads_by_layer(layouts: dict[int, LayerLayout]) -> dict[int, tuple[int, ...]]:
    """KV heads whose keys each key-owning layer captures (the union over the layers that read them)."""
    needed: dict[int, set[int]] = {}
    for layout in layouts.values():
        needed.setdefault(layout.key_layer, set()).update(h // layout.group for h in layout.query_heads)
    return {layer: tuple(sorted(kv)) for layer, kv in needed.items()}


def install_capture(model: nn.Module, heads: Sequence[tuple[int, int]], capacity: int) -> dict[int, LayerLayout]:
    """Wrap the rotary embedding of every layer that holds selected queries or the keys they read."""
    modules = attention_modules(model)
    layouts = plan_capture(model, heads)
    key_heads = key_heads_by_layer(layouts)
    for layer in sorted(set(layouts) | set(key_heads)):
        module = modules[layer]
        if isinstance(module.rotary_emb, CapturingRotary):
            raise RuntimeError(f"q/k capture is already installed on layer {layer} of this model")
        query_heads = layouts[layer].query_heads if layer in layouts else ()
        device = next(module.parameters()).device
        module.rotary_emb = CapturingRotary(module.rotary_emb, query_heads, key_heads.get(layer, ()), capacity,
                                            module.attn.head_size).to(device)
    return layouts


def read_capture(model: nn.Module, length: int) -> dict[str, dict[int, torch.Tensor]]:
    """Copies of the captured rows at positions [0, length): {"queries": {layer: [heads, length, d]}, "keys": ...}."""
    captured: dict[str, dict[int, torch.Tensor]] = {"queries": {}, "keys": {}}
    for layer, module in attention_modules(model).items():
        rotary = module.rotary_emb
        if isinstance(rotary, CapturingRotary):
            if length > rotary.query_rows.shape[1] - 1:  # the last row is the trash row
                raise ValueError(f"{length} positions asked for; the capture buffers hold "
                                 f"{rotary.query_rows.shape[1] - 1} (the engine's max_model_len)")
            if rotary.query_heads.numel():
                captured["queries"][layer] = rotary.query_rows[:, :length].clone()
            if rotary.key_heads.numel():
                captured["keys"][layer] = rotary.key_rows[:, :length].clone()
    return captured
