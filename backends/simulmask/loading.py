"""Load an ALiBi causal LM (Falcon with alibi=True, Bloom) for SimulMask through the project's loader, with the plain
SimulMask prompt (base models have no chat template) and optionally a `python -m backends.finetune_simulmask`
checkpoint applied."""
from __future__ import annotations

from backends.simulmask.attention import check_alibi_model
from backends.simulmask.prompt import simulmask_template
from backends.streaming_masks.decoder import StreamingLM


def attention_implementation(spec: str) -> str:
    """SDPA for Falcon (it folds ALiBi into the SDPA mask), eager for Bloom (its attention is eager only)."""
    from transformers import AutoConfig

    from backends.models import resolve_model

    return "eager" if AutoConfig.from_pretrained(resolve_model(spec)).model_type == "bloom" else "sdpa"


def load_alibi_lm(spec: str, *, dtype: str = "float32", device: str = "cpu"):
    """(model, tokenizer) of an ALiBi model, or a clear error for any other architecture."""
    from backends.models import load_causal_lm

    model, tokenizer = load_causal_lm(spec, dtype=dtype, device=device,
                                      attn_implementation=attention_implementation(spec), require_chat_template=False)
    check_alibi_model(model)
    return model, tokenizer


def load_simulmask_lm(spec: str, source_lang: str, target_lang: str, *, dtype: str = "float32", device: str = "cpu",
                      checkpoint: str = "") -> StreamingLM:
    model, tokenizer = load_alibi_lm(spec, dtype=dtype, device=device)
    if checkpoint:
        from backends.finetune_simulmask.checkpoint import apply_checkpoint

        model = apply_checkpoint(model, checkpoint)
    return StreamingLM.from_model(model.eval(), tokenizer, simulmask_template(tokenizer, source_lang, target_lang))
