"""ms per draft token, measured side by side on the same prompts: plain greedy decoding, decoding with q/k capture
+ qk-fast replay + the AlignAtt policy, and the eager-attention reference (output_attentions at every step), on
transformers; and plain decoding and capture + replay + policy on llama.cpp (q/k through its eval callback).

    python benchmarks/alignatt_capture.py [--model embedded] [--prompts 12] [--max-new-tokens 16]
                                          [--context-sentences 0] [--hf-dtype float32] [--threads 0]
                                          [--llama-weights ''] [--no-llama]

Targets (issue 2): capture path <= 1.15x plain decoding and >= 2x faster than the eager reference.
Targets (issue 19): llama.cpp capture path >= 2.5x fewer ms per draft token than the transformers bf16 capture path,
and <= 1.10x plain llama.cpp decoding. Wall and process CPU time are both printed (CPU time is less sensitive to
other jobs on a shared machine).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from agents.systems.llm import resolve_heads
from agents.systems.config import AlignAttConfig
from backends.hf.cache_keyword import cache_kwargs, returned_cache
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.hf.reference import eager_attention
from backends.models import load_causal_lm
from policies.alignatt import AlignAttParams, scan_draft

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu import cpu_summary  # noqa: E402

SENTENCES = [
    "What is simultaneous speech translation and why does it matter for international conferences?",
    "The committee approved the new budget for schools and hospitals after a long debate last week.",
    "We evaluate our model on three language pairs and report both translation quality and latency.",
    "In this talk I will briefly introduce our work on attention heads in large language models.",
    "The results show that a small set of heads tracks word alignments across many languages.",
    "Our method needs no additional training and works with any decoder-only model off the shelf.",
]


def prompts(builder: PromptBuilder, count: int, context_sentences: int):
    """Partial sources (a third, two thirds, all of a sentence), after `context_sentences` earlier sentences."""
    built = []
    for index in range(count):
        context = [w for k in range(context_sentences) for w in SENTENCES[(index + 1 + k) % len(SENTENCES)].split()]
        words = SENTENCES[index % len(SENTENCES)].split()
        cut = max(3, len(words) * (1 + index % 3) // 3)
        built.append(builder.build(context + words[:cut], ""))
    return built


def timed(run):
    """(wall seconds, process CPU seconds, draft tokens) of `run()`, which returns the draft."""
    start, start_cpu = time.perf_counter(), time.process_time()
    draft = run()
    return time.perf_counter() - start, time.process_time() - start_cpu, len(draft.tokens)


def plain_draft(session, prompt_ids, budget):
    session.reset()  # every path starts from an empty cache (no prefix reuse across prompts)
    return session.draft(prompt_ids, budget, capture=False)


def capture_draft(session, prompt, budget, params):
    """Decoding with capture, the replay of every draft row and the policy's scan."""
    session.reset()
    draft = session.draft(prompt.token_ids, budget)
    if draft.tokens:
        rows = draft.source_attention(prompt.source_positions).numpy()
        scan_draft(rows, prompt.source_token_word, prompt.word_count, params)
    return draft


def source_rows(attentions, heads, source_positions, length: int) -> list[torch.Tensor]:
    """The last row of each head's attention matrix, at the source positions it still holds: a sliding-window
    layer's matrix covers only the last keys of the `length` positions seen (Gemma-4, past 512 tokens)."""
    rows = []
    for layer, head in heads:
        row = attentions[layer][0, head, -1]
        offset = length - row.shape[-1]
        held = source_positions[source_positions >= offset] - offset
        rows.append(row[torch.as_tensor(held, device=row.device)])
    return rows


