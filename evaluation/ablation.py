"""Where AlignAtt's quality comes from: the paper's system as its authors' code decides, the same with its gate off,
each of this package's changes added to it alone, and the peers, in one `simulagents eval` folder and one table.

    # run every row (one `simulagents eval` command per system into OUT; --rows picks some, --print shows them)
    .venv/bin/python -m evaluation.ablation run text --split calibration --out runs/ablation-text-cal
    # the table: every row against the first (wait-k), paired bootstrap, as a committed results file and the docs'
    # generated table (docs/alignatt4llm.md between its ablation markers)
    .venv/bin/python -m evaluation.ablation table text --out runs/ablation-text-cal

A row is a preset and its changes (`simulagents eval --variant`): the ablation is a list, not a script.
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from evaluation.paired_bootstrap import paired_bootstrap
from evaluation.provenance import read_environment
from evaluation.runs import EvaluationError, run_lines

REPO = Path(__file__).resolve().parents[1]

ALL_FILTERS = "line_end+foreign_script+loop+copy+opening_copy+language_turn+opening_language+opening_word"


@dataclass(frozen=True)
class Row:
    """One run: the `variant` of a `system` (its run folder: SYSTEM_VARIANT), the agent, its preset and the changes."""

    system: str
    variant: str
    what: str  # the table's words for it
    agent: str
    config: str
    changes: dict = field(default_factory=dict)

    @property
    def folder(self) -> str:
        return f"{self.system}_{self.variant}"


# The package's changes to the paper, each added to it alone: the knobs the paper presets set otherwise.
TEXT_CHANGES = [
    ("word-frontier", "frontier in words, border −2 (the text preset's)", {"frontier_unit": "word", "border": -2}),
    ("mean-vote", "head vote: mean (the paper's Fig. 4)", {"head_vote": "mean"}),
    ("soft-0.1", "soft frontier 0.1", {"frontier_min_mass": 0.1}),
    ("8-heads", "top 8 heads", {"top_k_heads": 8}),
    ("float64", "the gate in float64", {"gate_dtype": "float64"}),
    ("all-read", "every read word accessible", {"hold_back_words": 0}),
    ("eq1-prompt", "the prompt of paper Eq. 1", {"prompt_style": "simulagents"}),
    ("no-penalty", "no repetition penalty", {"repetition_penalty": 1.0}),
    ("budgets", "budgets: 16 live, 2 × source + 8 final", {
        "live_budget_ratio": 0.0, "final_max_new_tokens": 256, "final_budget_ratio": 2.0, "final_budget_slack": 8,
        "final_budget_floor": 1, "final_budget_less_committed": True}),
    ("filters", "draft filters and 3 final retries", {"draft_filters": ALL_FILTERS, "final_retries": 3}),
]
SPEECH_CHANGES = [
    ("word-frontier", "frontier in words, border 0 (the CPU preset's)", {"frontier_unit": "word", "border": 0}),
    *[change for change in TEXT_CHANGES if change[0] not in ("word-frontier", "all-read")],
    ("hold-back", "hold-back 0.25 s", {"hold_back": 0.25}),
    ("sentence-end", "sentence end held while the source runs", {"withhold_sentence_end": True}),
    ("min-words", "no write before a sentence's 3rd word", {"min_accessible_words": 3}),
    ("floor", "wait-4 floor under the gate", {"waitk_floor": 4}),
    ("budget-32", "32 live tokens", {"max_new_tokens": 32}),
]

TEXT, SPEECH = "text", "speech"
ALIGNATT = {TEXT: "agents.alignatt4llm:TextAgent", SPEECH: "agents.alignatt4llm:Agent"}
PAPER = {TEXT: "eval_configs/alignatt4llm_paper_text_cpu.yaml", SPEECH: "eval_configs/alignatt4llm_paper_cpu.yaml"}
SHIPPED = {TEXT: "eval_configs/alignatt4llm_text_cpu.yaml", SPEECH: "eval_configs/alignatt4llm_cpu.yaml"}
WAITK = {TEXT: ("agents.alignatt4llm:WaitkTextAgent", "eval_configs/waitk_text_cpu.yaml"),
         SPEECH: ("agents.alignatt4llm:WaitkAgent", "eval_configs/waitk_cpu.yaml")}
AGREEMENT = {TEXT: ("agents.alignatt4llm:LocalAgreementTextAgent", "eval_configs/local_agreement_text_cpu.yaml"),
             SPEECH: ("agents.alignatt4llm:LocalAgreementAgent", "eval_configs/local_agreement_cpu.yaml")}
WAITK_KS = (2, 3, 4)  # the wait-k curve, whose point nearest the paper's latency is the table's first row


def rows(kind: str) -> list[Row]:
    """The ablation's runs: wait-k at each k, LocalAgreement, the package's AlignAtt as shipped, the paper, the paper
    without its gate, and each of the package's changes added to the paper alone."""
    changes = TEXT_CHANGES if kind == TEXT else SPEECH_CHANGES
    return [*(Row("wait-k", f"k{k}", f"wait-{k}", *WAITK[kind], {"k": k}) for k in WAITK_KS),
            Row("offline", "offline", "offline: whole sentences, the same model and prompt", ALIGNATT[kind],
                PAPER[kind]),
            Row("local-agreement", "default", "LocalAgreement-2", *AGREEMENT[kind]),
            Row("shipped", "default", "the package's AlignAtt as shipped", ALIGNATT[kind], SHIPPED[kind]),
            Row("paper", "paper", "paper AlignAtt (the authors' code)", ALIGNATT[kind], PAPER[kind]),
            Row("paper", "gate-off", "paper, gate off (all but the last word)", ALIGNATT[kind], PAPER[kind],
                {"border": 100000}),
            *(Row("paper", name, f"paper + {what}", ALIGNATT[kind], PAPER[kind], change)
              for name, what, change in changes)]


