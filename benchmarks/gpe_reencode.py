"""Wait-k decoding with the GPE cache (no re-encoding) vs the batch-streaming baseline that re-encodes source and
target after every read: same model, sentences, schedule and greedy word rule, timed side by side in one run.

    python benchmarks/gpe_reencode.py --model embedded --sentences 50 --k 5
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.systems.gpe import GPETranslator  # noqa: E402
from agents.systems.gpe_config import GPEConfig  # noqa: E402
from common.config import build_config  # noqa: E402
from common.stream import SourceWord  # noqa: E402
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)


def default_sentences(count: int, direction: str) -> list[str]:
    from common.datasets import shared_data_dir

    """The last `count` Europarl lines of the direction's source side."""
    source_lang = direction.split("-")[0]
    lines = (shared_data_dir() / "europarl_cs_en_small" / f"{source_lang}.txt").read_text().splitlines()
    return [line for line in lines if line.strip()][-count:]


def translate(translator: GPETranslator, sentence: str) -> tuple[float, list[str], int]:
    """Feed one word per call (as SimulEval does), then flush; returns seconds, words, forward calls."""
    translator.reset()
    calls_before = translator.decoder.forward_calls
    words = [SourceWord(w) for w in sentence.split()]
    started = time.perf_counter()
    for word in words[:-1]:
        translator.feed([word])
    translator.flush(words[-1:])
    seconds = time.perf_counter() - started
    return seconds, list(translator.emitted_units), translator.decoder.forward_calls - calls_before


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--adapter", default="")
    parser.add_argument("--direction", default="cs-en", choices=["cs-en", "en-cs"])
    parser.add_argument("--sentences", type=int, default=50)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    source_lang, target_lang = args.direction.split("-")
    values = {"model": args.model, "adapter": args.adapter, "source_lang": source_lang, "target_lang": target_lang,
              "k": args.k, "model_dtype": args.dtype, "model_device": args.device}
    gpe = GPETranslator.from_config(build_config(GPEConfig, values))
    reencode = GPETranslator(gpe.lm, build_config(GPEConfig, {**values, "reencode": True}))
    sentences = default_sentences(args.sentences, args.direction)
    totals = {"gpe": [0.0, 0, 0], "reencode": [0.0, 0, 0]}  # seconds, target words, forward calls
    same = 0
    translate(gpe, sentences[0])  # warm-up
    for index, sentence in enumerate(sentences):
        pair = [("gpe", gpe), ("reencode", reencode)]
        if index % 2:
            pair.reverse()  # alternate the order so drifting machine load hits both alike
        outputs = {}
        for name, translator in pair:
            seconds, words, calls = translate(translator, sentence)
            totals[name][0] += seconds
            totals[name][1] += len(words)
            totals[name][2] += calls
            outputs[name] = words
        same += outputs["gpe"] == outputs["reencode"]
    print(cpu_summary())
    print(f"model {args.model}  wait-{args.k}  {len(sentences)} sentences  {args.direction}  device {args.device}")
    print(f"{'decoder':<10} {'seconds':>9} {'sent/s':>8} {'words/s':>8} {'forwards':>9}")
    for name, (seconds, words, calls) in totals.items():
        print(f"{name:<10} {seconds:9.2f} {len(sentences) / seconds:8.3f} {words / seconds:8.2f} {calls:9d}")
    ratio = totals["reencode"][0] / totals["gpe"][0]
    print(f"time ratio re-encoding / GPE: {ratio:.2f}x   identical translations: {same}/{len(sentences)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
