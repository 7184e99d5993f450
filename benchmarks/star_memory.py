"""Peak memory and time of STAR inference against input length, for compression rates r (r = 1: the decoder
cross-attends to every encoder frame, the uncompressed baseline). The paper's appendix E setup: batch 1, d = 512,
8 heads, 4-layer encoder and decoder, 10k vocabulary, T/10 output tokens, inputs of T = 1000..6000 encoder frames.

Each (T, r) point runs in a fresh subprocess. `--mode stream` (default): the streaming recogniser on T·40 ms of
audio in 400 ms chunks, the segmenter set to score every frame 1/r so that integrate-and-fire yields an anchor
every r frames, then T/10 tokens decoded greedily (KV-cached). `--mode offline` (the paper's appendix E): all T
frames encoded at once, ceil(T/r) anchors from the rescaled segmenter scores, T/10 tokens decoded. Peak memory =
peak RSS of the point minus the RSS after the model was built and warmed up; time = wall and process CPU seconds
(one thread: CPU time is what survives a shared machine).

    python benchmarks/star_memory.py [--lengths 1000 2000 ...] [--rates 1 2 5 10 20] [--dim 512]
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # benchmarks/cpu.py, also when imported as benchmarks.star_memory
from cpu import cpu_summary  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def build_model(args):
    import torch

    from backends.star.model import StarModel, StarModelConfig

    torch.manual_seed(0)
    model = StarModel(StarModelConfig(vocab_size=args.vocab, dim=args.dim, heads=args.heads,
                                      encoder_layers=args.encoder_layers, semantic_layers=args.semantic_layers,
                                      decoder_layers=args.decoder_layers, wait_k=0)).eval()
    with torch.no_grad():
        model.decoder.embedding.weight[2] = 0  # </s> scores 0: a random decoder writes all T/10 tokens
    return model


def run_stream(model, frames: int, rate: int, tokens: int, chunk_frames: int = 10) -> int:
    """The streaming recogniser on frames·40 ms of audio. The segmenter is set to score every frame 1/r, so
    integrate-and-fire yields an anchor every r frames; decoding (wait-k = 0) runs after the last chunk."""
    import numpy as np
    import torch

    from backends.star.features import HOP, WINDOW
    from backends.star.streaming import StreamingRecognizer

    with torch.no_grad():
        model.segmenter[2].weight.zero_()
        model.segmenter[2].bias.fill_(30.0 if rate == 1 else -math.log(rate - 1))  # sigmoid = 1/r
    recognizer = StreamingRecognizer(model, eos_id=2, bos_id=1, wait_k=0, max_tokens=tokens)
    audio = np.random.default_rng(0).normal(0, 0.1, frames * 4 * HOP + WINDOW - HOP).astype(np.float32)
    chunk = chunk_frames * 4 * HOP
    for start in range(0, len(audio), chunk):
        recognizer.feed_audio(audio[start:start + chunk])
    recognizer.finish()
    assert len(recognizer.tokens) == tokens, len(recognizer.tokens)
    return len(recognizer.anchor_times_ms)


def run_offline(model, frames: int, rate: int, tokens: int) -> int:
    """The whole input at once (the paper's setup): encode all frames, keep ceil(T/r) anchors chosen by the
    rescaled segmenter scores, decode greedily with the KV-cached decoder."""
    import torch

    from backends.star.encoder import SUBSAMPLING, encoder_frame_count

    anchors = math.ceil(frames / rate)
    with torch.no_grad():
        mel = torch.randn(1, frames * SUBSAMPLING, 80)
        states = model.acoustic(mel)
        lengths = encoder_frame_count(torch.tensor([mel.shape[1]]))
        selected = model.compress(states, model.scores(states), lengths, torch.tensor([anchors]))
        del states
        stream = model.decoder.new_stream()
        model.decoder.add_anchors(stream, selected.memory, selected.bias[0])
        token = 1
        for _ in range(tokens):
            token = int(model.decoder.step(stream, token, anchors).argmax())
    return anchors


def measure(length: int, rate: int, args) -> dict:
    """One point, in this process (called in a fresh subprocess by `main`)."""
    import resource

    import psutil
    import torch

    torch.set_num_threads(args.threads)
    model = build_model(args)
    run = run_stream if args.mode == "stream" else run_offline
    run(model, 16, rate, 2)  # warm-up: allocator pools, kernels
    baseline = psutil.Process().memory_info().rss
    started, started_cpu = time.perf_counter(), time.process_time()
    anchors = run(model, length, rate, max(1, length // 10))
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"mode": args.mode, "length": length, "rate": rate, "anchors": anchors, "tokens": max(1, length // 10),
            "peak_mb": round(max(0, peak - baseline) / 2**20, 1), "seconds": round(seconds, 2),  # the two RSS
            # readings (getrusage, /proc) may differ by ~0.1 MB when a point allocates almost nothing
            "cpu_seconds": round(cpu_seconds, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1000, 2000, 3000, 4000, 5000, 6000])
    parser.add_argument("--rates", type=int, nargs="+", default=[1, 2, 5, 10, 20])
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--encoder-layers", type=int, default=4)
    parser.add_argument("--semantic-layers", type=int, default=2)
    parser.add_argument("--decoder-layers", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--mode", choices=("stream", "offline"), default="stream",
                        help="stream: the streaming recogniser, chunk by chunk (what STAR is for); offline: the "
                             "whole input encoded at once, as in the paper's appendix E")
    parser.add_argument("--point", nargs=2, type=int, metavar=("LENGTH", "RATE"), help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the points here")
    args = parser.parse_args(argv)
    if args.point:
        print(json.dumps(measure(*args.point, args)))
        return 0
    if 1 not in args.rates:
        parser.error("--rates must include 1 (the uncompressed baseline the ratios are taken against)")
    passthrough = [f"--{name}={value}" for name, value in (
        ("dim", args.dim), ("heads", args.heads), ("encoder-layers", args.encoder_layers),
        ("semantic-layers", args.semantic_layers), ("decoder-layers", args.decoder_layers), ("vocab", args.vocab),
        ("threads", args.threads), ("mode", args.mode))]
    points = []
    print(cpu_summary())
    print(f"{'T':>6} {'r':>3} {'anchors':>7} {'peak MB':>8} {'vs r=1':>7} {'saved':>6} {'wall s':>7} {'CPU s':>7} "
          f"{'vs r=1':>7}")
    for length in args.lengths:
        baseline = None
        for rate in sorted(args.rates):
            result = subprocess.run([sys.executable, __file__, "--point", str(length), str(rate), *passthrough],
                                    capture_output=True, text=True, cwd=REPO, check=True)
            point = json.loads(result.stdout.strip().splitlines()[-1])
            baseline = baseline or point
            point["memory_ratio"] = round(point["peak_mb"] / baseline["peak_mb"], 3)
            point["cpu_time_ratio"] = round(point["cpu_seconds"] / baseline["cpu_seconds"], 3)
            points.append(point)
            print(f"{length:>6} {rate:>3} {point['anchors']:>7} {point['peak_mb']:>8.1f} {point['memory_ratio']:>7.3f} "
                  f"{100 * (1 - point['memory_ratio']):>5.1f}% {point['seconds']:>7.2f} {point['cpu_seconds']:>7.2f} "
                  f"{point['cpu_time_ratio']:>7.3f}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(points, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
