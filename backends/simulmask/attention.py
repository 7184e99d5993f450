"""SimulMask attention in stock transformers Falcon and Bloom: a context manager whose forward pre-hooks hand every
attention module the per-row modified ALiBi bias and the mask (no copied modeling file, no patched class).

transformers' ALiBi models build ALiBi from a 2D padding mask, i.e. one bias per key shared by all rows, and crash
on a 4D mask; the hooks replace, per call, the two inputs each attention module receives from its decoder layer:
    Falcon (sdpa or eager): attention_mask <- modified ALiBi / sqrt(head_dim) + mask, alibi <- zeros
    Bloom (eager):          alibi <- modified ALiBi [B*H, Q, K],                  attention_mask <- mask
so both compute softmax(Q K^T / sqrt(d) + m_h * rank + mask) with rank the key's rank among the keys its row sees.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Iterator

import torch

from backends.simulmask.alibi import biased_attention_mask, check_rows_see_a_key, modified_alibi_bias

ALIBI_MODEL_TYPES = ("falcon", "bloom")


class NotAnAlibiModelError(ValueError):
    """SimulMask's cache splicing and modified ALiBi need an ALiBi model."""


def check_alibi_model(model) -> str:
    """The model type ('falcon' or 'bloom') of an ALiBi causal LM, or a clear error."""
    config = model.config
    model_type = getattr(config, "model_type", "")
    if model_type not in ALIBI_MODEL_TYPES or (model_type == "falcon" and not config.alibi):
        raise NotAnAlibiModelError(
            f"SimulMask needs an ALiBi model (Falcon with alibi=True such as tiiuae/falcon-rw-1b, or Bloom); got "
            f"model_type {model_type!r}{' with alibi=False (rotary)' if model_type == 'falcon' else ''}. RoPE models "
            f"bake positions into the KV cache: use agents.waitk_gpe for them")
    implementation = config._attn_implementation
    if model_type == "falcon" and implementation not in ("sdpa", "eager"):
        raise NotAnAlibiModelError(f"Falcon with ALiBi runs with attn_implementation 'sdpa' or 'eager', not "
                                   f"{implementation!r} (flash attention takes no bias)")
    return model_type


def _attention_modules(model, model_type: str) -> list[torch.nn.Module]:
    if model_type == "falcon":
        from transformers.models.falcon.modeling_falcon import FalconAttention as attention_class
    else:
        from transformers.models.bloom.modeling_bloom import BloomAttention as attention_class
    modules = [module for module in model.modules() if isinstance(module, attention_class)]
    if not modules:
        raise NotAnAlibiModelError(f"no {attention_class.__name__} module found in {type(model).__name__}")
    return modules


def _cached_length(layer_past, layer_idx: int) -> int:
    return layer_past.get_seq_length(layer_idx) if layer_past is not None else 0


@contextmanager
def modified_alibi_attention(model, visible: torch.Tensor) -> Iterator[None]:
    """Within the block, every forward of `model` (Falcon or Bloom) attends with visibility `visible` (bool
    [B, Q, K] or [Q, K]; K = cached + Q keys) and the modified ALiBi bias. Not re-entrant for one model object:
    the hooks live on its modules for the duration of the block and are always removed."""
    model_type = check_alibi_model(model)
    config = model.config
    visible = torch.as_tensor(visible, dtype=torch.bool)
    if visible.dim() == 2:
        visible = visible.unsqueeze(0)
    check_rows_see_a_key(visible)
    num_heads = config.num_attention_heads if model_type == "falcon" else config.n_head
    head_dim = config.hidden_size // num_heads
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    batch, queries, keys = visible.shape
    hidden = torch.finfo(dtype).min
    if model_type == "falcon":
        mask = biased_attention_mask(visible[:, None], num_heads, math.sqrt(head_dim), dtype)[:, 0].to(device)
        zeros = torch.zeros(batch * num_heads, 1, keys, dtype=dtype, device=device)
        replacements = {"attention_mask": mask, "alibi": zeros}
    else:
        bias = modified_alibi_bias(visible, num_heads, dtype, bfloat16_products=False)  # [B, H, Q, K]
        mask = torch.zeros(batch, 1, queries, keys, dtype=dtype).masked_fill(~visible[:, None], hidden)
        replacements = {"alibi": bias.reshape(batch * num_heads, queries, keys).to(device),
                        "attention_mask": mask.to(device)}

    def replace_inputs(module, args, kwargs):
        hidden_states = args[0] if args else kwargs["hidden_states"]
        cached = _cached_length(kwargs.get("layer_past"), module.layer_idx)
        if hidden_states.shape[:2] != (batch, queries) or cached + queries != keys:
            raise ValueError(f"the SimulMask visibility is [{batch}, {queries}, {keys}] but the forward has batch "
                             f"{hidden_states.shape[0]}, {hidden_states.shape[1]} queries and {cached} cached keys")
        return args, {**kwargs, **replacements}

    handles = [module.register_forward_pre_hook(replace_inputs, with_kwargs=True)
               for module in _attention_modules(model, model_type)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
