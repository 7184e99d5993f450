"""Image build step: make every weight the presets named on the command line use, locally, in the form they run
it: embedded models are joined and converted once into $SIMULAGENTS_CACHE (for llama.cpp presets, the re-quantized
GGUF this llama.cpp build runs and the tokenizer alone), Hugging Face ids must be in the image's Hugging Face cache.
A container then converts nothing and downloads nothing; a missing weight fails the build, naming the fix.
`--prune` then removes from the cache what the presets do not run (the parts a GGUF was joined from, its source):
the image keeps its weights once.

    python docker/prepare_weights.py eval_configs/alignatt4llm_low.yaml eval_configs/alignatt4llm_high.yaml
    python docker/prepare_weights.py --prune eval_configs/alignatt4llm_cpu.yaml eval_configs/alignatt4llm_cpu_low.yaml
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from backends.asr.whisper import resolve_whisper_model
from backends.models import resolve_model, resolve_tokenizer
from backends.sources import cache_dir
from common.config import read_yaml


def preset_weights(preset: str | Path) -> dict[str, Path]:
    """{knob: local path} for the MT model (on llama.cpp: the GGUF file it runs and its tokenizer; else the model
    directory), the recogniser and (qwen3) the forced aligner of `preset`."""
    config = read_yaml(preset)
    model = config.get("model", "embedded")
    found = {}
    if config.get("backend") == "llama_cpp":
        from backends.llama_cpp import weights_file

        found["gguf_weights"] = weights_file(model, config.get("gguf_weights", ""))
        found["tokenizer"] = resolve_tokenizer(model)
    else:
        found["model"] = resolve_model(model)
    if config.get("asr", "whisper") == "whisper":
        found["asr_model"] = resolve_whisper_model(config.get("asr_model", "embedded"))
    else:
        found["asr_model"] = resolve_model(config["asr_model"])
        found["aligner_model"] = resolve_model(config["aligner_model"])
    return found


def prune_cache(used: list[Path]) -> list[Path]:
    """Remove every file and folder of the cache's kinds (gguf/, tokenizers/, asr/, hf/) that none of `used` is or
    lies in; returns what was removed."""
    cache = cache_dir().resolve()
    used = [path.resolve() for path in used]
    removed = []
    for kind in sorted(path for path in cache.iterdir() if path.is_dir()):
        for entry in sorted(kind.iterdir()):
            if not any(entry == path or entry in path.parents for path in used):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
                removed.append(entry)
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="prepare_weights.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("presets", nargs="+", metavar="PRESET.yaml")
    parser.add_argument("--prune", action="store_true", help="then remove from $SIMULAGENTS_CACHE what they do not run")
    args = parser.parse_args(argv)
    used = []
    for preset in args.presets:
        for knob, path in preset_weights(preset).items():
            print(f"{preset}: {knob} -> {path}")
            used.append(path)
    if args.prune:
        for path in prune_cache([path for path in used if cache_dir().resolve() in path.resolve().parents]):
            print(f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
