"""Scores of one finished run, each from the tool the field reports it with: OmniSTEval (BLEU, chrF, LongYAAL CU
and CA; short-form YAAL for text), simulstream's own scorers (StreamLAAL, normalized erasure, real-time factor),
SimulEval's scores.tsv (BLEU, chrF, LAAL, AL, DAL, AP), sacrebleu for the offline rows (and `common.wer` for the
offline cascade's transcripts). Latencies in seconds for speech, in source words for text.

Computation-aware latency is simulstream's and OmniSTEval's: each unit's delay is the audio heard when the chunk
that produced it arrived plus that chunk's computation time, so CA >= CU always, and a system slower than real
time pays its full computation time (the reference implementation replaced audio increments by wall-clock
increments, which put CA below CU).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

from evaluation.data import EvalSet
from evaluation.policy_stats import write_policy_log
from evaluation.runs import OFFLINE_KINDS, SPEECH, TEXT, TRANSCRIPTS, EvaluationError, RunSpec
from common.wer import word_error_rate


class ScoringError(EvaluationError):
    """A run's output cannot be scored (empty, unreadable); the message says which run and why."""


def read_scores_tsv(path: Path) -> dict[str, float]:
    """OmniSTEval's or SimulEval's scores.tsv as {metric: value} (non-numeric values dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if lines and lines[0].startswith("metric\t"):  # OmniSTEval: one "metric\tvalue" row each
        pairs = [line.split("\t")[:2] for line in lines[1:] if "\t" in line]
    else:  # SimulEval: a header row of names and one row of values
        pairs = list(zip(lines[0].split("\t"), lines[1].split("\t")))
    scores = {}
    for name, value in pairs:
        try:
            scores[name.strip()] = float(value)
        except ValueError:
            continue
    return scores


@contextlib.contextmanager
def output_to(path: Path):
    """Send this process's stdout and stderr to `path` at the file-descriptor level (the mWER aligner under
    simulstream's scorers prints from C++), restoring them afterwards."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(path, "a") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


def omnisteval_command() -> str:
    return str(Path(sys.executable).parent / "omnisteval")


def unit_flags(dataset: EvalSet, longform: bool) -> list[str]:
    """OmniSTEval's unit and BLEU tokenizer for the target language (and, long-form, its Moses language)."""
    flags = ["--char_level", "--bleu_tokenizer", "zh"] if dataset.latency_unit == "char" else ["--word_level"]
    return flags + (["--lang", dataset.target_lang] if longform else [])


