"""Fine-tuning checkpoints: a directory with the system's metadata JSON and either a peft LoRA adapter or full
weights, written by one fine-tuning command and applied to the base model it was trained from."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CheckpointFormat:
    """The checkpoints of one system's fine-tuning command (e.g. GPE: gpe_training.json, python -m ...)."""

    system: str
    metadata_file: str
    command: str

    def save(self, model, out_dir: Path, metadata: dict) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(out_dir)  # peft: the adapter only; a plain model: all weights
        (out_dir / self.metadata_file).write_text(json.dumps(metadata, indent=2) + "\n")
        return out_dir

    def read_metadata(self, checkpoint: str | Path) -> dict:
        path = Path(checkpoint) / self.metadata_file
        if not path.is_file():
            raise FileNotFoundError(f"{checkpoint} is not a {self.system} fine-tuning checkpoint (no "
                                    f"{self.metadata_file}); pass a directory written by `{self.command}`")
        return json.loads(path.read_text())

    def apply(self, model, checkpoint: str | Path):
        """The base `model` with the checkpoint's weights: a LoRA adapter merged in, or the full weights loaded."""
        metadata = self.read_metadata(checkpoint)
        if metadata["method"] == "lora":
            from peft import PeftModel

            return PeftModel.from_pretrained(model, str(checkpoint)).merge_and_unload()
        from safetensors.torch import load_file

        state = load_file(str(Path(checkpoint) / "model.safetensors"))
        missing, unexpected = model.load_state_dict(state, strict=False)
        missing = [name for name in missing if not name.endswith("lm_head.weight")]  # tied embeddings are not saved
        if missing or unexpected:
            raise ValueError(f"{checkpoint} does not fit the base model: missing {missing[:3]}, unexpected "
                             f"{unexpected[:3]}; pass the model it was trained from")
        if getattr(model.config, "tie_word_embeddings", False):
            model.tie_weights()
        return model
