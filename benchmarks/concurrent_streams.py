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
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import backends  # noqa: E402, F401  (CTranslate2 first, as every entry point of the package loads it)
from cpu import cpu_summary  # noqa: E402
from openmp_runtimes import PROMPT, capture_session, draft_step  # noqa: E402


def draft_steps(session, steps: int) -> None:
    """The prompt's prefill, then `steps` one-token draft steps."""
    session._prefill(PROMPT)
    for i in range(steps):
        draft_step(session, 2000 + i)


def child(threads: int, steps: int, start_at: float) -> None:
    """One process's stream: load, wait for the common start, time its steps."""
    session = capture_session(threads)
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
    pair = [capture_session(threads) for _ in range(2)]
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
    if args.child:
        return child(args.child, args.steps, args.start_at)
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
