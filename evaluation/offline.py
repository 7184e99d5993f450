"""The offline rows: the agent's own model translating each whole source sentence (its final mode, no policy), the
quality ceiling its simultaneous runs are read against; for a speech cascade also the offline cascade, the same model
translating its recogniser's transcript of each whole segment. Run as `python -m evaluation.offline`."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import numpy as np

from agents.core import StreamingTranslator
from agents.systems.config import DraftingConfig, LLMTranslatorConfig, SpeechCascadeKnobs, WaitkConfig
from common.config import ConfigError, build_config, language_arg, read_yaml
from common.stream import SourceWord
from common.synthetic_speech import SAMPLE_RATE, segment_audio
from policies.transcript import first_loop_start

PIECE_SECONDS = 28.0  # a recogniser hears at most 30 s at once; a longer segment is heard in equal pieces


def offline_config(config) -> WaitkConfig:
    """The config of the offline translator: `config`'s model, prompt and drafting runtime (backend, GGUF weights,
    threads), so the offline row runs the very weights and arithmetic its streamed rows run."""
    if not isinstance(config, LLMTranslatorConfig):
        raise ConfigError(f"no offline row for {type(config).__name__}: it is not an LLM translator's config")
    own = {f.name for f in dataclasses.fields(config)}
    shared = [f.name for f in dataclasses.fields(DraftingConfig) if f.name in own]
    return WaitkConfig(**{name: getattr(config, name) for name in shared})


def offline_translator(config) -> StreamingTranslator:
    """A translator that, flushed with a whole sentence, gives the same model's whole-sentence translation."""
    from agents.systems.llm import WaitkTranslator

    return WaitkTranslator.from_config(offline_config(config))


def translate_whole_sentences(translator: StreamingTranslator, sentences, out) -> None:
    """One line of `out` per sentence, written as soon as it is translated."""
    for sentence in sentences:
        translator.reset()
        translator.flush([SourceWord(word) for word in sentence.split()])
        out.write(translator.target_text + "\n")
        out.flush()


def transcribe_segments(recognizer, segments: Path, language: str, written: TextIO | None = None) -> Iterator[str]:
    """The recogniser's transcript of each segment of an audio-segments YAML, heard whole, with a looping hypothesis
    cut before its second copy as the cascade's transcript commit cuts it (each also written to `written`)."""
    for _, heard in segment_audio(segments):
        words: list[str] = []
        for piece in np.array_split(heard, max(1, int(np.ceil(len(heard) / (PIECE_SECONDS * SAMPLE_RATE))))):
            words += [word.text for word in recognizer.transcribe(piece, language, context=" ".join(words))]
        transcript = " ".join(words[:first_loop_start(words, "word")])
        if written is not None:
            written.write(transcript + "\n")
            written.flush()
        yield transcript


def main(argv: list[str] | None = None) -> int:
    from evaluation.runs import agent_class
    from agents.simulstream_cli import parse_overrides

    parser = argparse.ArgumentParser("python -m evaluation.offline", description=__doc__)
    parser.add_argument("--agent", required=True, help="MODULE:CLASS whose config (and so model) to use")
    parser.add_argument("--config", help="the agent's YAML")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--source", type=Path, help="one source sentence per line")
    parser.add_argument("--segments", type=Path, help="instead of --source: an audio-segments YAML whose segments the "
                                                      "agent's recogniser transcribes whole (the offline cascade)")
    parser.add_argument("--transcripts", type=Path, help="with --segments: write the transcripts here")
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
        if (args.source is None) == (args.segments is None):
            raise ConfigError("give either --source (sentences) or --segments (speech for the recogniser)")
        if args.segments is not None and not isinstance(config, SpeechCascadeKnobs):
            raise ConfigError(f"--segments needs a speech cascade agent; {args.agent} has no recogniser")
        translator = offline_translator(config)
        if args.segments is not None:
            from backends.asr import RecognizerError, load_recognizer

            try:
                recognizer = load_recognizer(**config.recognizer_options())
            except RecognizerError as error:
                raise ConfigError(str(error)) from None
    except (ConfigError, ValueError, FileNotFoundError) as error:
        print(f"offline: error: {error}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as out:
        if args.source is not None:
            translate_whole_sentences(translator, args.source.read_text(encoding="utf-8").splitlines(), out)
            return 0
        with contextlib.ExitStack() as files:
            written = files.enter_context(open(args.transcripts, "w", encoding="utf-8")) if args.transcripts else None
            transcripts = transcribe_segments(recognizer, args.segments, config.source_lang, written)
            translate_whole_sentences(translator, transcripts, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
