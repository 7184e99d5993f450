"""The speech cascade's two models taking turns as they do at every chunk: a Whisper call on 8 s of espeak-ng speech,
then llama.cpp draft steps (q8_0, q/k capture, 2 threads), as the package loads them (CTranslate2 first:
backends/openmp.py) and with torch imported first (CTranslate2 then shares torch's libgomp), side by side, each in
a fresh process, one after the other. Also the draft step with no Whisper call before it. GOMP_SPINCOUNT set in the
environment applies to both.

    python benchmarks/openmp_runtimes.py [--rounds 6]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORDERS = {
    "the package's order (ctranslate2 first)": "import backends",
    "torch first (shares torch's libgomp)": "import torch; import backends",
}
PROMPT = [1000 + (i * 7) % 3000 for i in range(150)]  # a 150-token prompt of arbitrary ids


def capture_session(threads: int):
    """A llama.cpp session of the embedded model (q8_0) with q/k capture for its 8 en→de heads."""
    from backends.heads import default_heads
    from backends.llama_cpp.lm import LlamaCppCausalLM

    lm = LlamaCppCausalLM.load("embedded", n_threads=threads, weight_type="q8_0")
    return lm.session(default_heads("embedded", "en", "de", 8).heads)


def draft_step(session, token: int) -> None:
    """One one-token draft step with q/k capture, as a live AlignAtt draft takes it."""
    session._record_queries = True
    session._decode([token], every_row=False)


def child(rounds: int) -> None:
    import tempfile
    import time

    import numpy as np
    import soundfile

    from backends.asr.whisper import WhisperRecognizer
    from common.synthetic_speech import synthesize_talk

    session = capture_session(2)
    recogniser = WhisperRecognizer.load()
    with tempfile.TemporaryDirectory() as folder:
        wav = Path(folder) / "speech.wav"
        synthesize_talk(["Today I am going to talk about simultaneous speech translation with large language models,",
                         "and about how we decide when to write."], wav)
        speech, _ = soundfile.read(wav, dtype="float32")
    speech = speech[: 16000 * 8]
    session._prefill(PROMPT)

    def step_ms(steps: int = 6) -> float:
        times = []
        for i in range(steps):
            started = time.perf_counter()
            draft_step(session, 2000 + i)
            times.append(time.perf_counter() - started)
        return 1000 * float(np.median(times))

    idle = [step_ms() for _ in range(rounds)]
    after, recognise = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        recogniser.transcribe(speech, "en")
        recognise.append(time.perf_counter() - started)
        after.append(step_ms())
    print(json.dumps({"idle": float(np.median(idle)), "after": float(np.median(after)),
                      "recogniser": 1000 * float(np.median(recognise))}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.rounds)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from cpu import cpu_summary

    print(cpu_summary())
    print("| order | ms per draft step, no Whisper call before | after a Whisper call | ratio | Whisper call (ms) |")
    print("|---|---|---|---|---|")
    for label, imports in ORDERS.items():
        code = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); {imports}; sys.argv = ['x', '--child', "
                f"'--rounds', '{args.rounds}']; import runpy; runpy.run_path({__file__!r}, run_name='__main__')")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
        if out.returncode or not lines:
            raise SystemExit(f"{label}: the child failed:\n{out.stderr[-2000:]}")
        r = json.loads(lines[-1])
        print(f"| {label} | {r['idle']:.1f} | {r['after']:.1f} | {r['after'] / r['idle']:.2f}x | "
              f"{r['recogniser']:.0f} |")


if __name__ == "__main__":
    main()
