"""`make demo`: the AlignAtt4LLM speech cascade on the embedded CPU default, through simulstream's own runner.

Speaks a short English talk with espeak-ng, streams it chunk by chunk through `agents.alignatt4llm:Agent`
(Whisper base + Qwen2.5-Coder-0.5B-Instruct), prints the German output as it grows, then scores the metrics log
with OmniSTEval (BLEU, chrF, LongYAAL computation-unaware and -aware) and simulstream's real-time factor.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import eval_configs
from backends.cpu import cpu_summary

TALK = [
    ("Good morning everyone, and thank you for coming.", "Guten Morgen zusammen, und danke, dass Sie gekommen sind."),
    ("Today I will talk about simultaneous speech translation.",
     "Heute spreche ich über simultane Sprachübersetzung."),
    ("These systems translate while the speaker is still talking.",
     "Diese Systeme übersetzen, während der Sprecher noch spricht."),
    ("The main challenge is to decide when to wait and when to write.",
     "Die größte Herausforderung ist zu entscheiden, wann man wartet und wann man schreibt."),
    ("Our model reads the attention of a large language model to make this decision.",
     "Unser Modell liest die Aufmerksamkeit eines großen Sprachmodells, um diese Entscheidung zu treffen."),
    ("Thank you for your attention.", "Vielen Dank für Ihre Aufmerksamkeit."),
]


def main(output_dir: str = "runs/demo") -> None:
    from agents.simulstream_cli import main as simulstream
    from common.synthetic_speech import synthesize_talk, write_segments_yaml

    out = Path(output_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print("Speaking the talk with espeak-ng ...", flush=True)
    spoken = synthesize_talk([source for source, _ in TALK], out / "talk.wav")
    write_segments_yaml({"talk.wav": spoken}, out / "segments.yaml")
    (out / "wavs.txt").write_text("talk.wav\n")
    (out / "reference.de").write_text("".join(target + "\n" for _, target in TALK))
    log = out / "metrics.jsonl"
    arguments = ["--agent", "agents.alignatt4llm:Agent", "--config", str(eval_configs.path("alignatt4llm_cpu")),
                 "--wav-list", str(out / "wavs.txt"), "--src-lang", "en", "--tgt-lang", "de",
                 "--metrics-log", str(log)]
    print(f"$ simulstream {' '.join(arguments)}", flush=True)
    if simulstream(arguments) != 0:
        sys.exit(1)

    print("\nThe German output as it grew (seconds of audio heard: new words):")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    chunks = [r for r in records if "generated_tokens" in r]
    for record in chunks:
        if record["generated_tokens"]:
            print(f"  {record['total_audio_processed']:6.2f} s: {''.join(record['generated_tokens']).strip()}")
    audio = chunks[-1]["total_audio_processed"]
    print(f"\nFinal: {''.join(t for r in chunks for t in r['generated_tokens'])}")

    scores_dir = out / "omnisteval"
    subprocess.run([Path(sys.executable).parent / "omnisteval", "longform", "--speech_segmentation",
                    out / "segments.yaml", "--ref_sentences_file", out / "reference.de", "--hypothesis_file", log,
                    "--hypothesis_format", "simulstream", "--simulstream_config_file", f"{log}.config.yaml",
                    "--word_level", "--lang", "de", "--output_folder", scores_dir],
                   check=True, capture_output=True)
    scores = dict(line.split("\t")[:2] for line in (scores_dir / "scores.tsv").read_text().splitlines()[1:])
    compute = sum(r["computation_time"] for r in chunks)
    print("\nScores (OmniSTEval long-form; latencies in ms):")
    for name in ("BLEU", "chrF", "LongYAAL (CU)", "LongYAAL (CA)"):
        print(f"  {name:14s} {float(scores[name]):8.2f}")
    print(f"  {'RTF':14s} {compute / audio:8.2f}   (computation time / audio time; {cpu_summary()})")
    print(f"\nEverything is in {out}/ (metrics log, its eval config, the wav, references, segments).")


if __name__ == "__main__":
    main(*sys.argv[1:])
