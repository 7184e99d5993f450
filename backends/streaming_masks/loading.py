"""Load a causal LM for streaming masks through the project's loader: SDPA, or eager where the architecture
softcaps attention logits (Gemma-2), since SDPA cannot; both consume the 4D float masks unchanged."""
from __future__ import annotations

from backends.streaming_masks.decoder import StreamingLM
from backends.streaming_masks.segments import StreamingTemplate

SYSTEM_TEMPLATE = "Translate the following {source} text into {target}. Output only the {target} translation."


def attention_implementation(spec: str) -> str:
    from transformers import AutoConfig

    from backends.models import resolve_model

    config = AutoConfig.from_pretrained(resolve_model(spec))
    config = config.get_text_config(decoder=True)
    return "eager" if getattr(config, "attn_logit_softcapping", None) else "sdpa"


def translation_template(tokenizer, source_lang: str, target_lang: str) -> StreamingTemplate:
    from backends.prompt import language_name

    names = {"source": language_name(source_lang), "target": language_name(target_lang)}
    return StreamingTemplate.from_chat_template(tokenizer, SYSTEM_TEMPLATE.format(**names))


def load_streaming_lm(spec: str, source_lang: str, target_lang: str, *, dtype: str = "float32",
                      device: str = "cpu", adapter: str = "") -> StreamingLM:
    """Weights (`spec` as `backends.models.load_causal_lm` takes it, plus an optional LoRA/full fine-tuning
    checkpoint directory `adapter` written by `python -m backends.finetune_gpe`) and the translation template."""
    from backends.models import load_causal_lm

    model, tokenizer = load_causal_lm(spec, dtype=dtype, device=device,
                                      attn_implementation=attention_implementation(spec))
    if adapter:
        from backends.finetune_gpe.checkpoint import apply_checkpoint

        model = apply_checkpoint(model, adapter)
    return StreamingLM.from_model(model.eval(), tokenizer, translation_template(tokenizer, source_lang, target_lang))