@torch.inference_mode()
def time_eager(lm: CausalLM, prompt, heads, budget):
    """The naive reference: eager attention with output_attentions at every step, rows read from the matrices."""
    start, start_cpu = time.perf_counter(), time.process_time()
    with eager_attention(lm.model):
        output = lm.model(torch.tensor([prompt.token_ids], device=lm.device), use_cache=True, output_attentions=True)
        cache, tokens = returned_cache(output), []
        while len(tokens) < budget:
            token = int(output.logits[0, -1].argmax())
            if token in lm.stop_token_ids:
                break
            tokens.append(token)
            output = lm.model(torch.tensor([[token]], device=lm.device), **cache_kwargs(lm.model, cache),
                              use_cache=True, output_attentions=True)
            _ = source_rows(output.attentions, heads, prompt.source_positions, len(prompt.token_ids) + len(tokens))
    return time.perf_counter() - start, time.process_time() - start_cpu, len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--context-sentences", type=int, default=0,
                        help="earlier sentences prepended to each source (longer prompts, as with talk context)")
    parser.add_argument("--threads", type=int, default=0, help="torch and llama.cpp threads (0: leave as is)")
    parser.add_argument("--hf-dtype", default="float32", help="dtype of the transformers rows (bfloat16: issue 19)")
    parser.add_argument("--llama-weights", default="", help="llama.cpp: re-quantize the GGUF to this type first "
                                                            "(f32, bf16, ...; empty: the file as shipped)")
    parser.add_argument("--no-llama", action="store_true", help="skip the llama.cpp rows")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_causal_lm(args.model, dtype=args.hf_dtype)
    lm = CausalLM(model, tokenizer)
    config = AlignAttConfig(model=args.model)
    heads = resolve_heads(config).heads
    params = AlignAttParams(border=-2)
    built = prompts(PromptBuilder(tokenizer, "en", "de"), args.prompts, args.context_sentences)
    paths = {
        "plain": lambda prompt: plain_draft(lm.session(None), prompt.token_ids, args.max_new_tokens),
        "capture": lambda prompt: capture_draft(lm.session(heads), prompt, args.max_new_tokens, params),
    }
    if not args.no_llama:
        from backends.llama_cpp.lm import LlamaCppCausalLM

        llama_lm = LlamaCppCausalLM.load(args.model, n_threads=args.threads, weight_type=args.llama_weights)
        llama_plain, llama_capture = llama_lm.session(None), llama_lm.session(heads)  # one context each, reused
        paths["llama plain"] = lambda prompt: plain_draft(llama_plain, prompt.token_ids, args.max_new_tokens)
        paths["llama capture"] = lambda prompt: capture_draft(llama_capture, prompt, args.max_new_tokens, params)
    for run in paths.values():  # warm-up
        run(built[0])
    results = {name: [] for name in [*paths, "eager"]}
    for prompt in built:  # interleaved, so drift in machine load hits every path alike
        for name, run in paths.items():
            results[name].append(timed(lambda: run(prompt)))
        results["eager"].append(time_eager(lm, prompt, heads, args.max_new_tokens))
    wall = {name: 1000 * sum(r[0] for r in rows) / max(1, sum(r[2] for r in rows)) for name, rows in results.items()}
    cpu = {name: 1000 * sum(r[1] for r in rows) / max(1, sum(r[2] for r in rows)) for name, rows in results.items()}
    mean_prompt = statistics.mean(len(p.token_ids) for p in built)
    print(cpu_summary())
    print(f"model={args.model} prompts={len(built)} mean prompt tokens={mean_prompt:.0f} heads={len(heads)} "
          f"torch threads={torch.get_num_threads()} transformers dtype={args.hf_dtype}"
          + ("" if args.no_llama else f" llama.cpp file={llama_lm.gguf_path.name} threads={args.threads or 'default'}"))
    print(f"  {'path':14s} {'wall ms':>8s} {'cpu ms':>8s}  per draft token  (draft tokens)")
    for name in results:
        tokens = sum(r[2] for r in results[name])
        print(f"  {name:14s} {wall[name]:8.1f} {cpu[name]:8.1f}  ({tokens})")
    print(f"  capture / plain  = {wall['capture'] / wall['plain']:.3f}  (target <= 1.15)")
    print(f"  eager / capture  = {wall['eager'] / wall['capture']:.3f}  (target >= 2)")
    if not args.no_llama:
        for clock, values in (("wall", wall), ("cpu", cpu)):
            print(f"  [{clock}] llama capture / llama plain = {values['llama capture'] / values['llama plain']:.3f}"
                  f"  (target <= 1.10)")
            ratio = values["capture"] / values["llama capture"]
            print(f"  [{clock}] transformers capture / llama capture = {ratio:.2f}  (target >= 2.5 against "
                  f"transformers bfloat16)")


if __name__ == "__main__":
    main()
