"""`simulagents eval` (agent + test set -> runs -> official scores -> report) and `simulagents synth-set` (a text
file and an audio-segments YAML -> a synthetic long-form speech test set)."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from evaluation import cluster, comet, data, report, runs, scoring
from common import datasets
from common.config import language_arg


def _print(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", required=True,
                        help="MODULE:CLASS: a simulstream speech agent (e.g. agents.alignatt4llm:Agent) runs on long-"
                             "form speech, a SimulEval text agent (agents.alignatt4llm:TextAgent) on source lines")
    parser.add_argument("--config", help="the agent's YAML operating point (eval_configs/*.yaml)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override one setting in every run")
    parser.add_argument("--sweep", action="append", default=[], metavar="KEY=V1,V2",
                        help="one run per value (several --sweep: every combination), e.g. speech_chunk_size=2.5,4")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=V,KEY=V",
                        help="one run per variant, named NAME: the configuration with these changes (NAME alone: as "
                             "it is); the rows of an ablation, e.g. --variant paper --variant gate-off:border=1000")
    parser.add_argument("--name", help="system name in the report (default: the agent's module name)")
    parser.add_argument("--offline", action="store_true",
                        help="add the offline row: the same model translating whole source sentences")
    parser.add_argument("--offline-cascade", action="store_true",
                        help="speech: add the offline cascade row, the same model translating its recogniser's "
                             "transcript of each whole segment (with its WER); the gap to the offline row is what the "
                             "recogniser loses, the gap from it to the streamed rows what streaming loses")
    parser.add_argument("--offline-only", action="store_true",
                        help="run only the offline rows asked for (to add them to a folder of finished runs)")
    parser.add_argument("--score-only", action="store_true",
                        help="run nothing: score again the runs of this system (--name) already in --out, e.g. "
                             "after a command was cut before its scoring, or to add COMET with --comet-env")
    data_group = parser.add_argument_group("test set (MCIF dev from the shared data, or your own files)")
    data_group.add_argument("--dataset", choices=("mcif-dev",), help="MCIF dev lines (speech: synthesised with "
                            "espeak-ng on the talks' own timeline, once, into --cache)")
    data_group.add_argument("--split", choices=datasets.SPLITS, default="evaluation",
                            help="MCIF talk split (default: evaluation; the calibration talks tuned the heads)")
    data_group.add_argument("--max-talks", type=int, help="only the first N talks of the split")
    data_group.add_argument("--skip-talks", type=int, default=0, help="leave out the split's first N talks (with "
                            "--max-talks: the next talks after a run of N; default 0)")
    data_group.add_argument("--data-dir", type=Path, help="shared data directory (default: $SIMULAGENTS_DATA or "
                                                         "../shared/data)")
    data_group.add_argument("--cache", type=Path, default=Path("runs/test-sets"),
                            help="where synthetic speech sets are kept (default: runs/test-sets)")
    data_group.add_argument("--wav-list", help="speech: one talk wav per line")
    data_group.add_argument("--segments", help="speech: audio-segments YAML ({wav, offset, duration} per line)")
    data_group.add_argument("--source", help="source lines (text input; for speech: transcripts, for the offline "
                                             "row and COMET)")
    data_group.add_argument("--reference", help="reference translations, one per source line / segment")
    data_group.add_argument("--src-lang", type=language_arg, default="en", help="an ISO code or name (default: en)")
    data_group.add_argument("--tgt-lang", type=language_arg, required=True, help="an ISO code or name, e.g. de, German")
    parser.add_argument("--out", required=True, type=Path, help="output folder; its report covers every run in it")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each in its own process (default 1)")
    cluster_group = parser.add_argument_group("a Ray cluster (docs/cluster.md; needs the cluster extra)")
    cluster_group.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                               help="run every run as Ray tasks, a long-form speech run one task per talk, each with "
                                    "the CPUs of its thread knobs (a GPU for a cuda device), then score here as "
                                    "always; ADDRESS: HOST:PORT of a cluster's head, `auto` (one `ray start` left "
                                    "running here), or none: that one, else a new local cluster")
    cluster_group.add_argument("--ray-retries", type=int, default=cluster.DEFAULT_RETRIES,
                               help=f"times a task whose worker (or harness) was killed runs again (default "
                                    f"{cluster.DEFAULT_RETRIES}); a harness that fails is not retried")
    cluster_group.add_argument("--ray-stall", type=float, default=cluster.DEFAULT_STALL_SECONDS, metavar="SECONDS",
                               help="cancel a task, and fail its run, after this long without progress (default "
                                    f"{cluster.DEFAULT_STALL_SECONDS:.0f})")
    parser.add_argument("--comet-env", help=f"venv with omnisteval + unbabel-comet (default: "
                                            f"${comet.COMET_ENV_VARIABLE}); COMET is skipped without it")
    parser.add_argument("--comet-model", action="append", default=[],
                        help=f"COMET model(s) (default {comet.DEFAULT_COMET_MODEL}; e.g. Unbabel/XCOMET-XL)")


def build_eval_set(args: argparse.Namespace, kind: str) -> data.EvalSet:
    if args.dataset == "mcif-dev":
        if any((args.wav_list, args.segments, args.source, args.reference)):
            raise ValueError("--dataset mcif-dev brings its own files; drop --wav-list/--segments/--source/--reference")
        if args.src_lang != "en":
            raise ValueError("MCIF dev is English speech: --src-lang must be en")
        if kind == runs.TEXT:
            return data.mcif_text_set(args.tgt_lang, args.split, args.max_talks, args.data_dir, args.skip_talks)
        return data.mcif_speech_set(args.tgt_lang, args.split, args.cache.resolve(), args.max_talks, args.data_dir,
                                     skip_talks=args.skip_talks, announce=_print)
    if args.max_talks is not None or args.skip_talks:
        raise ValueError("--max-talks and --skip-talks choose talks of --dataset mcif-dev; your own files are used "
                         "whole: drop them, or cut the files")
    if kind == runs.SPEECH:
        if not (args.wav_list and args.segments and args.reference):
            raise ValueError("a speech agent needs --wav-list, --segments and --reference (or --dataset mcif-dev)")
        return data.speech_set(args.wav_list, args.segments, args.reference, args.src_lang, args.tgt_lang,
                               args.source)
    if not (args.source and args.reference):
        raise ValueError("a text agent needs --source and --reference (or --dataset mcif-dev)")
    return data.text_set(args.source, args.reference, args.src_lang, args.tgt_lang)


def system_name(args: argparse.Namespace) -> str:
    return args.name or args.agent.partition(":")[0].rpartition(".")[2]


def run_specs(args: argparse.Namespace, kind: str) -> list[runs.RunSpec]:
    from agents.simulstream_cli import parse_overrides

    if args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1, got {args.jobs}")
    system = system_name(args)
    fixed = parse_overrides(args.set)
    config = str(Path(args.config).resolve()) if args.config else None
    if config and not Path(config).is_file():
        raise FileNotFoundError(f"--config {args.config} does not exist; shipped operating points are in eval_configs/")
    if args.offline_only and not (args.offline or args.offline_cascade):
        raise ValueError("--offline-only runs only offline rows: add --offline and/or --offline-cascade")
    if args.variant and args.sweep:
        raise ValueError("--variant names each run's changes; --sweep makes every combination: give one of them")
    points = runs.parse_variants(args.variant) if args.variant else \
        [(runs.regime_label(point), point) for point in runs.parse_sweep(args.sweep)]
    specs = [runs.RunSpec(system, args.agent, kind, label, {**fixed, **point}, config)
             for label, point in points if not args.offline_only]
    if args.offline:
        specs.append(runs.RunSpec(system, args.agent, runs.OFFLINE, "offline", fixed, config))
    if args.offline_cascade:
        if kind != runs.SPEECH:
            raise ValueError(f"--offline-cascade needs a speech agent; {args.agent} translates text (use --offline)")
        specs.append(runs.RunSpec(system, args.agent, runs.OFFLINE_CASCADE, "offline-cascade", fixed, config))
    return specs


def eval_command(args: argparse.Namespace) -> int:
    kind = runs.agent_kind(args.agent)
    if args.score_only and (args.sweep or args.variant or args.offline_only or args.ray is not None):
        raise ValueError("--score-only runs nothing: drop --sweep / --variant / --offline-only / --ray (it scores the "
                         "runs in --out)")
    if args.ray is not None and args.jobs != 1:
        raise ValueError("--jobs runs processes on this machine; with --ray the cluster runs as many tasks as its "
                         "CPUs hold: drop --jobs")
    dataset = build_eval_set(args, kind)
    specs = [] if args.score_only else run_specs(args, kind)
    comet_env = comet.comet_environment(args.comet_env)
    out = args.out.resolve()
    started = time.monotonic()
    failed: list[str] = []
    if args.score_only:
        system = system_name(args)
        finished = runs.runs_of(system, out)
        _print(f"scoring {len(finished)} finished run(s) of {system} in {out} again")
    else:
        unit = (f"{dataset.audio_seconds / 60:.1f} min of audio" if dataset.is_speech
                else f"{len(dataset.references)} lines")
        where = "on a Ray cluster" if args.ray is not None else f"{args.jobs} at a time"
        _print(f"{len(specs)} run(s) of {args.agent} on {dataset.name} {dataset.source_lang}→{dataset.target_lang} "
               f"({unit}), {where}, into {out}")
        if args.ray is not None:
            outcome = cluster.execute(specs, dataset, out, args.ray, report=_print, retries=args.ray_retries,
                                      stall_seconds=args.ray_stall)
            finished, failed = outcome.finished, outcome.failed
        else:
            finished = runs.execute(specs, dataset, out, jobs=args.jobs, report=_print)
    skipped = comet.skipped_note(comet_env, dataset)
    for spec, run_dir in finished:
        scores = scoring.score_run(spec, run_dir, dataset)
        if skipped is None:
            scores.update(comet.comet_scores(comet_env, spec, run_dir, dataset,
                                             args.comet_model or [comet.DEFAULT_COMET_MODEL]))
        notes = ((skipped,) if skipped else ()) + cluster.retry_notes(run_dir)
        report.Result(spec.to_json(), dataset.name, dataset.target_lang, scores, notes,
                      dataset.source_lang).save(run_dir)
    paths = report.write_report(out, {"agent": args.agent, "dataset": dataset.name,
                                      "target_lang": dataset.target_lang, "command": sys.argv})
    print(paths["table"].read_text())
    _print(f"done in {time.monotonic() - started:.0f} s: " + ", ".join(str(p) for p in paths.values()))
    if failed:  # on a cluster the other runs were scored first
        raise runs.EvaluationError("runs failed: " + ", ".join(failed))
    return 0


def add_synth_set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--text", required=True, type=Path, help="one line to speak per segment")
    parser.add_argument("--segments", required=True, type=Path, help="audio-segments YAML ({wav, offset, "
                                                                     "duration} per line), e.g. MCIF's")
    parser.add_argument("--out", required=True, type=Path, help="folder for the wavs, wavs.txt and the spoken "
                                                                "segments' YAML")
    parser.add_argument("--voice", default="en-us", help="espeak-ng voice (default en-us)")


def synth_set_command(args: argparse.Namespace) -> int:
    from common.synthetic_speech import read_segments, synthesize_long_form

    lines = data.read_lines(args.text, "text")
    segments = read_segments(args.segments)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        if done == total or done % 50 == 0:
            _print(f"  {done}/{total} lines, {time.monotonic() - started:.0f} s")

    built = synthesize_long_form(lines, segments, args.out, voice=args.voice, progress=progress)
    print(f"wav list: {built.wav_list}\nsegments as spoken: {built.segments}")
    if built.shifted_lines:
        print(f"{built.shifted_lines} line(s) ran past the next offset at the fastest rate and were started later; "
              "score with the segments file above")
    return 0
