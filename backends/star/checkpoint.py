"""A STAR checkpoint directory: star_config.json (model hyper-parameters and how it was trained),
model.safetensors and tokenizer.json. `load_star` refuses anything else with an error that says what is wrong."""
from __future__ import annotations

import json
from pathlib import Path

from backends.star.model import StarModel, StarModelConfig
from backends.star.text import TargetVocabulary

CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE = "star_config.json", "model.safetensors", "tokenizer.json"
TRAIN_COMMAND = "python -m backends.star.train"


class CheckpointError(ValueError):
    """A path that is not a usable STAR checkpoint directory."""


def save_star(model: StarModel, vocabulary: TargetVocabulary, out_dir: str | Path, training: dict | None = None) -> Path:
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({name: tensor.contiguous() for name, tensor in model.state_dict().items()}, str(out_dir / WEIGHTS_FILE))
    vocabulary.save(out_dir / TOKENIZER_FILE)
    metadata = {"model": model.config.to_dict(), "training": training or {}}
    (out_dir / CONFIG_FILE).write_text(json.dumps(metadata, indent=2) + "\n")
    return out_dir


def read_star_metadata(checkpoint: str | Path) -> dict:
    path = Path(checkpoint)
    if not path.is_dir():
        raise CheckpointError(f"STAR checkpoint {str(path)!r} is not a directory; train one with `{TRAIN_COMMAND}`")
    missing = [name for name in (CONFIG_FILE, WEIGHTS_FILE, TOKENIZER_FILE) if not (path / name).is_file()]
    if missing:
        raise CheckpointError(f"{path} is not a STAR checkpoint (missing {', '.join(missing)}); pass a directory "
                              f"written by `{TRAIN_COMMAND}`")
    try:
        metadata = json.loads((path / CONFIG_FILE).read_text())
        StarModelConfig(**metadata["model"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path / CONFIG_FILE} is not a valid STAR configuration: {error}") from None
    return metadata


def load_star(checkpoint: str | Path, device: str = "cpu") -> tuple[StarModel, TargetVocabulary, dict]:
    """(model in eval mode, target vocabulary, metadata) from a checkpoint directory."""
    from safetensors.torch import load_file

    metadata = read_star_metadata(checkpoint)
    path = Path(checkpoint)
    model = StarModel(StarModelConfig(**metadata["model"]))
    try:
        state = load_file(str(path / WEIGHTS_FILE), device=device)
        model.load_state_dict(state)
    except (RuntimeError, OSError) as error:
        raise CheckpointError(f"{path / WEIGHTS_FILE} does not fit its star_config.json: {str(error)[:300]}") from None
    vocabulary = TargetVocabulary.load(path / TOKENIZER_FILE)
    if len(vocabulary) != model.config.vocab_size:
        raise CheckpointError(f"{path}: tokenizer has {len(vocabulary)} pieces but the model {model.config.vocab_size}")
    return model.to(device).eval(), vocabulary, metadata
