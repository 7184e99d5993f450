"""Draft tokens/s on vLLM with and without run-time q/k capture, side by side in one run: a plain engine, and an
engine capturing the AlignAtt heads whose drafts are also replayed and scanned by the policy (paper §4.5).

    .venv-vllm/bin/python benchmarks/vllm_capture.py [--model embedded] [--prompts 12] [--max-new-tokens 16]
                                                      [--compile]

Target (issue 4): capture path at most 10% slower than plain drafting (capture / plain tokens/s >= 0.90).

With --compile the capturing engine is compiled (on CUDA: graphs on, `capture_with_cuda_graphs=True`), and after
the timing an eager capturing engine drafts the same prompts: the script prints whether the tokens and AlignAtt
decisions are the same and the largest difference of the replayed source attention ("compiled vs eager").
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch

from alignatt_capture import prompts  # benchmarks/alignatt_capture.py: the same prompts as the transformers run

from agents.systems.config import AlignAttConfig
from agents.systems.llm import resolve_heads
from backends.prompt import PromptBuilder
from backends.vllm.lm import VLLMCausalLM
from policies.alignatt import AlignAttParams, scan_draft
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)


@dataclass
class TimedDraft:
    wall_seconds: float
    cpu_seconds: float  # the engine runs in this process, so CPU time covers it and is robust to other work
    tokens: list[int]
    attention: np.ndarray | None = None  # replayed source attention (with heads)
    decisions: tuple | None = None  # the AlignAtt scan's outcome: accepted tokens, each token's peak word and gate


def time_draft(lm: VLLMCausalLM, prompt, heads, budget: int, params: AlignAttParams | None) -> TimedDraft:
    """One draft, timed; with heads, including the copy of the rows, the replay and the policy scan."""
    start, start_cpu = time.perf_counter(), time.process_time()
    draft = lm.session(heads).draft(prompt.token_ids, budget, capture=heads is not None)
    attention = decisions = None
    if heads is not None and draft.tokens:
        attention = draft.source_attention(prompt.source_positions).numpy()
        scan = scan_draft(attention, prompt.source_token_word, prompt.word_count, params)
        decisions = (scan.accepted_tokens, tuple((d.source_word, d.failure) for d in scan.decisions))
    return TimedDraft(time.perf_counter() - start, time.process_time() - start_cpu, list(draft.tokens), attention,
                      decisions)


def compare_with_eager(model: str, engine: dict, heads, built, timed: list[TimedDraft], budget: int,
                       params: AlignAttParams) -> None:
    """Draft the same prompts on an eager capturing engine and print how the compiled engine's drafts differ."""
    eager = VLLMCausalLM.load(model, capture_heads=heads, **{**engine, "enforce_eager": True})
    same_tokens = same_decisions = 0
    largest = 0.0
    for prompt, compiled in zip(built, timed):
        reference = time_draft(eager, prompt, heads, budget, params)
        same_tokens += reference.tokens == compiled.tokens
        same_decisions += reference.decisions == compiled.decisions
        if reference.attention is not None and compiled.attention is not None and \
                reference.attention.shape == compiled.attention.shape:
            largest = max(largest, float(np.abs(reference.attention - compiled.attention).max()))
    eager.close()
    print(f"  compiled vs eager: tokens identical {same_tokens}/{len(built)}, decisions identical "
          f"{same_decisions}/{len(built)}, max abs diff of the replayed attention {largest:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--context-sentences", type=int, default=0)
    parser.add_argument("--compile", action="store_true", help="let vLLM compile the model (default: eager)")
    args = parser.parse_args()
    heads = resolve_heads(AlignAttConfig(model=args.model)).heads
    engine = dict(max_model_len=2048, enforce_eager=not args.compile)
    if torch.cuda.is_available():  # two engines share the GPU (vLLM would give the first 90% of its memory)
        engine["gpu_memory_utilization"] = 0.4
    plain = VLLMCausalLM.load(args.model, **engine)
    capturing = VLLMCausalLM.load(args.model, capture_heads=heads, capture_with_cuda_graphs=args.compile, **engine)
    built = prompts(PromptBuilder(plain.tokenizer, "en", "de"), args.prompts, args.context_sentences)
    params = AlignAttParams(border=-2)
    for lm, selected in ((plain, None), (capturing, heads)):  # warm-up
        time_draft(lm, built[0], selected, 4, params)
    results = {"plain": [], "capture": []}
    for prompt in built:  # interleaved, so drift in machine load hits both alike
        results["plain"].append(time_draft(plain, prompt, None, args.max_new_tokens, params))
        results["capture"].append(time_draft(capturing, prompt, heads, args.max_new_tokens, params))
    mean_prompt = statistics.mean(len(p.token_ids) for p in built)
    print(cpu_summary())
    print(f"model={args.model} prompts={len(built)} mean prompt tokens={mean_prompt:.0f} heads={len(heads)} "
          f"max_new_tokens={args.max_new_tokens} mode={'compiled' if args.compile else 'eager'}")
    print(f"  {'':8s} {'wall tokens/s':>14s} {'CPU tokens/s':>14s}")
    rates = {}
    for name, drafts in results.items():
        tokens = sum(len(d.tokens) for d in drafts)
        rates[name] = (tokens / sum(d.wall_seconds for d in drafts), tokens / sum(d.cpu_seconds for d in drafts))
        print(f"  {name:8s} {rates[name][0]:14.2f} {rates[name][1]:14.2f}")
    for index, clock in enumerate(("wall", "CPU")):
        ratio = rates["capture"][index] / rates["plain"][index]
        print(f"  capture / plain ({clock:4s}) = {ratio:.3f}  (overhead {100 * (1 - ratio):.1f}%; target <= 10%)")
    print("  capture = draft with q/k capture (+1 decode step for the last row) + row copy + replay + AlignAtt scan")
    if args.compile:
        plain.close()
        capturing.close()
        compare_with_eager(args.model, engine, heads, built, results["capture"], args.max_new_tokens, params)


if __name__ == "__main__":
    main()
