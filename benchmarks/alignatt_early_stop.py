"""Decode steps and wall time of the AlignAtt text agent with the draft stopped at the first rejected token
versus the whole 16-token draft scanned afterwards (the reference's way), side by side on the same sentences.
Decisions are identical by construction (tests/test_translators.py, tests/test_real_model.py check it).

    python benchmarks/alignatt_early_stop.py [--model embedded] [--sentences 3] [--config alignatt4llm_text_cpu]
"""
from __future__ import annotations

import argparse
import time

import eval_configs
from agents.systems.config import AlignAttConfig
from agents.systems.llm import AlignAttTranslator, resolve_heads
from agents.systems.events import StepLog
from backends.hf.lm import CausalLM
from common.config import config_from_yaml
from common.stream import SourceWord
from cpu import cpu_summary  # noqa: E402  benchmarks/cpu.py (this script's folder is on sys.path)

SENTENCES = [
    "Simultaneous speech translation, or SimulST, is the process of translating spoken language into a text in "
    "another language in real time, enabling cross-language communication.",
    "The committee approved the new budget for schools and hospitals after a long debate last week.",
    "We evaluate our model on three language pairs and report both translation quality and latency.",
    "In this talk I will briefly introduce our work on attention heads in large language models.",
]


def run(translator: AlignAttTranslator, sentences: list[str]) -> tuple[int, float, list]:
    started, draft_tokens, emitted = time.perf_counter(), 0, []
    log = StepLog()
    translator.observers.append(log)
    for sentence in sentences:
        translator.reset()
        log.steps.clear()
        emitted.append([translator.feed([SourceWord(word)]).new_units for word in sentence.split()])
        draft_tokens += sum(len(step.draft.tokens) for step in log.steps)
    translator.observers.remove(log)
    return draft_tokens, time.perf_counter() - started, emitted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="embedded")
    parser.add_argument("--sentences", type=int, default=3)
    parser.add_argument("--config", default="alignatt4llm_text_cpu")
    args = parser.parse_args()
    config = config_from_yaml(AlignAttConfig, eval_configs.path(args.config), model=args.model)
    lm = CausalLM.load(config.model, dtype=config.model_dtype, device=config.model_device)
    sentences = SENTENCES[: args.sentences]
    words = sum(len(s.split()) for s in sentences)
    results = {}
    for early in (True, False):
        translator = AlignAttTranslator(lm, config, resolve_heads(config), stop_at_first_failure=early)
        results[early] = run(translator, sentences)
    assert results[True][2] == results[False][2], "early stopping changed an emission"
    print(cpu_summary())
    print(f"model={args.model} config={args.config} sentences={len(sentences)} source words={words}")
    for early, label in ((False, "whole draft, then scan"), (True, "stop at first rejection")):
        tokens, seconds, _ = results[early]
        print(f"  {label:24s} {tokens:5d} draft tokens  {seconds:7.1f} s  {1000 * seconds / words:7.0f} ms/word")
    print(f"  speed-up = {results[False][1] / results[True][1]:.2f}x, identical emissions")


if __name__ == "__main__":
    main()
