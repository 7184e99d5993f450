"""How much the runs of one `simulagents eval --out` folder can be told apart: sacrebleu's paired bootstrap
resampling (Koehn 2004; Moses' bootstrap-hypothesis-difference-significance.pl) of BLEU and chrF over the lines.

    .venv/bin/python -m evaluation.paired_bootstrap runs/eval-avx2 --baseline wait-3-cpu-low-avx2_default

Prints, per run, the corpus score, the bootstrap mean with its 95% interval, and the p-value of its difference from
the baseline run (the first line); BLEU tokenizes as the report does for the runs' target language. Speech runs are
compared on OmniSTEval's output resegmented onto the reference lines, text runs on SimulEval's instances, offline
rows on their sentences; every run must cover the same lines.
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Sequence

from evaluation.provenance import differences
from evaluation.runs import EvaluationError, finished_runs, run_lines
from evaluation.scoring import quality_metrics

SAMPLES = 1000  # sacrebleu's default for the paired bootstrap
SEED = 12345  # sacrebleu's default seed, so two calls draw the same resamples


def paired_bootstrap(systems: dict[str, list[str]], references: Sequence[str], baseline: str, target_lang: str,
                     samples: int = SAMPLES) -> list[dict]:
    """One row per system, the baseline first: {system, metric: (score, mean, half-width of the 95% interval,
    p-value against the baseline or None)} for BLEU and chrF, from sacrebleu's paired bootstrap (`bs`) test."""
    from sacrebleu.significance import PairedTest

    if baseline not in systems:
        raise EvaluationError(f"baseline {baseline!r} is not among the runs: {', '.join(systems)}")
    for name, hypotheses in systems.items():
        if len(hypotheses) != len(references):
            raise EvaluationError(f"{name} has {len(hypotheses)} lines for {len(references)} references: compare "
                                  "runs of one test set")
    named = [(baseline, systems[baseline])] + [(n, h) for n, h in systems.items() if n != baseline]
    metrics = quality_metrics(target_lang)
    previous_seed = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(SEED)  # sacrebleu reads its seed from the environment only
    try:
        _, results = PairedTest(named, metrics, [list(references)], test_type="bs", n_samples=samples)()
    finally:
        if previous_seed is None:
            os.environ.pop("SACREBLEU_SEED")
        else:
            os.environ["SACREBLEU_SEED"] = previous_seed
    results.pop("System")
    rows = []
    for index, (name, _) in enumerate(named):
        row = {"system": name}
        for metric, column in zip(metrics, results.values()):  # sacrebleu names them by signature ("chrF2")
            result = column[index]
            row[metric] = (result.score, result.mean, result.ci, result.p_value)
        rows.append(row)
    return rows


def format_rows(rows: list[dict]) -> str:
    width = max(len("run"), *(len(row["system"]) for row in rows))
    lines = [f"{'run':<{width}} {'BLEU (mean ± 95%)':>24} {'p':>6} {'chrF (mean ± 95%)':>24} {'p':>6}"]
    for row in rows:
        cells = []
        for metric in ("BLEU", "chrF"):
            score, mean, half_width, p_value = row[metric]
            cells.append(f"{score:6.2f} ({mean:5.2f} ± {half_width:4.2f})")
            cells.append("  base" if p_value is None else f"{p_value:6.4f}")
        lines.append(f"{row['system']:<{width}} {cells[0]:>24} {cells[1]:>6} {cells[2]:>24} {cells[3]:>6}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a `simulagents eval --out` folder")
    parser.add_argument("--baseline", required=True, help="the run every other run is compared with (a folder "
                        "name under OUT/runs, e.g. wait-3_default)")
    parser.add_argument("--runs", nargs="+", help="only these runs (default: every finished run in OUT)")
    parser.add_argument("--samples", type=int, default=SAMPLES)
    args = parser.parse_args(argv)
    try:
        runs = finished_runs(args.out)
        chosen = list(dict.fromkeys([args.baseline] + (args.runs or list(runs))))
        missing = [name for name in chosen if name not in runs]
        if missing:
            raise EvaluationError(f"no finished run {', '.join(missing)} in {args.out}; there are: {', '.join(runs)}")
        lines = {name: run_lines(runs[name]) for name in chosen}
        references = lines[args.baseline][1]
        for name, (_, run_references, _) in lines.items():
            if run_references != references:
                raise EvaluationError(f"{name} was scored against other references than {args.baseline}: a paired "
                                      "test needs runs of one test set")
        target_lang = json.loads((runs[args.baseline] / "result.json").read_text())["target_lang"]
        rows = paired_bootstrap({name: hypotheses for name, (hypotheses, _, _) in lines.items()}, references,
                                args.baseline, target_lang, args.samples)
    except EvaluationError as error:
        raise SystemExit(f"error: {error}") from None
    print(f"{len(references)} lines, {args.samples} paired bootstrap resamples (sacrebleu, seed {SEED})")
    print(format_rows(rows))
    unlike = differences({name: runs[name] for name in chosen})
    if unlike:
        print("Not the same code, CPU or packages (environment.json), so a difference may not be the policy's:")
        print("\n".join("  " + line for line in unlike))


if __name__ == "__main__":
    main()
