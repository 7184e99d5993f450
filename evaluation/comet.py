"""COMET / XCOMET scores from a separate environment: unbabel-comet needs transformers<5 (our models need >=5), so
OmniSTEval's own `--comet` runs from a second virtual environment on the hypotheses this run already resegmented.

Make it with `make comet-env` (omnisteval + unbabel-comet in .venv-comet) and pass `--comet-env .venv-comet` or set
$SIMULAGENTS_COMET_ENV. Without it, COMET is reported as skipped."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from evaluation.data import EvalSet
from evaluation.runs import OFFLINE_KINDS, SPEECH, RunSpec
from evaluation.scoring import ScoringError, read_scores_tsv, unit_flags

COMET_ENV_VARIABLE = "SIMULAGENTS_COMET_ENV"
DEFAULT_COMET_MODEL = "Unbabel/wmt22-comet-da"


def comet_environment(path: str | None) -> Path | None:
    """The COMET environment's omnisteval executable's venv, from `path` or $SIMULAGENTS_COMET_ENV (None: skip)."""
    configured = path or os.environ.get(COMET_ENV_VARIABLE)
    if not configured:
        return None
    env = Path(configured)
    if not (env / "bin" / "omnisteval").is_file():
        raise FileNotFoundError(f"COMET environment {env} has no bin/omnisteval; create it with `make comet-env` "
                                f"(or point --comet-env / ${COMET_ENV_VARIABLE} at a venv with omnisteval and "
                                "unbabel-comet)")
    return env


def skipped_note(env: Path | None, dataset: EvalSet) -> str | None:
    if env is None:
        return (f"COMET skipped: no COMET environment (it needs transformers<5); `make comet-env`, then "
                f"--comet-env .venv-comet or ${COMET_ENV_VARIABLE}")
    if not dataset.sources:
        return "COMET skipped: the test set has no source sentences (give --source)"
    return None


def comet_scores(env: Path, spec: RunSpec, run_dir: Path, dataset: EvalSet, models: list[str]) -> dict[str, float]:
    """{"COMET" or "COMET <model>": system score} for one run, computed by the COMET environment's OmniSTEval."""
    source = run_dir / "source.txt"
    scores = {}
    for index, model in enumerate(models):
        output = run_dir / ("comet-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", model))
        if spec.kind == SPEECH:
            inputs = ["longform", "--resegmented_hypothesis", str(run_dir / "omnisteval/instances.resegmented.jsonl")]
        elif spec.kind in OFFLINE_KINDS:
            hypotheses = run_dir / "offline.jsonl"
            hypotheses.write_text("".join(json.dumps({"prediction": line}, ensure_ascii=False) + "\n" for line in
                                          (run_dir / "offline.txt").read_text(encoding="utf-8").splitlines()))
            inputs = ["shortform", "--hypothesis_file", str(hypotheses), "--ref_sentences_file",
                      str(run_dir / "reference.txt")]
        else:
            inputs = ["shortform", "--hypothesis_file", str(run_dir / "simuleval/instances.log"),
                      "--ref_sentences_file", str(run_dir / "reference.txt")]
        result = subprocess.run([str(env / "bin" / "omnisteval"), *inputs, "--source_sentences_file", str(source),
                                 "--comet", "--comet_model", model, "--no_latency",
                                 *unit_flags(dataset, longform=spec.kind == SPEECH),
                                 "--output_folder", str(output)], capture_output=True, text=True)
        if result.returncode != 0:
            tail = " | ".join(result.stderr.strip().splitlines()[-3:])
            raise ScoringError(f"COMET ({model}) failed in {env}: {tail} (COMET downloads its model from the Hugging "
                               "Face hub on first use: without a network, put it in the hub cache, $HF_HOME)")
        value = read_scores_tsv(output / "scores.tsv").get("COMET")
        if value is None:
            raise ScoringError(f"COMET ({model}): {output / 'scores.tsv'} has no COMET row")
        scores["COMET" if index == 0 else f"COMET {model}"] = value
    return scores