def run_omnisteval(arguments: list[str], output: Path) -> dict[str, float]:
    result = subprocess.run([omnisteval_command(), *arguments, "--output_folder", str(output)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise ScoringError(f"omnisteval {arguments[0]} failed (exit {result.returncode}): {tail}")
    return read_scores_tsv(output / "scores.tsv")


# -- speech: simulstream metrics log ------------------------------------------------------------------------------

def final_outputs(run_dir: Path, dataset: EvalSet) -> dict[str, str]:
    """Each talk's final text as simulstream's LogReader rebuilds it; ScoringError when there is nothing to score."""
    from simulstream.config import yaml_config
    from simulstream.metrics.readers import LogReader

    log = run_dir / "metrics.jsonl"
    if not log.is_file() or not log.stat().st_size:
        raise ScoringError(f"{log} is missing or empty: the run wrote no metrics log (see {run_dir / 'harness.log'})")
    reader = LogReader(yaml_config(str(log) + ".config.yaml"), str(log), latency_unit=dataset.latency_unit)
    outputs = reader.final_outputs()
    if not any(text.strip() for text in outputs.values()):
        raise ScoringError(f"{run_dir.name}: the hypothesis is empty for every talk; nothing to score (did the "
                           f"agent produce any output? see {run_dir / 'harness.log'})")
    return outputs


def simulstream_scores(run_dir: Path, dataset: EvalSet) -> dict[str, float]:
    """StreamLAAL (CU and CA), normalized erasure and real-time factor, computed by simulstream's own classes
    exactly as `simulstream_score_latency --scorer stream_laal` and `simulstream_stats` do."""
    from simulstream.config import yaml_config
    from simulstream.metrics.readers import LogReader, YamlReferenceReader
    from simulstream.metrics.scorers.latency import LatencyScoringSample
    from simulstream.metrics.scorers.latency.stream_laal import StreamLaal
    from simulstream.metrics.stats import NormalizedErasure, RealTimeFactor

    log = str(run_dir / "metrics.jsonl")
    reader = LogReader(yaml_config(log + ".config.yaml"), log, latency_unit=dataset.latency_unit)
    references = YamlReferenceReader(str(dataset.segments), str(run_dir / "reference.txt")).references
    outputs = reader.final_outputs_and_latencies()
    samples = [LatencyScoringSample(talk, outputs[talk], references[talk]) for talk in references]
    laal = StreamLaal(argparse.Namespace(latency_unit=dataset.latency_unit)).score(samples)
    return {"StreamLAAL (CU)": laal.ideal_latency, "StreamLAAL (CA)": laal.computational_aware_latency,
            "normalized_erasure": NormalizedErasure().compute(reader), "RTF": RealTimeFactor().compute(reader)}


def score_speech(run_dir: Path, dataset: EvalSet) -> dict[str, float]:
    dataset.write_text_files(run_dir)
    final_outputs(run_dir, dataset)  # refuses an empty hypothesis with a clear message
    log = run_dir / "metrics.jsonl"
    scores = run_omnisteval(
        ["longform", "--speech_segmentation", str(dataset.segments), "--ref_sentences_file",
         str(run_dir / "reference.txt"), "--hypothesis_file", str(log), "--hypothesis_format", "simulstream",
         "--simulstream_config_file", str(log) + ".config.yaml", *unit_flags(dataset, longform=True)],
        run_dir / "omnisteval")
    with output_to(run_dir / "scoring.log"):
        scores.update(simulstream_scores(run_dir, dataset))
    return scores


# -- text: SimulEval output directory -----------------------------------------------------------------------------

def score_text(run_dir: Path, dataset: EvalSet) -> dict[str, float]:
    output = run_dir / "simuleval"
    instances = output / "instances.log"
    if not instances.is_file():
        raise ScoringError(f"{instances} is missing: SimulEval did not finish (see {run_dir / 'harness.log'})")
    scores = read_scores_tsv(output / "scores.tsv")
    predictions = [json.loads(line)["prediction"] for line in instances.read_text(encoding="utf-8").splitlines()]
    if not any(p.strip() for p in predictions):
        raise ScoringError(f"{run_dir.name}: every hypothesis is empty; nothing to score "
                           f"(see {run_dir / 'harness.log'})")
    shortform = run_omnisteval(["shortform", "--hypothesis_file", str(instances), "--ref_sentences_file",
                                str(run_dir / "reference.txt"), *unit_flags(dataset, longform=False)],
                               run_dir / "omnisteval")
    scores.update({f"OmniSTEval {name}": value for name, value in shortform.items()})
    return scores


# -- offline: whole sentences --------------------------------------------------------------------------------------

def quality_metrics(target_lang: str) -> dict:
    """sacrebleu's BLEU (its Chinese tokenizer for zh) and chrF, by report name."""
    from sacrebleu.metrics import BLEU, CHRF

    return {"BLEU": BLEU(tokenize="zh" if target_lang == "zh" else "13a"), "chrF": CHRF()}


def corpus_quality(hypotheses: list[str], references: list[str], target_lang: str) -> dict[str, float]:
    return {name: metric.corpus_score(hypotheses, [references]).score
            for name, metric in quality_metrics(target_lang).items()}


def score_offline(run_dir: Path, dataset: EvalSet) -> dict[str, float]:
    hypotheses = (run_dir / "offline.txt").read_text(encoding="utf-8").splitlines()
    if len(hypotheses) != len(dataset.references):
        raise ScoringError(f"{run_dir / 'offline.txt'} has {len(hypotheses)} lines for {len(dataset.references)} "
                           "references: the run did not finish")
    if not any(h.strip() for h in hypotheses):
        raise ScoringError(f"{run_dir.name}: every offline translation is empty; nothing to score")
    references = dataset.offline_references
    dataset.write_text_files(run_dir, references)  # what --score-only scores an older run against
    scores = corpus_quality(hypotheses, list(references), dataset.target_lang)
    transcripts = run_dir / TRANSCRIPTS
    if transcripts.is_file() and dataset.sources:  # the offline cascade: how well the recogniser heard
        scores["WER (%)"] = word_error_rate(transcripts.read_text(encoding="utf-8").splitlines(), dataset.sources)
    return scores


def policy_scores(run_dir: Path) -> dict[str, float]:
    """From the translator's event log (if the run wrote one), counted into `policy.jsonl`, in percent: the share of live steps where the
    AlignAtt gate withheld draft tokens, of drafts cut because they stopped being a translation (a loop, a foreign
    script), of drafts that ended their line (a translation's normal end, counted apart) and of
    drafts that copied the source or turned into its language (the copy filters), and of live steps where the wait-k
    floor committed past where the gate stopped (`waitk_floor`)."""
    log = write_policy_log(run_dir)
    if log is None:
        return {}
    totals: dict[str, int] = {}
    for line in log.read_text(encoding="utf-8").splitlines():
        for name, value in json.loads(line).items():
            totals[name] = totals.get(name, 0) + value
    live, final = totals.get("live_steps", 0), totals.get("final_steps", 0)
    return {"gate fired (% of steps)": 100.0 * totals.get("gate_fired", 0) / max(live, 1),
            "floor committed (% of steps)": 100.0 * totals.get("floor_steps", 0) / max(live, 1),
            "degenerate drafts (%)": 100.0 * (totals.get("degenerate", 0) + totals.get("final_degenerate", 0))
            / max(live + final, 1),
            "line-ended drafts (%)": 100.0 * (totals.get("line_breaks", 0) + totals.get("final_line_breaks", 0))
            / max(live + final, 1),
            "copying drafts (%)": 100.0 * (totals.get("copied", 0) + totals.get("final_copied", 0))
            / max(live + final, 1)}


def score_run(spec: RunSpec, run_dir: Path, dataset: EvalSet) -> dict[str, float]:
    scorer = score_offline if spec.kind in OFFLINE_KINDS else {SPEECH: score_speech, TEXT: score_text}[spec.kind]
    return {**scorer(run_dir, dataset), **policy_scores(run_dir)}
