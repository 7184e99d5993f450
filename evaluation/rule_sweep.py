"""Measure each draft rule alone on text runs without translating every line again: a rule that found nothing in a
line (the policy log's `fired_RULE`) cannot change it, so a run with the rule off needs only the lines where it did.

    # the lines where each rule fired in an all-on run, as source and reference files
    .venv/bin/python -m evaluation.rule_sweep select runs/eval-text-de/runs/alignatt-text_default \\
        --rules loop copy --out runs/eval-text-de-lines
    # run each subset with its rule off (simulagents eval --source ... --reference ... --set draft_filters=THE+OTHERS),
    # then put its lines back into the all-on run's hypotheses: one run folder per rule that paired_bootstrap.py and
    # read_text_outputs.py read like any other
    .venv/bin/python -m evaluation.rule_sweep splice runs/eval-text-de/runs/alignatt-text_default \\
        runs/eval-text-de-loop/runs/x_default runs/eval-text-de-lines/loop.lines --name loop-off --out runs/eval-spliced

SimulEval's text runs translate each line from a fresh state, so lines are independent (`--controls N` adds N lines
outside the set, which must come out unchanged). `select --union NAME` writes one set, the lines where any of
`--rules` fired or any policy-log count of `--counts` is not zero (to run newer code only where an older run's rules
could have changed a line). A spliced text run keeps each line's delays, and SimulEval's own scorers score it again
(BLEU, chrF, LAAL, AL, DAL, AP).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from evaluation.data import latency_unit
from evaluation.runs import POLICY_LOG, run_lines, simuleval_scorers
from evaluation.report import RESULT_FILE, Result
from evaluation.scoring import corpus_quality, read_scores_tsv

INSTANCES = Path("simuleval") / "instances.log"


def policy_rows(run: Path) -> list[dict]:
    """The policy log of `run`, one row per line (checked against the run's lines)."""
    rows = [json.loads(line) for line in (run / POLICY_LOG).read_text(encoding="utf-8").splitlines()]
    hypotheses, _, _ = run_lines(run)
    if len(rows) != len(hypotheses):
        raise SystemExit(f"{run}: {len(rows)} policy-log lines for {len(hypotheses)} lines (one per line expected)")
    return rows


def fired_lines(run: Path, rule: str) -> list[int]:
    """Indices of the lines where `rule` found something (a rule newer than the run: none)."""
    return [i for i, row in enumerate(policy_rows(run)) if row.get(f"fired_{rule}")]


def select(run: Path, rules: list[str], out: Path, controls: int, union: str | None = None,
           counts: tuple[str, ...] = ()) -> None:
    _, references, sources = run_lines(run)
    rows = policy_rows(run)
    keys = {rule: [f"fired_{rule}"] for rule in rules} if not union else \
        {union: [f"fired_{rule}" for rule in rules] + list(counts)}
    out.mkdir(parents=True, exist_ok=True)
    for name, names in keys.items():
        fired = {i for i, row in enumerate(rows) if any(row.get(key) for key in names)}
        others = [i for i in range(len(sources)) if i not in fired]
        lines = sorted({*fired, *(others[::max(1, len(others) // controls)][:controls] if controls else [])})
        for suffix, texts in (("lines", [str(i) for i in lines]), ("src", [sources[i] for i in lines]),
                              ("ref", [references[i] for i in lines])):
            (out / f"{name}.{suffix}").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        print(f"{name}: {len(lines)} lines")


def instance_rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / INSTANCES).read_text(encoding="utf-8").splitlines() if line.strip()]


def simuleval_scores(output: Path, target_lang: str) -> dict[str, float]:
    """SimulEval's own scores of the instances log in `output` (its `--score-only`), written to its scores.tsv as a
    run's are; Chinese by characters, as the runs score it."""
    from simuleval import options
    from simuleval.evaluator.evaluator import SentenceLevelEvaluator

    import agents.harness.simuleval  # noqa: F401  (registers the CHRF quality scorer, as the runs' --user-dir does)

    parser = options.general_parser()
    for add in (options.add_evaluator_args, options.add_scorer_args, options.add_dataloader_args):
        add(parser)
    args = parser.parse_args(["--score-only", "--output", str(output), *simuleval_scorers(latency_unit(target_lang))])
    SentenceLevelEvaluator.from_args(args).dump_results()
    return read_scores_tsv(output / "scores.tsv")


def splice(base: Path, subset: Path, lines_file: Path, name: str, out: Path) -> None:
    hypotheses, references, sources = run_lines(base)
    subset_hypotheses, _, _ = run_lines(subset)
    lines = [int(line) for line in lines_file.read_text().split()]
    if len(lines) != len(subset_hypotheses):
        raise SystemExit(f"{subset}: {len(subset_hypotheses)} lines for the {len(lines)} of {lines_file}")
    spliced = list(hypotheses)
    for index, hypothesis in zip(lines, subset_hypotheses):
        spliced[index] = hypothesis
    run = out / "runs" / name
    run.mkdir(parents=True, exist_ok=True)
    shutil.copy(subset / "environment.json", run / "environment.json")
    base_result = Result.load(base / RESULT_FILE)
    if (base / INSTANCES).exists() and (subset / INSTANCES).exists():  # text runs: each line's delays come along
        rows = instance_rows(base)
        for index, row in zip(lines, instance_rows(subset)):
            rows[index] = {**row, "index": rows[index]["index"]}
        (run / INSTANCES).parent.mkdir(exist_ok=True)
        shutil.copy(base / INSTANCES.parent / "config.yaml", run / INSTANCES.parent / "config.yaml")
        (run / INSTANCES).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        scores = simuleval_scores(run / INSTANCES.parent, base_result.target_lang)
    else:
        for file, texts in (("offline.txt", spliced), ("reference.txt", references), ("source.txt", sources)):
            (run / file).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        scores = corpus_quality(spliced, references, base_result.target_lang)
    if (base / POLICY_LOG).exists() and (subset / POLICY_LOG).exists():  # so `select` reads the spliced run too
        logs = [(r / POLICY_LOG).read_text(encoding="utf-8").splitlines() for r in (base, subset)]
        for index, row in zip(lines, logs[1]):
            logs[0][index] = row
        (run / POLICY_LOG).write_text("".join(row + "\n" for row in logs[0]), encoding="utf-8")
    # a run's result, so the folder's report (`simulagents eval --out`) reads it like any other
    Result({**base_result.run, "system": name}, base_result.dataset, base_result.target_lang, scores,
           (f"{base.name} with {len(lines)} lines of {subset} spliced in (evaluation/rule_sweep.py)",),
           base_result.source_lang).save(run)
    changed = [i for i in lines if spliced[i] != hypotheses[i]]
    print(f"{name}: {len(changed)} of {len(hypotheses)} lines changed (of {len(lines)} run again): {changed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = commands.add_parser("select", help="write RULE.src/.ref/.lines: the lines where RULE fired")
    chosen.add_argument("run", type=Path, help="an all-on text run folder (with policy.jsonl)")
    chosen.add_argument("--rules", nargs="+", required=True)
    chosen.add_argument("--controls", type=int, default=0, help="add this many lines outside the set")
    chosen.add_argument("--union", metavar="NAME", help="write one set NAME: the lines where any of --rules fired")
    chosen.add_argument("--counts", nargs="*", default=[], help="with --union: policy-log counts that also choose "
                                                                 "a line (e.g. preambles)")
    chosen.add_argument("--out", type=Path, required=True)
    joined = commands.add_parser("splice", help="the all-on run with the subset run's lines put back")
    joined.add_argument("base", type=Path)
    joined.add_argument("subset", type=Path)
    joined.add_argument("lines", type=Path)
    joined.add_argument("--name", required=True)
    joined.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.command == "select":
        select(args.run, args.rules, args.out, args.controls, args.union, tuple(args.counts))
    else:
        splice(args.base, args.subset, args.lines, args.name, args.out)


if __name__ == "__main__":
    main()
