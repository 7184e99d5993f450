"""SimulMask's training recipe for the shared loop: one prompt per pair (the decoder's) -> the wait-k SimulMask with
modified ALiBi, loss on the target tokens only."""
from __future__ import annotations

from pathlib import Path

from backends.finetune.loop import finetune as run_training
from backends.finetune.recipe import Recipe
from backends.finetune_simulmask.checkpoint import CHECKPOINTS
from backends.finetune_simulmask.config import LORA_TARGETS, SimulMaskFinetuneConfig
from backends.simulmask.loading import load_alibi_lm
from backends.simulmask.mask import collate_simulmask, simulmask_forward
from backends.simulmask.prompt import segment_pair, simulmask_template


class SimulMaskRecipe(Recipe):
    checkpoints = CHECKPOINTS
    lora_targets = LORA_TARGETS

    def load(self, config: SimulMaskFinetuneConfig):
        model, tokenizer = load_alibi_lm(config.model, dtype=config.model_dtype, device=config.model_device)
        self.template = simulmask_template(tokenizer, config.source_lang, config.target_lang)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return model, tokenizer

    def batch_loss(self, model, tokenizer, sources, targets, config: SimulMaskFinetuneConfig):
        examples = [segment_pair(tokenizer, self.template, source, target) for source, target in zip(sources, targets)]
        batch = collate_simulmask(examples, config.k, self.pad_id, simulmask=config.simulmask,
                                  alignment=config.alignment).to(config.model_device)
        return simulmask_forward(model, batch).loss

    def metadata(self, config: SimulMaskFinetuneConfig) -> dict:
        return {"k": config.k, "simulmask": config.simulmask, "alignment": config.alignment,
                "source_lang": config.source_lang, "target_lang": config.target_lang}


def finetune(config: SimulMaskFinetuneConfig, log=print) -> Path:
    return run_training(config, SimulMaskRecipe(), log)
