"""Image build step: find every weight the presets named on the command line use, locally: the embedded ones are
joined and converted once into $SIMULAGENTS_CACHE, Hugging Face ids must be in the image's Hugging Face cache. A
container then converts nothing and downloads nothing; a missing weight fails the build, naming the fix.

    python docker/prepare_weights.py eval_configs/alignatt4llm_low.yaml eval_configs/alignatt4llm_high.yaml
"""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from backends.asr.whisper import resolve_whisper_model
from backends.models import resolve_model


def preset_weights(preset: str | Path) -> dict[str, Path]:
    """{knob: local path} for the MT model (and, on llama.cpp, the GGUF file it runs), the recogniser and (qwen3)
    the forced aligner of `preset`."""
    config = yaml.safe_load(Path(preset).read_text())
    found = {"model": resolve_model(config.get("model", "embedded"))}
    if config.get("backend") == "llama_cpp":  # the GGUF it runs, re-quantized now if the preset asks for a format
        from backends.llama_cpp import weights_file

        found["gguf_weights"] = weights_file(config.get("model", "embedded"), config.get("gguf_weights", ""))
    if config.get("asr", "whisper") == "whisper":
        found["asr_model"] = resolve_whisper_model(config.get("asr_model", "embedded"))
    else:
        found["asr_model"] = resolve_model(config["asr_model"])
        found["aligner_model"] = resolve_model(config["aligner_model"])
    return found


def main(presets: list[str]) -> int:
    if not presets:
        print("usage: prepare_weights.py PRESET.yaml [...]", file=sys.stderr)
        return 2
    for preset in presets:
        for knob, path in preset_weights(preset).items():
            print(f"{preset}: {knob} -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
