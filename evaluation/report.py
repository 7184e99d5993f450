"""The evaluation report of an output folder: every scored run found there (so reports accumulate systems run by
separate commands) as report.json, report.tsv, a Table-1-shaped table.md (systems x regimes, offline row last)
and quality-latency plots."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from evaluation.runs import OFFLINE, OFFLINE_KINDS, SPEECH, TEXT

RESULT_FILE = "result.json"
METRIC_ALIASES = {"chrF": ("chrF", "CHRF"), "CHRF": ("CHRF", "chrF")}

# Table columns: (header, metric name as the tools write it, divisor to the table's unit).
SPEECH_COLUMNS = (("BLEU", "BLEU", 1), ("chrF", "chrF", 1), ("COMET", "COMET", 1),
                  ("LongYAAL CU (s)", "LongYAAL (CU)", 1000), ("LongYAAL CA (s)", "LongYAAL (CA)", 1000),
                  ("StreamLAAL CU (s)", "StreamLAAL (CU)", 1), ("StreamLAAL CA (s)", "StreamLAAL (CA)", 1),
                  ("NE", "normalized_erasure", 1), ("RTF", "RTF", 1), ("Gate %", "gate fired (% of steps)", 1),
                  ("Floor %", "floor committed (% of steps)", 1), ("Degen. %", "degenerate drafts (%)", 1),
                  ("Line end %", "line-ended drafts (%)", 1), ("Copy %", "copying drafts (%)", 1),
                  ("ASR WER %", "WER (%)", 1))
TEXT_COLUMNS = (("BLEU", "BLEU", 1), ("chrF", "chrF", 1), ("COMET", "COMET", 1), ("LAAL", "LAAL", 1),
                ("AL", "AL", 1), ("DAL", "DAL", 1), ("AP", "AP", 1), ("YAAL", "OmniSTEval YAAL (CU)", 1),
                ("Gate %", "gate fired (% of steps)", 1), ("Floor %", "floor committed (% of steps)", 1),
                ("Degen. %", "degenerate drafts (%)", 1), ("Line end %", "line-ended drafts (%)", 1),
                ("Copy %", "copying drafts (%)", 1))


@dataclass(frozen=True)
class Result:
    run: dict  # RunSpec.to_json()
    dataset: str
    target_lang: str
    scores: dict
    notes: tuple[str, ...] = ()
    source_lang: str = "en"

    @property
    def kind(self) -> str:
        return self.run["kind"]

    def value(self, metric: str) -> float | None:
        """A score by the name any of the tools gives it (chrF is "CHRF" in SimulEval's scores.tsv)."""
        for name in METRIC_ALIASES.get(metric, (metric,)):
            if name in self.scores:
                return self.scores[name]
        return None

    def save(self, run_dir: Path) -> None:
        (run_dir / RESULT_FILE).write_text(json.dumps(
            {"run": self.run, "dataset": self.dataset, "source_lang": self.source_lang, "target_lang": self.target_lang,
             "scores": self.scores, "notes": list(self.notes)}, indent=2, ensure_ascii=False))

    @classmethod
    def load(cls, path: Path) -> "Result":
        data = json.loads(path.read_text())
        return cls(data["run"], data["dataset"], data["target_lang"], data["scores"], tuple(data.get("notes", ())),
                   data.get("source_lang", "en"))


def collect(out: Path) -> list[Result]:
    """Every run's result under `out/runs/`, streaming runs first (by system, then regime), offline rows last."""
    results = [Result.load(path) for path in sorted((out / "runs").glob(f"**/{RESULT_FILE}"))]
    return sorted(results, key=lambda r: (r.kind in OFFLINE_KINDS, r.target_lang, r.run["system"], r.kind,
                                          r.run["regime"]))


def offline_name(result: Result, several_systems: bool) -> str:
    """"Offline" (gold transcripts) or "Offline cascade" (the recogniser's), named after its system when several
    systems left offline rows in one folder."""
    name = "Offline" if result.kind == OFFLINE else "Offline cascade"
    return f"{name} ({result.run['system']})" if several_systems else name


def _cell(value: float | None, divisor: float) -> str:
    if value is None:
        return "n/a"
    return "late" if math.isnan(value) else f"{value / divisor:.2f}"


def table(results: list[Result]) -> str:
    """Markdown table like the paper's Table 1: one row per language x system x regime, offline rows without
    latency. Speech and text results get separate tables (their latencies are in different units)."""
    blocks = []
    for kind, columns, unit in ((SPEECH, SPEECH_COLUMNS, "seconds"), (TEXT, TEXT_COLUMNS, "source words")):
        rows = [r for r in results if r.kind == kind]
        if not rows:
            continue
        datasets = {r.dataset for r in rows}
        offline = [r for r in results if r.kind in OFFLINE_KINDS and r.dataset in datasets]
        used = [c for c in columns if any(r.value(c[1]) is not None for r in rows + offline)]
        lines = [f"{kind.capitalize()} (latency in {unit})", "",
                 "| Lang. | System | Reg. | " + " | ".join(c[0] for c in used) + " |",
                 "|---|---|---|" + "---|" * len(used)]
        offline_systems = {r.run["system"] for r in offline}
        for r in rows + offline:
            offline_row = r.kind in OFFLINE_KINDS
            system = offline_name(r, len(offline_systems) > 1) if offline_row else r.run["system"]
            regime = "-" if offline_row else r.run["regime"]
            lines.append(f"| {r.source_lang}→{r.target_lang} | {system} | {regime} | "
                         + " | ".join(_cell(r.value(metric), divisor) for _, metric, divisor in used) + " |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"


def tsv(results: list[Result]) -> str:
    metrics = sorted({name for r in results for name in r.scores})
    header = ["system", "regime", "kind", "dataset", "target_lang", *metrics]
    rows = ["\t".join(header)]
    for r in results:
        cells = [r.run["system"], r.run["regime"], r.kind, r.dataset, r.target_lang]
        cells += ["" if r.scores.get(m) is None else f"{r.scores[m]:.4f}" for m in metrics]
        rows.append("\t".join(cells))
    return "\n".join(rows) + "\n"


def quality_latency_figure(results: list[Result]):
    """BLEU and chrF against latency: one line per system through its operating points, CU solid and CA dashed
    (speech), the offline quality as a dotted horizontal line and the offline cascade's dash-dotted. None when there
    is nothing streamed to plot."""
    streamed = [r for r in results if r.kind in (SPEECH, TEXT)]
    if not streamed:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speech = any(r.kind == SPEECH for r in streamed)
    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    systems = sorted({(r.target_lang, r.run["system"]) for r in streamed})
    for panel, quality in zip(axes, ("BLEU", "chrF")):
        for index, (lang, system) in enumerate(systems):
            color = colors[index % len(colors)]
            points = [r for r in streamed if (r.target_lang, r.run["system"]) == (lang, system)]
            name = f"{system} (→{lang})" if len({l for l, _ in systems}) > 1 else system
            variants = (("LongYAAL (CU)", "-", "CU"), ("LongYAAL (CA)", "--", "CA")) if speech else (
                ("LAAL", "-", "LAAL"),)
            for metric, style, tag in variants:
                xy = sorted((r.value(metric), r.value(quality)) for r in points
                            if r.value(metric) is not None and not math.isnan(r.value(metric)))
                if not xy:
                    continue
                scale = 1000 if speech else 1
                panel.plot([x / scale for x, _ in xy], [y for _, y in xy], style, marker="o", color=color,
                           label=f"{name} {tag}")
            for r in results:
                if r.kind in OFFLINE_KINDS and r.run["system"] == system and r.target_lang == lang:
                    style, row = (":", "offline") if r.kind == OFFLINE else ("-.", "offline cascade")
                    panel.axhline(r.value(quality), linestyle=style, color=color, label=f"{name} {row}")
        panel.set_xlabel("LongYAAL (s)" if speech else "LAAL (source words)")
        panel.set_ylabel(quality)
        panel.grid(alpha=0.3)
    # One legend beside both panels: inside a panel, a folder of many systems covers the points.
    figure.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    figure.tight_layout()
    return figure


def plot(results: list[Result], path: Path) -> Path | None:
    """`quality_latency_figure` saved as a PNG at `path`; None when there is nothing streamed to plot."""
    figure = quality_latency_figure(results)
    if figure is None:
        return None
    import matplotlib.pyplot as plt

    figure.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(figure)
    return path


def write_report(out: Path, header: dict) -> dict[str, Path]:
    """report.json, report.tsv, table.md and quality_latency.png in `out` from every result under it."""
    results = collect(out)
    paths = {"json": out / "report.json", "tsv": out / "report.tsv", "table": out / "table.md"}
    paths["json"].write_text(json.dumps({**header, "results": [
        {"run": r.run, "dataset": r.dataset, "source_lang": r.source_lang, "target_lang": r.target_lang,
         "scores": r.scores, "notes": list(r.notes)} for r in results]}, indent=2, ensure_ascii=False))
    paths["tsv"].write_text(tsv(results))
    notes = sorted({note for r in results for note in r.notes})
    if any(math.isnan(v) for r in results for k, v in r.scores.items() if "YAAL" in k):
        notes.append("late: (Long)YAAL counts only units emitted before the recording (or sentence) ends; every "
                     "unit of that run came later, so OmniSTEval has no value (a system far slower than real time)")
    paths["table"].write_text(table(results) + "".join(f"\n- {note}" for note in notes) + ("\n" if notes else ""))
    figure = plot(results, out / "quality_latency.png")
    if figure is not None:
        paths["plot"] = figure
    return paths
