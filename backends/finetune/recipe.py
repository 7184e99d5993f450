"""What a system plugs into the shared training loop: how to load the base model, the loss of a batch of sentence
pairs under its mask, which projections LoRA adapts, and its checkpoint format."""
from __future__ import annotations

from abc import ABC, abstractmethod

from backends.checkpoints import CheckpointFormat
from backends.finetune.config import FinetuneKnobs


class Recipe(ABC):
    checkpoints: CheckpointFormat
    lora_targets: tuple[str, ...]

    @abstractmethod
    def load(self, config: FinetuneKnobs):
        """(model, tokenizer) of the base weights, ready for training."""

    @abstractmethod
    def batch_loss(self, model, tokenizer, sources: list[str], targets: list[str], config: FinetuneKnobs):
        """The mean target-token loss of these pairs (a scalar tensor with a graph)."""

    @abstractmethod
    def metadata(self, config: FinetuneKnobs) -> dict:
        """What the inference side needs to rebuild the training conditions (written next to the weights)."""
