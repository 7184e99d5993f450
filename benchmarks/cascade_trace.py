"""Every step of one talk through a speech cascade agent, to read what its policy did, not only its scores: one JSON
line per step and a summary of where the translator's segments and the committed sentences disagree.

    python benchmarks/cascade_trace.py --wav TALK.wav --out trace.jsonl [--agent agents.alignatt4llm:WaitkAgent]
        [--config eval_configs/waitk_cpu.yaml] [--set KEY=VALUE ...] [--minutes M] [--unpunctuated]

A live line: the stream time, the sentence's source words as the translator got them, how many were accessible,
the target already emitted for the sentence, the draft and the units this step emitted. A final line: the committed
sentence, its target before, the final draft (and its retries' drafts, if the guard cut it) and what it emitted.
The summary counts the sentences committed without a sentence end, and those committed behind what the translator
had already read (its last live step accessed words after the committed sentence's last one: the next segment
starts on words it may already have translated), and the longest stretch of stream time with nothing emitted.
`--unpunctuated` gives the cascade a recogniser that writes neither case nor punctuation (see
benchmarks/sentence_boundaries.py). Three fixes of 2026-11-27 came from such traces
(docs/alignatt4llm_quality.md).
"""
from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from agents.systems.events import Step
from agents.simulstream_cli import CommandError, agent_class, processor_config
from common.audio import AudioError, decode_audio_16k
from common.synthetic_speech import SAMPLE_RATE
from common.wer import normalise_words
from policies.transcript import ends_sentence
from policies.units import join_units


def words_read_past(live_words: list[str], sentence: list[str]) -> int:
    """How many of the accessible live words lie after the last word of the committed sentence (aligned by their
    normalised text, so a reworded or re-punctuated word still lines up)."""
    def normalised(words: list[str]) -> list[str]:
        return [" ".join(normalise_words(word)) for word in words]

    matcher = difflib.SequenceMatcher(a=normalised(live_words), b=normalised(sentence), autojunk=False)
    last = max((block.a + block.size for block in matcher.get_matching_blocks() if block.size), default=0)
    return len(live_words) - last


class Tracer:
    """Wraps the cascade's segment translator: each `revise` and `finish_segment` call becomes one record."""

    def __init__(self, cascade, out):
        self.cascade, self.out = cascade, out
        self.translator = cascade.translator
        self.records: list[dict] = []
        self.added: list[Step] = []  # the steps the translator reported during the call being traced
        self.translator.observers.append(self._observe)
        revise, finish = self.translator.revise, self.translator.finish_segment
        self.translator.revise = lambda words, now=None, hold_back=0.0: self._traced(
            "live", words, revise, words, now, hold_back)
        self.translator.finish_segment = lambda words: self._traced("final", words, finish, words)

    def _observe(self, event) -> None:
        if isinstance(event, Step) and not event.dropped:
            self.added.append(event)

    def _text(self, units) -> str:
        return join_units(list(units), self.translator.target_unit)

    def _traced(self, kind: str, words, call, *args):
        """`call(*args)`, recorded with the steps it reported."""
        before = self._text(self.translator.segment_units)
        self.added = []
        emission = call(*args)
        added = self.added
        step = added[0] if added else None
        record = {"kind": kind, "now": round(self.cascade.now, 3), "words": [w.text for w in words]}
        if kind == "live":
            record["accessible"] = step.accessible_words if step else None
        record.update({"target_before": before, "draft": step.draft_text if step else None,
                       "emitted": self._text(emission.new_units)})
        if emission.joins_last_unit:  # "emitted" goes on inside target_before's last word ("Open" + "AI eine")
            record["joins_last_unit"] = True
        if len(added) > 1:  # a final draft cut as degenerate and drafted again (LLMTranslator._next_attempt)
            record["retry_drafts"] = [retry.draft_text for retry in added[1:]]
        self.records.append(record)
        self.out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return emission

    def summary(self) -> str:
        finals = [r for r in self.records if r["kind"] == "final"]
        no_end = sum(1 for r in finals if r["words"] and not ends_sentence(r["words"][-1]))
        behind, last_live = [], None
        for record in self.records:
            if record["kind"] == "live":
                if record["accessible"] is not None:
                    last_live = record
                continue
            if last_live is not None:
                past = words_read_past(last_live["words"][: last_live["accessible"]], record["words"])
                if past:
                    behind.append(past)
            last_live = None
        lives = [r for r in self.records if r["kind"] == "live"]
        emitted_at = [0.0, *(r["now"] for r in self.records if r["emitted"])]
        silent = max((later - earlier for earlier, later in zip(emitted_at, emitted_at[1:])), default=0.0)
        return (f"{len(lives)} live steps, {sum(1 for r in lives if r['emitted'])} of them emitted; {len(finals)} "
                f"sentences committed, {no_end} without a sentence end; {len(behind)} committed behind what the "
                f"translator had read ({sum(behind)} words read past their end, at most {max(behind, default=0)}); "
                f"longest without an emission: {silent:.0f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wav", type=Path, required=True, help="the talk (any format ffmpeg reads)")
    parser.add_argument("--out", type=Path, required=True, help="the JSON-lines trace to write")
    parser.add_argument("--agent", default="agents.alignatt4llm:Agent", help="a speech cascade agent, MODULE:CLASS")
    parser.add_argument("--config", help="its YAML (default: the agent's embedded CPU preset)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--minutes", type=float, default=0.0, help="only the talk's first minutes (0: all)")
    parser.add_argument("--unpunctuated", action="store_true", help="a recogniser that writes neither case nor "
                                                                    "punctuation")
    args = parser.parse_args(argv)
    try:
        cls = agent_class(args.agent)
        values = processor_config(args.agent, args.config, args.set)
        config = cls.parse_config(SimpleNamespace(**values))
        audio = decode_audio_16k(args.wav)
    except (CommandError, AudioError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    cascade = cls.build_translator(config, cls.shared(config))
    if not hasattr(cascade, "translator") or not hasattr(cascade.translator, "observers"):
        print(f"error: {args.agent} is not a speech cascade over a segment translator", file=sys.stderr)
        return 1
    if args.minutes:
        audio = audio[: int(args.minutes * 60 * SAMPLE_RATE)]
    if args.unpunctuated:
        from sentence_boundaries import Unpunctuated

        cascade.recognizer = Unpunctuated(cascade.recognizer)
    chunk = int(round(float(values["speech_chunk_size"]) * SAMPLE_RATE))  # what simulstream feeds per call
    with args.out.open("w", encoding="utf-8") as out:
        tracer = Tracer(cascade, out)
        for start in range(0, len(audio), chunk):
            cascade.feed_audio(audio[start:start + chunk])
        cascade.flush()
    print(f"{args.wav.name}: {len(audio) / SAMPLE_RATE:.0f} s in {chunk / SAMPLE_RATE:g} s chunks, {args.agent}")
    print(tracer.summary())
    print(f"trace: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
