"""The `simulagents` console script: one argparse subcommand per task, each an `add_<name>_arguments` function and
a `<name>_command(args) -> exit code` function, listed in SUBCOMMANDS (add a row there to add a subcommand)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from agents import config_reference
from evaluation import command as evaluation
from evaluation.runs import EvaluationError
from common import datasets
from common.config import language_arg


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- calibrate-heads -----------------------------------------------------------------------------------------------

def add_calibrate_heads_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec for backends.models.load_causal_lm "
                        "(a local HF directory, 'embedded', a .gguf file, or a repo id in the local HF cache)")
    parser.add_argument("--alignments", required=True, type=Path, help="word-alignment JSON (word_alignments_*.json)")
    parser.add_argument("--source-lang", type=language_arg, default="en", help="an ISO code or name (default: en)")
    parser.add_argument("--target-lang", type=language_arg, required=True, help="an ISO code or name, e.g. de")
    parser.add_argument("--split", choices=datasets.SPLITS, default="calibration",
                        help="MCIF talk split of the pairs to use (default: calibration; 'all' uses every pair and is "
                             "the only choice for alignments that are not MCIF en-X lines)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="MCIF dev data (line_ids.txt, audio-segments.yaml) defining the split; default: "
                             "../mcif_dev next to the alignments' folder, else the shared data directory")
    parser.add_argument("--max-pairs", type=int, default=None,
                        help="use at most N pairs, spread evenly over the split (default: all)")
    parser.add_argument("--min-confidence", type=float, default=0.0, help="ignore alignments below this confidence")
    parser.add_argument("--top-k", type=int, default=8,
                        help="heads to print and to record as the recommended selection (the file ranks all heads)")
    parser.add_argument("--dtype", default="float32", help="float32 (default), bfloat16 or float16")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--model-name", default=None,
                        help="model name written into the head file (default: the spec; "
                             "'embedded' is recorded as embedded:qwen2.5-coder-0.5b-instruct)")
    parser.add_argument("--instruction-position", default="after_source",
                        help="the prompt layout to score the heads under, as the translators' instruction_position: "
                             "after_source (default, paper Eq. 1) or before_source")
    parser.add_argument("--out", required=True, type=Path, help="head file to write (JSON)")


def split_data_dir(alignments: Path, data_dir: Path | None) -> Path:
    """Where the MCIF files that define the split live (see --data-dir)."""
    if data_dir is not None:
        return data_dir
    beside = alignments.resolve().parent.parent / "mcif_dev"
    return beside if beside.is_dir() else datasets.shared_data_dir()


def select_pairs(args: argparse.Namespace) -> list[datasets.AlignedPair]:
    pairs = datasets.load_alignments(args.alignments)
    direction = f"{args.source_lang}-{args.target_lang}"
    other = sorted({p.direction for p in pairs if p.direction and p.direction != direction})
    if other:
        raise ValueError(f"{args.alignments} holds {', '.join(other)} pairs, not {direction}; check the languages")
    if args.split != "all":
        if args.source_lang != "en":
            raise ValueError(f"the MCIF {args.split} split is defined for en-X alignments only; use --split all")
        talks = datasets.mcif_talks_by_full_index(split_data_dir(args.alignments, args.data_dir))
        pairs = datasets.pairs_in_split(pairs, talks, args.split)
    if args.max_pairs is not None and args.max_pairs < 1:
        raise ValueError(f"--max-pairs must be >= 1, got {args.max_pairs}")
    selected = datasets.evenly_spaced(pairs, args.max_pairs)
    if not selected:
        raise ValueError(f"no pairs of {args.alignments} are in the {args.split} split")
    return selected


def recorded_model_name(spec: str, override: str | None) -> str:
    from backends.models import embedded_spec

    return override or embedded_spec(spec)


def progress_printer(started: float, every: int) -> Callable[[int, int], None]:
    def report(done: int, total: int) -> None:
        if done == total or done % every == 0:
            _print(f"  {done}/{total} pairs, {time.monotonic() - started:.0f} s")
    return report


def calibrate_heads_command(args: argparse.Namespace) -> int:
    from backends.hf.calibrate import calibrate
    from backends.hf.lm import CausalLM
    from backends.prompt import instruction_position_error
    from backends.models import load_causal_lm

    if args.top_k < 1:
        raise ValueError(f"--top-k must be >= 1, got {args.top_k}")
    if error := instruction_position_error(args.instruction_position):  # before the model loads
        raise ValueError(error.replace("instruction_position", "--instruction-position", 1))
    pairs = select_pairs(args)
    split = datasets.describe_split(args.split)
    _print(f"calibrating {args.model} {args.source_lang}-{args.target_lang} on {len(pairs)} pairs ({split})")
    started = time.monotonic()
    model, tokenizer = load_causal_lm(args.model, dtype=args.dtype, device=args.device)
    lm = CausalLM(model, tokenizer)
    _print(f"model loaded in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    result = calibrate(
        lm, pairs, args.source_lang, args.target_lang, recorded_model_name(args.model, args.model_name),
        min_confidence=args.min_confidence, calibration_split=split,
        instruction_position=args.instruction_position, progress=progress_printer(started, max(1, len(pairs) // 20)),
    )
    elapsed = time.monotonic() - started
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result.save(args.out, split=args.split, alignments=args.alignments.name, max_pairs=args.max_pairs,
                recommended_top_k=args.top_k)
    meta = result.head_set.metadata
    print(f"{meta['used_pairs']} pairs ({meta['skipped_pairs']} skipped), {meta['used_target_tokens']} aligned "
          f"target tokens, {elapsed:.0f} s; mean TS over all {result.ts_matrix.size} heads: {result.ts_matrix.mean():.4f}")
    for (layer, head), score in zip(result.head_set.heads[: args.top_k], result.head_set.scores):
        print(f"  layer {layer:3d} head {head:3d}  TS {score:.4f}")
    for reason, count in meta["skipped_reasons"].items():
        print(f"  skipped {count}: {reason}")
    print(f"wrote {args.out}")
    return 0


# -- prepare-mcif --------------------------------------------------------------------------------------------------

def add_prepare_mcif_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target-lang", type=language_arg, required=True,
                        help="reference language (de, it, zh; or its name)")
    parser.add_argument("--split", choices=datasets.SPLITS, default="evaluation",
                        help="MCIF talk split (default: evaluation; calibration talks are for head calibration only)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help=f"shared data directory (default: ${datasets.DATA_DIR_VARIABLE} or ../shared/data)")
    parser.add_argument("--out", required=True, type=Path, help="directory for source.txt and target.txt")


def prepare_mcif_command(args: argparse.Namespace) -> int:
    data_dir = args.data_dir if args.data_dir is not None else datasets.shared_data_dir()
    lines = datasets.mcif_split(datasets.load_mcif(data_dir, args.target_lang), args.split)
    source_path, target_path = datasets.write_simuleval_files(lines, args.out)
    print(f"{len(lines)} lines ({datasets.describe_split(args.split)})")
    print(f"source: {source_path}")
    print(f"target: {target_path}")
    return 0


# -- entry point ---------------------------------------------------------------------------------------------------

Subcommand = tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
SUBCOMMANDS: tuple[Subcommand, ...] = (
    ("calibrate-heads", "rank every attention head by translation score on word-aligned pairs",
     add_calibrate_heads_arguments, calibrate_heads_command),
    ("prepare-mcif", "write MCIF dev source/reference files for SimulEval",
     add_prepare_mcif_arguments, prepare_mcif_command),
    ("eval", "run an agent on a test set (sweeping operating points) and score it with the official tools",
     evaluation.add_eval_arguments, evaluation.eval_command),
    ("synth-set", "speak a text file on an audio-segments timeline with espeak-ng: a long-form speech test set",
     evaluation.add_synth_set_arguments, evaluation.synth_set_command),
    ("config-reference", "write the configuration reference (every knob: type, default, help, agents) from the code",
     config_reference.add_config_reference_arguments, config_reference.config_reference_command),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simulagents", description="Simultaneous translation agents on LLMs.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text, add_arguments, run in SUBCOMMANDS:
        subparser = subparsers.add_parser(name, help=help_text, description=help_text)
        add_arguments(subparser)
        subparser.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, FileNotFoundError, EvaluationError) as error:  # bad input: one clear line, no traceback
        _print(f"simulagents {args.command}: error: {error}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
