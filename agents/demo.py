"""`make demo`: the AlignAtt4LLM text agent on the embedded CPU default, through SimulEval's own CLI.

Streams a few English sentences word by word into German and prints what was emitted after which word, then
SimulEval's BLEU and latency scores. Runs offline on 2 CPU cores in a few minutes.
"""
from __future__ import annotations

import sys
from pathlib import Path

import eval_configs

SENTENCES = [
    ("What is simultaneous speech translation?", "Was ist simultane Sprachübersetzung?"),
    ("The committee approved the new budget for schools and hospitals last week.",
     "Der Ausschuss hat letzte Woche den neuen Haushalt für Schulen und Krankenhäuser genehmigt."),
    ("We evaluate our model on three language pairs and report both quality and latency.",
     "Wir evaluieren unser Modell an drei Sprachpaaren und berichten sowohl Qualität als auch Latenz."),
]


def main(output_dir: str = "runs/demo") -> None:
    from agents.harness.simuleval import run_simuleval_cli

    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "source.txt").write_text("\n".join(source for source, _ in SENTENCES) + "\n")
    (out / "target.txt").write_text("\n".join(target for _, target in SENTENCES) + "\n")
    arguments = [
        "--agent-class", "agents.alignatt4llm.TextAgent",
        "--config", str(eval_configs.path("alignatt4llm_text_cpu")),
        "--source", str(out / "source.txt"), "--target", str(out / "target.txt"),
        "--output", str(out / "alignatt"), "--quality-metrics", "BLEU", "CHRF", "--latency-metrics", "LAAL", "AL",
        "--no-progress-bar",
    ]
    print("$ simuleval", " ".join(arguments), flush=True)
    instances = run_simuleval_cli(arguments)
    print("\nWhat was written after which source word (SimulEval's instances.log):")
    for instance in instances:
        words = instance["source"].split() if isinstance(instance["source"], str) else instance["source"]
        print(f"\n  source: {' '.join(words)}")
        for word, delay in zip(instance["prediction"].split(), instance["delays"]):
            print(f"    after {int(delay):2d} words: {word}")
    print(f"\nScores: {(out / 'alignatt' / 'scores.tsv').read_text()}")


if __name__ == "__main__":
    main(*sys.argv[1:])
