"""ms per draft token, measured side by side on the same prompts: plain greedy decoding, decoding with q/k capture
+ qk-fast replay + the AlignAtt policy, and the eager-attention reference (output_attentions at every step).

    python benchmarks/alignatt_capture.py [--model embedded] [--prompts 12] [--max-new-tokens 16]
                                          [--context-sentences 0]

Targets (issue 2): capture path <= 1.15x plain decoding and >= 2x faster than the eager reference.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from agents.systems.llm import resolve_heads
from agents.systems.config import AlignAttConfig
from backends.hf.lm import CausalLM
from backends.hf.prompt import PromptBuilder
from backends.hf.reference import eager_attention
from backends.models import load_causal_lm
from policies.alignatt import AlignAttParams, scan_draft

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


def time_plain(lm: CausalLM, prompt_ids, budget):
    start = time.perf_counter()
    draft = lm.session(None).draft(prompt_ids, budget, capture=False)
    return time.perf_counter() - start, len(draft.tokens)


def time_capture(lm: CausalLM, prompt, heads, budget, params):
    start = time.perf_counter()
    draft = lm.session(heads).draft(prompt.token_ids, budget)
    if draft.tokens:
        rows = draft.source_attention(prompt.source_positions).numpy()
        scan_draft(rows, prompt.source_token_word, prompt.word_count, params)
    return time.perf_counter() - start, len(draft.tokens)


@torch.inference_mode()
def time_eager(lm: CausalLM, prompt, heads, budget):
    """The naive reference: eager attention with output_attentions at every step, rows read from the matrices."""
    start = time.perf_counter()
    with eager_attention(lm.model):
        output = lm.model(torch.tensor([prompt.token_ids]), use_cache=True, output_attentions=True)
        cache, tokens = output.past_key_values, []
        while len(tokens) < budget:
            token = int(output.logits[0, -1].argmax())
            if token in lm.stop_token_ids:
                break
            tokens.append(token)
            output = lm.model(torch.tensor([[token]]), past_key_values=cache, use_cache=True, output_attentions=True)
            _ = torch.stack([output.attentions[l][0, h, -1, prompt.source_positions] for l, h in heads])
    return time.perf_counter() - start, len(tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--prompts", type=int, default=12)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--context-sentences", type=int, default=0,
                        help="earlier sentences prepended to each source (longer prompts, as with talk context)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_causal_lm(args.model)
    lm = CausalLM(model, tokenizer)
    config = AlignAttConfig(model=args.model)
    heads = resolve_heads(config).heads
    params = AlignAttParams(border=-2)
    built = prompts(PromptBuilder(tokenizer, "en", "de"), args.prompts, args.context_sentences)
    time_plain(lm, built[0].token_ids, 4)  # warm-up
    results = {"plain": [], "capture": [], "eager": []}
    for prompt in built:  # interleaved, so drift in machine load hits all three alike
        results["plain"].append(time_plain(lm, prompt.token_ids, args.max_new_tokens))
        results["capture"].append(time_capture(lm, prompt, heads, args.max_new_tokens, params))
        results["eager"].append(time_eager(lm, prompt, heads, args.max_new_tokens))
    ms_per_token = {
        name: 1000 * sum(t for t, _ in rows) / max(1, sum(n for _, n in rows)) for name, rows in results.items()
    }
    mean_prompt = statistics.mean(len(p.token_ids) for p in built)
    print(f"model={args.model} prompts={len(built)} mean prompt tokens={mean_prompt:.0f} "
          f"heads={len(heads)} threads={torch.get_num_threads()}")
    for name, value in ms_per_token.items():
        print(f"  {name:8s} {value:8.1f} ms/draft token")
    print(f"  capture / plain  = {ms_per_token['capture'] / ms_per_token['plain']:.3f}  (target <= 1.15)")
    print(f"  eager / capture  = {ms_per_token['eager'] / ms_per_token['capture']:.3f}  (target >= 2)")


if __name__ == "__main__":
    main()
