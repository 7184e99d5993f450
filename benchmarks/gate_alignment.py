"""Does the AlignAtt gate stop where the gold word alignment says the source runs out, better than wait-k does?
Teacher-forced reference translations on source prefixes, scored against the alignment's supported prefix.

For a word-aligned pair and a cut of n source words, the supported prefix G(n) is the target words before the first
one aligned to a source word >= n. The reference is teacher-forced after the prefix supported at n - 1 (what an
ideal policy would have committed one word earlier), the gate scans the reference's next `max_new_tokens` tokens
with the preset's heads and settings (every read word accessible, as on text), and wait-k emits n - k words. Per
policy: words emitted beyond G(n) (a commit the source does not support yet) and words of G(n) withheld (latency).
A gate whose heads track the alignment beats every wait-k on both at once; one that mostly marks the last words
read lies on wait-k's curve. Head sets can be compared in one run (one capturing forward per cut serves all).

    .venv/bin/python benchmarks/gate_alignment.py --split calibration --max-pairs 120
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from backends.hf.calibrate import (PairSkipped, gold_source_words, locate_words, source_attention_rows,
                                   teacher_forced_prompt, whitespace_word_spans)
from common import datasets
from policies.alignatt import AlignAttParams, scan_draft


@dataclass(frozen=True)
class Cut:
    """One source prefix of one pair: the gold supported prefix and what each policy emits, in target words."""

    pair_id: int
    read: int  # n source words read
    committed: int  # target words before the draft (the supported prefix at n - 1)
    supported: int  # G(n)
    emitted: dict[str, int]


def supported_prefix(gold: dict[int, set[int]], target_word_spans: Sequence[tuple[int, int] | None],
                     whitespace_spans: Sequence[tuple[int, int]], read: int) -> int:
    """G(read): the whitespace target words that end before the first aligned target word with a gold source word
    at or past `read` (every word when there is none). `gold` maps indices of `target_word_spans` (the aligner's
    target words, located in the target text) to whitespace source-word indices."""
    stop = min((target_word_spans[index][0] for index, sources in gold.items()
                if target_word_spans[index] is not None and max(sources) >= read), default=None)
    return len(whitespace_spans) if stop is None else words_within(whitespace_spans, stop)


def words_within(whitespace_spans: Sequence[tuple[int, int]], end: int) -> int:
    """Whitespace target words that end at or before character `end`."""
    return sum(1 for _, word_end in whitespace_spans if word_end <= end)


def token_labels(token_spans: Sequence[tuple[int, int]], whitespace_spans: Sequence[tuple[int, int]],
                 supported: int) -> list[bool | None]:
    """Per draft token (character spans in the target text): True inside the first `supported` words, False on the
    first word past them, None after it (its attention depends on what the gate already let through)."""
    inside_end = whitespace_spans[supported - 1][1] if supported else 0
    past = whitespace_spans[supported] if supported < len(whitespace_spans) else None
    labels: list[bool | None] = []
    for start, end in token_spans:
        if end <= inside_end:
            labels.append(True)
        elif past is not None and start < past[1] and end > past[0]:
            labels.append(False)
        else:
            labels.append(None)
    return labels


def separation_auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counting one half (the Mann-Whitney AUC); nan if either is empty."""
    positives, negatives = np.asarray(positives, float), np.asarray(negatives, float)
    if not len(positives) or not len(negatives):
        return float("nan")
    above = (positives[:, None] > negatives[None, :]).sum() + 0.5 * (positives[:, None] == negatives[None, :]).sum()
    return float(above / (len(positives) * len(negatives)))


def cut_points(source_words: int, per_pair: int) -> list[int]:
    """Up to `per_pair` source prefixes (1 .. words - 1 read), evenly spread."""
    candidates = list(range(1, source_words))
    return datasets.evenly_spaced(candidates, per_pair)