def eval_commands(chosen: list[Row], args: argparse.Namespace) -> list[list[str]]:
    """One `simulagents eval` command per system (its variants run one after the other, `--jobs` at a time)."""
    commands = []
    for system in dict.fromkeys(row.system for row in chosen):
        group = [row for row in chosen if row.system == system]
        command = [".venv/bin/simulagents", "eval", "--agent", group[0].agent, "--config", group[0].config,
                   "--dataset", "mcif-dev", "--split", args.split, "--tgt-lang", args.tgt_lang, "--name", system,
                   "--out", str(args.out), "--jobs", str(args.jobs)]
        for row in group:
            changes = ",".join(f"{key}={value}" for key, value in row.changes.items())
            command += ["--offline", "--offline-only"] if system == "offline" else \
                ["--variant", row.variant + (f":{changes}" if changes else "")]
        command += ["--max-talks", str(args.max_talks)] if args.max_talks else []
        commands.append(command + [part for setting in args.set for part in ("--set", setting)])
    return commands


def run(args: argparse.Namespace) -> int:
    chosen = [row for row in rows(args.kind) if not args.rows or row.folder in args.rows]
    for command in eval_commands(chosen, args):
        print(" ".join(command), flush=True)
        if not args.print and subprocess.run(command, cwd=REPO).returncode != 0:
            return 1
    return 0


def table(args: argparse.Namespace) -> int:
    """Every finished row against the first (the wait-k nearest the paper in latency): the results file and the
    docs' table."""
    report = json.loads((args.out / "report.json").read_text(encoding="utf-8"))
    scores = {f"{r['run']['system']}_{r['run']['regime']}": r["scores"] for r in report["results"]}
    done = [row for row in rows(args.kind) if row.folder in scores]
    latency = "LAAL" if args.kind == TEXT else "LongYAAL CU (s)"
    paper = scores[next(row.folder for row in done if row.variant == "paper")]
    waitk = [row for row in done if row.system == "wait-k"]
    first = min(waitk, key=lambda row: abs(scores[row.folder][latency] - paper[latency]))
    ordered = [first, *(row for row in done if row.system != "wait-k")]  # the offline row scores no latency
    lines = {row.folder: run_lines(args.out / "runs" / row.folder) for row in ordered}
    references = lines[first.folder][1]
    bootstrap = {result["system"]: result for result in paired_bootstrap(
        {name: hypotheses for name, (hypotheses, _, _) in lines.items()}, references, first.folder,
        report["target_lang"])}
    results = {
        "kind": args.kind, "split": report["dataset"], "lines": len(references), "date": str(datetime.date.today()),
        "environment": {key: value for key, value in (read_environment(args.out / "runs" / first.folder) or {})
                        .items() if key in ("commit", "changed_files", "cpu", "cpu_flags", "cores")},
        "commands": [" ".join(command) for command in eval_commands(rows(args.kind), args)],
        "rows": [{"name": row.folder, "what": row.what, "changes": row.changes,
                  "BLEU": bootstrap[row.folder]["BLEU"][0], "BLEU p": bootstrap[row.folder]["BLEU"][3],
                  "chrF": bootstrap[row.folder]["chrF"][0], "chrF p": bootstrap[row.folder]["chrF"][3],
                  "latency": scores[row.folder].get(latency),
                  "latency CA": scores[row.folder].get("LongYAAL CA (s)"),
                  "gate %": scores[row.folder].get("gate fired (% of steps)")} for row in ordered]}
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(render(results))
    if args.doc:
        write_doc(args.doc)
    return 0


