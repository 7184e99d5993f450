"""The offline row: the agent's own model translating each whole source sentence (its final mode, no policy), the
quality ceiling its simultaneous runs are read against. Run as `python -m agents.evaluation.offline`."""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from agents.core import StreamingTranslator
from agents.systems.config import LLMTranslatorConfig, WaitkConfig
from common.config import ConfigError, build_config, language_arg, read_yaml
from common.stream import SourceWord


def offline_translator(config) -> StreamingTranslator:
    """A translator that, flushed with a whole sentence, gives the same model's whole-sentence translation."""
    if not isinstance(config, LLMTranslatorConfig):
        raise ConfigError(f"no offline row for {type(config).__name__}: it is not an LLM translator's config")
    from agents.systems.llm import WaitkTranslator

    shared = {f.name for f in dataclasses.fields(LLMTranslatorConfig)}
    llm_settings = {name: getattr(config, name) for name in shared}
    return WaitkTranslator.from_config(WaitkConfig(**llm_settings))


def translate_whole_sentences(translator: StreamingTranslator, sentences, out) -> None:
    """One line of `out` per sentence, written as soon as it is translated."""
    for sentence in sentences:
        translator.reset()
        translator.flush([SourceWord(word) for word in sentence.split()])
        out.write(translator.target_text + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    from agents.evaluation.runs import agent_class
    from agents.simulstream_cli import parse_overrides

    parser = argparse.ArgumentParser("python -m agents.evaluation.offline", description=__doc__)
    parser.add_argument("--agent", required=True, help="MODULE:CLASS whose config (and so model) to use")
    parser.add_argument("--config", help="the agent's YAML")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--source", required=True, type=Path, help="one source sentence per line")
    parser.add_argument("--source-lang", type=language_arg, required=True)
    parser.add_argument("--target-lang", type=language_arg, required=True)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    try:
        config_class = agent_class(args.agent).config_class
        names = {f.name for f in dataclasses.fields(config_class)}
        values = {**(read_yaml(args.config) if args.config else {}), **parse_overrides(args.set),
                  "source_lang": args.source_lang, "target_lang": args.target_lang}
        # Harness-only keys (chunk size, ASR settings of a cascade) do not change the offline translation.
        config = build_config(config_class, {k: v for k, v in values.items() if k in names})
        translator = offline_translator(config)
    except (ConfigError, ValueError) as error:
        print(f"offline: error: {error}", file=sys.stderr)
        return 2
    sentences = args.source.read_text(encoding="utf-8").splitlines()
    with open(args.out, "w", encoding="utf-8") as out:
        translate_whole_sentences(translator, sentences, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
