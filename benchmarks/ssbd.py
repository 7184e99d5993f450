"""Re-translation vs SSBD side by side on MCIF dev sentences (source revealed every w = 3 words, as the paper):
speedup (output tokens per second of generation, the paper's TPS, relative to re-translation), wall-time ratio with
prompt prefill included, NE, A/D, A/O, BLEU and chrF of the final outputs. All systems run on each sentence in turn
(rotating order), so machine load hits them alike; per-sentence results are appended to --out and a rerun resumes.

    python benchmarks/ssbd.py --sentences 100 --backend llama_cpp --out /tmp/ssbd_bench.jsonl
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import time
from pathlib import Path

from agents.systems.ssbd import SSBDTranslator, load_ssbd_model
from agents.systems.ssbd_config import SSBDConfig
from common.datasets import evenly_spaced, load_mcif, mcif_split, shared_data_dir
from common.stream import SourceWord
from policies.ssbd import SSBDStats, predicted_speedup, verification_cost_for
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)

BETAS = (0.0, 0.1, 0.2, 0.3)


def systems(base: SSBDConfig) -> dict[str, SSBDConfig]:
    configs = {"RT": dataclasses.replace(base, speculative=False)}
    for beta in BETAS:
        configs[f"SSBD b={beta}"] = dataclasses.replace(base, speculative=True, beta=beta)
    return configs


def translate(translator: SSBDTranslator, source: str) -> dict:
    translator.reset()
    for word in source.split():
        translator.feed([SourceWord(word)])
    translator.flush()
    return {"final": translator.target_text, **dataclasses.asdict(translator.stats)}


def summarize(records: list[dict], names: list[str]) -> list[dict]:
    from sacrebleu.metrics import BLEU, CHRF

    references = [record["reference"] for record in records]
    rows = []
    for name in names:
        stats = SSBDStats()
        for record in records:
            stats.merge(SSBDStats(**{k: v for k, v in record["systems"][name].items() if k != "final"}))
        hypotheses = [record["systems"][name]["final"] for record in records]
        rows.append({"system": name, "stats": stats, "bleu": BLEU().corpus_score(hypotheses, [references]).score,
                     "chrf": CHRF().corpus_score(hypotheses, [references]).score})
    baseline = rows[0]["stats"]
    for row in rows:
        stats = row["stats"]
        row["speedup"] = stats.cpu_tokens_per_second / baseline.cpu_tokens_per_second
        row["wall_speedup"] = stats.tokens_per_second / baseline.tokens_per_second
        row["total_ratio"] = ((baseline.generation_cpu_seconds + baseline.prompt_cpu_seconds)
                              / (stats.generation_cpu_seconds + stats.prompt_cpu_seconds))
    return rows


def print_table(rows: list[dict], sentences: int, header: str) -> None:
    print(cpu_summary())
    print(header)
    print(f"{sentences} sentences. TPS = output tokens per CPU second of verification + decoding (the paper's TPS, "
          f"in process CPU time: other jobs on a shared machine do not distort it); speedup = TPS / TPS(RT); "
          f"wall speedup = the same in wall-clock time; total = RT CPU seconds / system CPU seconds, prompt prefill "
          f"included")
    print("| system | BLEU | chrF | NE | A/D % | A/O % | TPS | speedup | wall speedup | total | updates "
          "| output tokens |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        s = row["stats"]
        ad = "-" if row["system"] == "RT" else f"{s.acceptance_over_draft:.1f}"
        ao = "-" if row["system"] == "RT" else f"{s.acceptance_over_output:.1f}"
        print(f"| {row['system']} | {row['bleu']:.1f} | {row['chrf']:.1f} | {s.normalized_erasure:.2f} | {ad} | {ao} "
              f"| {s.cpu_tokens_per_second:.1f} | {row['speedup']:.2f} | {row['wall_speedup']:.2f} "
              f"| {row['total_ratio']:.2f} | {s.updates} | {s.output_tokens} |")


def print_cost_model(rows: list[dict], target: float = 1.5) -> None:
    """Why the speedup is what it is: per update SSBD verifies D draft tokens at r times the CPU cost of decoding one
    (r measured here), then decodes the (1 - A/O) share of the output, so speedup = 1 / (r * D/O + 1 - A/O)."""
    baseline = rows[0]["stats"]
    decode_cost = baseline.generation_cpu_seconds / baseline.output_tokens
    print(f"\nCost model: r = verification CPU s per draft token / re-translation CPU s per output token "
          f"({1000 * decode_cost:.1f} ms); predicted speedup = 1 / (r * D/O + 1 - A/O); r for {target}x = the "
          f"verification cost that would give {target}x at this acceptance")
    print(f"| system | r | D/O | A/O | predicted speedup | measured speedup | r for {target}x |")
    print("|---|---|---|---|---|---|---|")
    for row in rows[1:]:
        s = row["stats"]
        if not s.draft_tokens or not s.verification_cpu_seconds:
            continue
        ratio = s.verification_cpu_seconds / s.draft_tokens / decode_cost
        draft_share, accepted_share = s.draft_tokens / s.output_tokens, s.accepted_tokens / s.output_tokens
        predicted = predicted_speedup(ratio, draft_share, accepted_share)
        needed = verification_cost_for(target, draft_share, accepted_share)
        print(f"| {row['system']} | {ratio:.2f} | {draft_share:.2f} | {accepted_share:.2f} | {predicted:.2f} "
              f"| {row['speedup']:.2f} | {f'{needed:.2f}' if needed > 0 else 'unreachable'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--backend", default="llama_cpp", choices=("llama_cpp", "hf"))
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--target-lang", default="de")
    parser.add_argument("--step-words", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--n-threads", type=int, default=2)
    parser.add_argument("--gguf-weights", default="", help="llama_cpp: re-quantize the GGUF to bf16, f16, q8_0 or "
                                                           "q4_0 (empty: the file as it is)")
    parser.add_argument("--split", default="evaluation", help="MCIF split: evaluation, calibration or all")
    parser.add_argument("--skip", type=int, default=0, help="start at this sentence of the selection (to split a "
                                                            "run over processes; concatenate their --out files)")
    parser.add_argument("--count", type=int, default=None, help="run at most this many sentences from --skip on")
    parser.add_argument("--out", default="ssbd_bench.jsonl", help="per-sentence results (appended; resumable)")
    parser.add_argument("--summary-only", action="store_true", help="print the table from --out and exit")
    args = parser.parse_args()

    base = SSBDConfig(backend=args.backend, model=args.model, target_lang=args.target_lang,
                      step_words=args.step_words, max_new_tokens=args.max_new_tokens, n_threads=args.n_threads,
                      n_ctx=768, gguf_weights=args.gguf_weights)
    base.validate()
    configs = systems(base)
    lines = evenly_spaced(mcif_split(load_mcif(shared_data_dir(), args.target_lang), args.split), args.sentences)
    lines = lines[args.skip:][: args.count]
    out = Path(args.out)
    done = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    if not args.summary_only:
        model = load_ssbd_model(base)
        translators = {name: SSBDTranslator(model, config) for name, config in configs.items()}
        names = list(translators)
        load_before = os.getloadavg()
        started = time.perf_counter()
        for position, line in enumerate(lines[len(done):], start=len(done)):  # position in this process's share
            order = names[position % len(names):] + names[: position % len(names)]
            results = {name: translate(translators[name], line.source) for name in order}
            record = {"index": line.index, "source": line.source, "reference": line.reference, "systems": results,
                      "loadavg": os.getloadavg()[0]}
            with out.open("a") as handle:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
            done.append(record)
            print(f"[{position + 1}/{len(lines)}] {time.perf_counter() - started:.0f} s, load {os.getloadavg()[0]:.1f}",
                  flush=True)
        print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f}")
    loads = [record.get("loadavg", 0.0) for record in done]
    header = (f"backend={args.backend} model={args.model} en-{args.target_lang} w={args.step_words} "
              f"max_new_tokens={args.max_new_tokens} threads={args.n_threads} "
              f"gguf_weights={args.gguf_weights or 'as is'}; mean 1-min load average during the run "
              f"{sum(loads) / max(1, len(loads)):.1f} on {os.cpu_count()} cores")
    rows = summarize(done, list(configs))
    print_table(rows, len(done), header)
    print_cost_model(rows)


if __name__ == "__main__":
    main()
