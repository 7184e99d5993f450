"""GPE's training recipe for the shared loop: segmented pairs -> the wait-k streaming mask with group position ids,
loss on the target tokens only."""
from __future__ import annotations

from pathlib import Path

from backends.finetune.loop import finetune as run_training
from backends.finetune.recipe import Recipe
from backends.finetune_gpe.checkpoint import CHECKPOINTS
from backends.finetune_gpe.config import LORA_TARGETS, GPEFinetuneConfig
from backends.streaming_masks.hf_inputs import collate_streaming
from backends.streaming_masks.loading import attention_implementation, translation_template
from backends.streaming_masks.segments import segment_example


class GPERecipe(Recipe):
    checkpoints = CHECKPOINTS
    lora_targets = LORA_TARGETS

    def load(self, config: GPEFinetuneConfig):
        from backends.models import load_causal_lm

        model, tokenizer = load_causal_lm(config.model, dtype=config.model_dtype, device=config.model_device,
                                          attn_implementation=attention_implementation(config.model))
        self.template = translation_template(tokenizer, config.source_lang, config.target_lang)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return model, tokenizer

    def batch_loss(self, model, tokenizer, sources, targets, config: GPEFinetuneConfig):
        examples = [segment_example(tokenizer, self.template, source, target)
                    for source, target in zip(sources, targets)]
        batch = collate_streaming(examples, config.k, config.phi, self.pad_id, model.dtype, config.streaming)
        return model(**batch.to(config.model_device).model_inputs()).loss

    def metadata(self, config: GPEFinetuneConfig) -> dict:
        return {"k": config.k, "phi": config.phi, "streaming": config.streaming, "source_lang": config.source_lang,
                "target_lang": config.target_lang}


def finetune(config: GPEFinetuneConfig, log=print) -> Path:
    return run_training(config, GPERecipe(), log)