def head_spec(spec: str) -> tuple[str, str, int]:
    """NAME=FILE[:K] -> (name, file, top k; 8 when not given)."""
    name, separator, rest = spec.partition("=")
    if not separator or not name or not rest:
        raise SystemExit(f"--heads takes NAME=FILE[:K] (e.g. shipped=backends/heads/x.json:8), got {spec!r}")
    path, colon, k = rest.rpartition(":")
    return (name, path, int(k)) if colon and k.isdigit() else (name, rest, 8)


def summarise(cuts: Sequence[Cut], policy: str) -> dict[str, float]:
    emitted = np.array([cut.emitted[policy] for cut in cuts])
    supported = np.array([cut.supported for cut in cuts])
    committed = np.array([cut.committed for cut in cuts])
    over = np.maximum(0, emitted - supported)
    under = np.maximum(0, supported - emitted)
    return {
        "emitted": float(np.mean(emitted - committed)),  # new words per step
        "over_words": float(np.mean(over)),
        "over_rate": float(np.mean(over > 0)),
        "under_words": float(np.mean(under)),
        "exact": float(np.mean(emitted == supported)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--alignments", type=Path, default=None,
                        help="word_alignments_<direction>.json (default: the shared data's, for --target-lang)")
    parser.add_argument("--target-lang", default="de")
    parser.add_argument("--split", choices=("calibration", "evaluation"), default="calibration")
    parser.add_argument("--max-pairs", type=int, default=120)
    parser.add_argument("--cuts-per-pair", type=int, default=6)
    parser.add_argument("--heads", action="append", default=None, metavar="NAME=FILE[:K]",
                        help="a head set to compare (repeatable); default: the model's shipped default, top 8")
    parser.add_argument("--borders", default="-1,-2,-3", help="gate borders to run (text: every read word accessible)")
    parser.add_argument("--frontier-min-mass", type=float, default=0.1, help="the text preset's soft frontier")
    parser.add_argument("--source-mass-thresholds", default="0",
                        help="tau_src values (Eq. 7: reject a token whose head-averaged mass on accessible source is "
                             "below it) to run with each border")
    parser.add_argument("--median-width", type=int, default=7)
    parser.add_argument("--waitk", default="1,2,3,4,5")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="the draft's length, as the text preset")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args(argv)

    from backends.heads import default_heads, load_heads
    from backends.hf.lm import CausalLM
    from backends.prompt import PromptBuilder
    from backends.models import EMBEDDED_MODEL, load_causal_lm
    from evaluation.cli import split_data_dir
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cpu import cpu_summary  # benchmarks/cpu.py

    direction = f"en-{args.target_lang}"
    alignments = args.alignments or datasets.shared_data_dir() / "word_alignments" / f"word_alignments_{direction}.json"
    pairs = datasets.load_alignments(alignments)
    talks = datasets.mcif_talks_by_full_index(split_data_dir(alignments, None))
    pairs = datasets.evenly_spaced(datasets.pairs_in_split(pairs, talks, args.split), args.max_pairs)

    head_sets = {}
    for spec in args.heads or ():
        name, path, top_k = head_spec(spec)
        head_sets[name] = load_heads(path, top_k).heads
    if not head_sets:
        head_sets["shipped top 8"] = default_heads(EMBEDDED_MODEL, "en", args.target_lang, 8).heads
    all_heads = sorted({head for heads in head_sets.values() for head in heads})
    column = {head: i for i, head in enumerate(all_heads)}

    model, tokenizer = load_causal_lm("embedded", dtype=args.dtype)
    lm = CausalLM(model, tokenizer)
    builder = PromptBuilder(tokenizer, "en", args.target_lang)
    borders = [int(b) for b in args.borders.split(",")]
    source_mass_thresholds = [float(t) for t in args.source_mass_thresholds.split(",")]
    waitks = [int(k) for k in args.waitk.split(",")]

    cuts: list[Cut] = []
    masses = {name: {True: [], False: []} for name in head_sets}  # head set -> supported? -> token source masses
    skipped = 0
    started = time.monotonic()
    for pair in pairs:
        target = pair.target_text.strip()
        source_words = pair.source_text.split()
        try:
            gold = gold_source_words(pair, 0.0)
        except ValueError:
            skipped += 1
            continue
        target_word_spans = locate_words(target, pair.target_words)
        whitespace_spans = whitespace_word_spans(target)
        for read in cut_points(len(source_words), args.cuts_per_pair):
            committed = supported_prefix(gold, target_word_spans, whitespace_spans, read - 1)
            supported = supported_prefix(gold, target_word_spans, whitespace_spans, read)
            if committed >= len(whitespace_spans):
                continue  # nothing left to decide at this cut
            try:
                prompt, offsets, target_start = teacher_forced_prompt(builder, source_words[:read], target)
            except PairSkipped:
                skipped += 1
                continue
            draft_from = target_start + (whitespace_spans[committed - 1][1] if committed else 0)
            positions = np.array([i for i, (start, end) in enumerate(offsets)
                                  if end > start and end > draft_from and start >= target_start])
            positions = positions[: args.max_new_tokens]
            if not len(positions):
                continue
            rows = source_attention_rows(lm, prompt, positions, all_heads)  # [T, H, S]
            draft_end = offsets[positions[-1]][1] - target_start
            labels = token_labels([(start - target_start, end - target_start) for start, end in
                                   (offsets[i] for i in positions)], whitespace_spans, supported)
            emitted: dict[str, int] = {}
            for name, heads in head_sets.items():
                selected = rows[:, [column[h] for h in heads], :]
                source_mass = selected.sum(axis=2).mean(axis=1)  # [T] head-averaged
                for label, mass in zip(labels, source_mass):
                    if label is not None:
                        masses[name][label].append(float(mass))
                for border, threshold in itertools.product(borders, source_mass_thresholds):
                    params = AlignAttParams(border=border, median_width=args.median_width,
                                            frontier_min_mass=args.frontier_min_mass, source_mass_threshold=threshold)
                    accepted = scan_draft(selected, prompt.source_token_word, read, params).accepted_tokens
                    end = offsets[positions[accepted - 1]][1] - target_start if accepted else draft_from - target_start
                    emitted[f"AlignAtt {name}, border {border}, tau_src {threshold:g}"] = max(
                        committed, words_within(whitespace_spans, end))
            for k in waitks:
                emitted[f"wait-{k}"] = max(committed, min(read - k, words_within(whitespace_spans, draft_end)))
            cuts.append(Cut(pair.pair_id, read, committed, supported, emitted))
    elapsed = time.monotonic() - started

    print(f"# {len(pairs)} pairs of the {args.split} split ({direction}), {len(cuts)} cuts, {skipped} skipped; "
          f"{elapsed:.0f} s; {cpu_summary()}; {args.dtype}")
    print(f"# supported words per cut (G(n) - committed): {np.mean([c.supported - c.committed for c in cuts]):.2f}")
    print("| policy | new words / step | words past G(n) | steps past G(n) | words of G(n) withheld | exact |")
    print("|---|---|---|---|---|---|")
    for policy in cuts[0].emitted if cuts else ():
        s = summarise(cuts, policy)
        print(f"| {policy} | {s['emitted']:.2f} | {s['over_words']:.2f} | {s['over_rate']:.1%} | "
              f"{s['under_words']:.2f} | {s['exact']:.1%} |")
    for name, by_label in masses.items():
        print(f"# {name}: head-averaged source mass, draft tokens inside G(n) {np.mean(by_label[True]):.3f} "
              f"({len(by_label[True])}), of the first word past it {np.mean(by_label[False]):.3f} "
              f"({len(by_label[False])}); AUC {separation_auc(by_label[True], by_label[False]):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
