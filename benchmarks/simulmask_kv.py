"""SimulMask wait-k decoding with KV caching (prompt and prediction caches spliced, nothing recomputed) vs the
baseline that re-encodes the prediction (p2 + target so far) after every read: same model, sentences, schedule and
greedy word rule; wall time and FLOPs (torch FlopCounterMode, matmuls and attention) side by side in one run.

    python benchmarks/simulmask_kv.py --model small --sentences 20 --k 3     # offline: random Falcon-RW layout, 8 x 512
    python benchmarks/simulmask_kv.py --model falcon-rw-1b-shape --sentences 3    # offline: random, full 1.3B size
    python benchmarks/simulmask_kv.py --model tiiuae/falcon-rw-1b --checkpoint RUN/final --device cuda --dtype bfloat16
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the tiny tokenizer of the test fixtures

import torch  # noqa: E402
from torch.utils import flop_counter  # noqa: E402

from common.stream import SourceWord  # noqa: E402
from common.config import build_config  # noqa: E402
from agents.systems.simulmask import SimulMaskTranslator  # noqa: E402
from agents.systems.simulmask_config import SimulMaskConfig  # noqa: E402
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)


# Falcon-RW-1B's layout (ALiBi, one fused query-key-value projection, sequential blocks, biases): full size, and
# scaled to 8 layers x 512 for CPUs.
RANDOM_SHAPES = {
    "small": {"hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 8},
    "falcon-rw-1b-shape": {"hidden_size": 2048, "num_attention_heads": 32, "num_hidden_layers": 24,
                           "vocab_size": 50304},
}


def random_falcon_lm(shape: str, source_lang: str, target_lang: str, dtype: str = "float32", device: str = "cpu"):
    """A randomly initialised Falcon-RW layout with the tiny tokenizer: offline, float32, for cost measurements
    only (its words are random; `--max-word-tokens` keeps them near real subword counts)."""
    from transformers import FalconConfig, FalconForCausalLM

    from backends.simulmask.prompt import simulmask_template
    from backends.streaming_masks.decoder import StreamingLM
    from tiny_checkpoints import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer("falcon")
    sizes = {"vocab_size": len(tokenizer), **RANDOM_SHAPES[shape]}
    config = FalconConfig(**sizes, alibi=True, new_decoder_architecture=False, multi_query=False,
                          parallel_attn=False, bias=True, eos_token_id=tokenizer.eos_token_id,
                          bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(0)
    model = FalconForCausalLM(config).to(device=device, dtype=getattr(torch, dtype)).eval()
    model.set_attn_implementation("sdpa")
    return StreamingLM.from_model(model, tokenizer, simulmask_template(tokenizer, source_lang, target_lang))


def default_sentences(count: int, source_lang: str, max_words: int) -> list[str]:
    """The last `count` Europarl lines (of at most `max_words` words) of the source language."""
    from common.datasets import shared_data_dir

    lines = (shared_data_dir() / "europarl_cs_en_small" / f"{source_lang}.txt").read_text().splitlines()
    return [line for line in lines if line.strip() and len(line.split()) <= max_words][-count:]


def cpu_sdpa_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    """FlopCounterMode has no formula for the CPU SDPA kernel: the same count as for the GPU kernels."""
    return flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape)


def counting_flops() -> flop_counter.FlopCounterMode:
    return flop_counter.FlopCounterMode(
        display=False, custom_mapping={torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa_flops})


def translate(translator: SimulMaskTranslator, sentence: str) -> list[str]:
    """Feed one word per call (as SimulEval does), then flush; returns the target words."""
    translator.reset()
    words = [SourceWord(w) for w in sentence.split()]
    for word in words[:-1]:
        translator.feed([word])
    translator.flush(words[-1:])
    return list(translator.emitted_units)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="small",
                        help=f"{' or '.join(RANDOM_SHAPES)} (random Falcon-RW layouts, offline) or a model spec")
    parser.add_argument("--checkpoint", default="")
    parser.add_argument("--direction", default="en-cs", choices=["cs-en", "en-cs"])
    parser.add_argument("--sentences", type=int, default=20)
    parser.add_argument("--max-words", type=int, default=30)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--max-word-tokens", type=int, default=4,
                        help="a random model seldom starts a new word: cap words near real subword counts")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    source_lang, target_lang = args.direction.split("-")
    values = {"model": args.model, "checkpoint": args.checkpoint, "source_lang": source_lang,
              "target_lang": target_lang, "k": args.k, "max_word_tokens": args.max_word_tokens,
              "model_dtype": args.dtype, "model_device": args.device}
    if args.model in RANDOM_SHAPES:
        lm = random_falcon_lm(args.model, source_lang, target_lang, args.dtype, args.device)
        cached = SimulMaskTranslator(lm, build_config(SimulMaskConfig, values))
    else:
        cached = SimulMaskTranslator.from_config(build_config(SimulMaskConfig, values))
    recompute = SimulMaskTranslator(cached.lm, build_config(SimulMaskConfig, {**values, "recompute": True}))
    decoders = {"cached": cached, "recompute": recompute}
    sentences = default_sentences(args.sentences, source_lang, args.max_words)
    totals = {name: {"seconds": 0.0, "flops": 0, "words": 0, "tokens": 0, "forwards": 0} for name in decoders}
    translate(cached, sentences[0])  # warm-up
    for index, sentence in enumerate(sentences):
        order = list(decoders.items())
        if index % 2:
            order.reverse()  # alternate the order so drifting machine load hits both alike
        for name, translator in order:
            calls, tokens = translator.decoder.forward_calls, translator.decoder.words_tokens
            started = time.perf_counter()
            words = translate(translator, sentence)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            totals[name]["seconds"] += time.perf_counter() - started
            totals[name]["forwards"] += translator.decoder.forward_calls - calls
            tokens = translator.decoder.words_tokens
            with counting_flops() as counter:  # a second, identical (greedy) pass, counted rather than timed
                again = translate(translator, sentence)
            assert again == words, "greedy decoding must repeat exactly"
            totals[name]["flops"] += counter.get_total_flops()
            totals[name]["words"] += len(words)
            totals[name]["tokens"] += translator.decoder.words_tokens - tokens
    print(cpu_summary())
    print(f"model {args.model}  wait-{args.k}  {len(sentences)} sentences  {args.direction}  device {args.device}")
    print(f"{'decoder':<10} {'seconds':>8} {'GFLOPs':>9} {'words':>6} {'tokens':>7} {'forwards':>9} "
          f"{'ms/token':>9} {'MFLOPs/token':>13}")
    for name, total in totals.items():
        print(f"{name:<10} {total['seconds']:8.2f} {total['flops'] / 1e9:9.2f} {total['words']:6d} "
              f"{total['tokens']:7d} {total['forwards']:9d} {1e3 * total['seconds'] / total['tokens']:9.2f} "
              f"{total['flops'] / 1e6 / total['tokens']:13.2f}")
    per_token = {name: (t["seconds"] / t["tokens"], t["flops"] / t["tokens"]) for name, t in totals.items()}
    time_ratio = per_token["recompute"][0] / per_token["cached"][0]
    flop_ratio = per_token["recompute"][1] / per_token["cached"][1]
    print(f"per target token, recompute / cached: time {time_ratio:.2f}x, FLOPs {flop_ratio:.2f}x "
          f"(share of the baseline's FLOPs spent recomputing: {1 - 1 / flop_ratio:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
