"""The verification cost ratio r that bounds SSBD's speedup on llama.cpp: after the same prompt, the same tokens are
verified as one batch (every row's logits) or decoded one at a time; r = batch time / one-at-a-time time, per
thread count and draft length, side by side (wall clock, best of --repeats). See docs/ssbd.md, "cost model".

    python benchmarks/ssbd_verify_cost.py --threads 1 2 --draft-lengths 4 8 16 26 --gguf-weights '' bf16 q4_0
"""
from __future__ import annotations

import argparse
import itertools
import os
import time

from backends.llama_cpp import LlamaCppLM
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)


def best_seconds(run, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded", help="'embedded' or a .gguf file")
    parser.add_argument("--gguf-weights", nargs="+", default=[""], help="re-quantized weight types to compare "
                                                                          "(bf16, f16, q8_0, q4_0; '' = as is)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--draft-lengths", type=int, nargs="+", default=[4, 8, 16, 26])
    parser.add_argument("--prompt-tokens", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(cpu_summary())
    print(f"model={args.model} prompt={args.prompt_tokens} tokens; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores (llama.cpp threads spin: other processes distort multi-thread timings)")
    print("| weights | threads | draft tokens | decode ms/token | verify ms/token | r |")
    print("|---|---|---|---|---|---|")
    for weights, threads in itertools.product(args.gguf_weights, args.threads):
        session = LlamaCppLM.load(args.model, n_ctx=512, n_threads=threads, weight_type=weights).session()
        vocabulary = session.llama.n_vocab()
        prompt = [1000 + i % (vocabulary - 1000) for i in range(args.prompt_tokens)]
        session._prefill(prompt)
        for length in args.draft_lengths:
            draft = [3000 + i for i in range(length)]

            def verify():
                session._truncate(len(prompt))
                session._evaluate(draft)

            def decode():
                session._truncate(len(prompt))
                for token in draft:
                    session._evaluate([token])

            verified, decoded = best_seconds(verify, args.repeats), best_seconds(decode, args.repeats)
            print(f"| {weights or 'as is'} | {threads} | {length} | {1000 * decoded / length:.1f} "
                  f"| {1000 * verified / length:.1f} | {verified / decoded:.2f} |", flush=True)


if __name__ == "__main__":
    main()