# A table a page shows, generated from its results file: between these two lines, nothing written by hand.
GENERATED = re.compile(r"(<!-- generated from (?P<results>\S+) by evaluation/ablation\.py -->\n).*?"
                       r"(<!-- end of generated table -->)", re.S)


def generated(text: str) -> str:
    """`text` with each generated table as its results file renders it now."""
    def fill(match: re.Match) -> str:
        results = json.loads((REPO / match["results"]).read_text(encoding="utf-8"))
        return match.group(1) + render(results) + "\n" + match.group(3)

    return GENERATED.sub(fill, text)


def write_doc(doc: Path) -> None:
    doc.write_text(generated(doc.read_text(encoding="utf-8")), encoding="utf-8")


def render(results: dict) -> str:
    """The markdown table of a results file (what the docs show between the ablation markers)."""
    text = results["kind"] == TEXT
    head = "| row | BLEU (p) | chrF (p) | " + ("LAAL (words)" if text else "LongYAAL CU / CA (s)") + " | gate % |"
    lines = [f"{results['kind'].capitalize()}, {results['split']} ({results['lines']} lines), {results['date']}, "
             f"{results['environment'].get('cpu', '?')}, commit {str(results['environment'].get('commit'))[:7]}; "
             "p: paired bootstrap against the first row.", "", head, "|---|---|---|---|---|"]
    for row in results["rows"]:
        cells = [row["what"]]
        for metric in ("BLEU", "chrF"):
            p = row[f"{metric} p"]
            cells.append(f"{row[metric]:.2f}" + ("" if p is None else f" ({p:.3f})"))
        if row["latency"] is None:
            cells.append("")
        else:
            cells.append(f"{row['latency']:.2f}" if text else f"{row['latency']:.2f} / {row['latency CA'] or 0:.2f}")
        cells.append("" if row["gate %"] is None else f"{row['gate %']:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("run", "table"):
        command = sub.add_parser(name)
        command.add_argument("kind", choices=(TEXT, SPEECH))
        command.add_argument("--out", type=Path, required=True, help="the `simulagents eval --out` folder")
        command.add_argument("--split", default="calibration", choices=("calibration", "evaluation"))
        command.add_argument("--tgt-lang", default="de")
        command.add_argument("--max-talks", type=int, default=0, help="only the split's first N talks (0: all)")
        command.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="for every row")
        command.add_argument("--jobs", type=int, default=1, help="runs at once, as simulagents eval's")
    sub.choices["run"].add_argument("--rows", nargs="*", help="only these rows (their run folders, e.g. paper_paper)")
    sub.choices["run"].add_argument("--print", action="store_true", help="show the commands, run nothing")
    sub.choices["table"].add_argument("--results", type=Path, required=True, help="the results file to write "
                                      "(docs/results/NAME.json)")
    sub.choices["table"].add_argument("--doc", type=Path, help="a page whose generated tables are written again "
                                      "(docs/alignatt4llm.md)")
    args = parser.parse_args(argv)
    try:
        return run(args) if args.command == "run" else table(args)
    except (EvaluationError, FileNotFoundError, StopIteration, KeyError) as error:
        print(f"ablation: {error!r}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
