"""Capture of the selected heads' queries and keys exactly as the attention kernel consumes them.

transformers 5 calls attention through `AttentionInterface` with q/k already normed, rotated and (on KV-shared
layers) taken from the sharing layer. We register `alignatt_sdpa`, which records into the `QKRecorder`
(backends/recorder.py) passed as a forward kwarg and then runs stock SDPA: outputs are bit-identical and nothing is
stored on the module.
"""
from __future__ import annotations

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
