"""SimulMask fine-tuning checkpoints: a directory with `simulmask_training.json` and either a peft LoRA adapter or
full weights."""
from __future__ import annotations

import json
from pathlib import Path

METADATA = "simulmask_training.json"


def save_checkpoint(model, out_dir: Path, metadata: dict) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)  # peft: the adapter only; a plain model: all weights
    (out_dir / METADATA).write_text(json.dumps(metadata, indent=2) + "\n")
    return out_dir


def read_metadata(checkpoint: str | Path) -> dict:
    path = Path(checkpoint) / METADATA
    if not path.is_file():
        raise FileNotFoundError(f"{checkpoint} is not a SimulMask fine-tuning checkpoint (no {METADATA}); pass a "
                                f"directory written by `python -m backends.finetune_simulmask`")
    return json.loads(path.read_text())


def apply_checkpoint(model, checkpoint: str | Path):
    """The base `model` with the checkpoint's weights: a LoRA adapter merged in, or the full weights loaded."""
    metadata = read_metadata(checkpoint)
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
