"""Whether two evaluations emitted the same output, byte for byte: each text run's SimulEval instances (a line's
prediction and delays) and each speech run's simulstream metrics log (every record but its wall-clock time).

    .venv/bin/python -m evaluation.identical_runs OLD_OUT NEW_OUT   # two `simulagents eval --out` folders

Runs are paired by name (`OUT/runs/NAME/`); exit 1 where a pair differs or a run has no partner.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

WALL_CLOCK = ("computation_time", "elapsed", "model_loading_time")  # what a faster or slower machine changes


def emitted(run: Path) -> list[str] | None:
    """A run's output as lines to compare: its instances or its metrics records, less their wall-clock fields."""
    for log in (run / "simuleval" / "instances.log", run / "metrics.jsonl"):
        if log.is_file():
            records = (json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip())
            return [json.dumps({k: v for k, v in record.items() if k not in WALL_CLOCK}, ensure_ascii=False)
                    for record in records]
    return None


def compare(old: Path, new: Path) -> list[str]:
    """One line per run: identical, or where the two first differ."""
    names = sorted({p.name for p in (old / "runs").iterdir()} | {p.name for p in (new / "runs").iterdir()})
    report = []
    for name in names:
        before, after = emitted(old / "runs" / name), emitted(new / "runs" / name)
        unfinished = [folder for folder in (old, new) if not (folder / "runs" / name / "result.json").is_file()]
        if unfinished and before is not None and after is not None:
            report.append(f"{name}: not finished in {' and '.join(map(str, unfinished))}")
            continue
        if before is None or after is None:
            report.append(f"{name}: missing in {'the first' if before is None else 'the second'} folder")
            continue
        first = next((i for i, (a, b) in enumerate(zip(before, after)) if a != b), None)
        if first is None and len(before) == len(after):
            report.append(f"{name}: identical ({len(before)} records)")
        elif first is None:
            report.append(f"{name}: differs: {len(before)} records against {len(after)}")
        else:
            report.append(f"{name}: differs from record {first}:\n  - {before[first]}\n  + {after[first]}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path, help="the first `simulagents eval --out` folder")
    parser.add_argument("new", type=Path, help="the second")
    args = parser.parse_args(argv)
    for folder in (args.old, args.new):
        if not (folder / "runs").is_dir():
            parser.error(f"{folder} holds no runs/ folder: pass the --out folder of `simulagents eval`")
    report = compare(args.old, args.new)
    print("\n".join(report))
    return 0 if all(": identical" in line for line in report) else 1


if __name__ == "__main__":
    sys.exit(main())
