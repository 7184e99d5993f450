"""Two streams' llama.cpp draft steps at once, as two processes (`simulagents eval --jobs 2`) and as two threads of
one process (a server pool), against the same work one stream after the other, at each thread count per stream.

    python benchmarks/concurrent_streams.py [--steps 20] [--threads 2 1]

Each stream is its own session of the embedded model (q8_0, a 150-token prompt, one-token steps with q/k capture).
Teams that together hold more threads than the cores spin at each other's barriers when they live in two processes;
in one process libgomp sees its own threads outnumber the cores and stops spinning (docs/cpu_low_latency.md).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sessions(count: int, threads: int):
    from backends.heads import default_heads
    from backends.llama_cpp.lm import LlamaCppCausalLM

    lm = LlamaCppCausalLM.load("embedded", n_threads=threads, weight_type="q8_0")
    return [lm.session(default_heads("embedded", "en", "de", 8).heads) for _ in range(count)]


def draft_steps(session, steps: int) -> None:
    session._prefill([1000 + (i * 7) % 3000 for i in range(150)])
    for i in range(steps):
        session._record_queries = True
        session._decode([2000 + i], every_row=False)


def child(threads: int, steps: int, start_at: float) -> None:
    """One process's stream: load, wait for the common start, time its steps."""
    (session,) = sessions(1, threads)
    draft_steps(session, 1)  # warm-up
    time.sleep(max(0.0, start_at - time.time()))
    started = time.perf_counter()
    draft_steps(session, steps)
    print(json.dumps({"seconds": time.perf_counter() - started}))


def in_processes(threads: int, steps: int) -> float:
    """Wall time until both processes' steps are done, from their common start."""
    start_at = time.time() + 25  # both loaded by then
    children = [subprocess.Popen([sys.executable, __file__, "--child", str(threads), "--steps", str(steps),
                                  "--start-at", str(start_at)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
                for _ in range(2)]
    outputs = [json.loads(c.communicate()[0].strip().splitlines()[-1]) for c in children]
    return max(o["seconds"] for o in outputs)


def in_threads(threads: int, steps: int) -> tuple[float, float]:
    """(one stream after the other, both at once from two threads) in one process."""
    pair = sessions(2, threads)
    for session in pair:
        draft_steps(session, 1)  # warm-up
    started = time.perf_counter()
    for session in pair:
        draft_steps(session, steps)
    sequential = time.perf_counter() - started
    workers = [threading.Thread(target=draft_steps, args=(session, steps)) for session in pair]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sequential, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    import backends  # noqa: F401  (CTranslate2 first, as every entry point of the package loads it)

    if args.child:
        return child(args.child, args.steps, args.start_at)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cpu import cpu_summary

    print(cpu_summary())
    print(f"2 streams x {args.steps} draft steps (prompt prefill included)")
    print("| threads per stream | one after the other | two threads of one process | two processes |")
    print("|---|---|---|---|")
    for threads in args.threads:
        sequential, threaded = in_threads(threads, args.steps)
        separate = in_processes(threads, args.steps)
        print(f"| {threads} | {sequential:.2f} s | {threaded:.2f} s ({threaded / sequential:.2f}x) | "
              f"{separate:.2f} s ({separate / sequential:.2f}x) |", flush=True)


if __name__ == "__main__":
    main()
