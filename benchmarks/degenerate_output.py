"""Finds degenerate translations (loops, line breaks, over-long output) of the LLM text agents on MCIF lines, and
shows what the final flush would have emitted without the guards of `policies.degenerate` (budget 256, no stop).

    python benchmarks/degenerate_output.py --split calibration --lines 40 --system waitk
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.systems.config import AlignAttConfig, WaitkConfig  # noqa: E402
from agents.systems.llm import AlignAttTranslator, WaitkTranslator  # noqa: E402
from agents.systems.events import StepLog  # noqa: E402
from backends.choice import lm_weights  # noqa: E402
from common.datasets import evenly_spaced, load_mcif, mcif_split, shared_data_dir  # noqa: E402
from common.stream import SourceWord  # noqa: E402


def unguarded_final(translator, step, budget: int = 256) -> str:
    """The final flush as it was before the guards: the whole budget, stopped by end tokens only."""
    draft = translator.session.draft(step.prompt.token_ids, budget, capture=False)
    return translator.lm.decode(draft.tokens)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", default="calibration")
    parser.add_argument("--lines", type=int, default=40)
    parser.add_argument("--system", choices=("waitk", "alignatt"), default="waitk")
    parser.add_argument("--target-lang", default="de")
    parser.add_argument("--out", type=Path, default=None, help="JSON lines with every line's outputs")
    args = parser.parse_args()
    lines = evenly_spaced(mcif_split(load_mcif(shared_data_dir(), args.target_lang), args.split), args.lines)
    if args.system == "waitk":
        config = WaitkConfig(target_lang=args.target_lang, k=3)
        translator = WaitkTranslator(lm_weights("hf", "embedded").load(), config)
    else:
        config = AlignAttConfig(target_lang=args.target_lang, border=-2)
        translator = AlignAttTranslator.from_config(config)
    log = StepLog()
    translator.observers.append(log)
    out = open(args.out, "w", encoding="utf-8") if args.out else None
    started, flagged, source_words, guarded_words, unguarded_words = time.time(), 0, 0, 0, 0
    for line in lines:
        words = line.source.split()
        translator.reset()
        log.steps.clear()
        for word in words:
            translator.feed([SourceWord(word)])
        translator.flush()
        final = log.steps[-1]
        before = unguarded_final(translator, final) if final.prompt is not None else ""
        # What the old flush would have emitted: the committed units before the final step plus its whole draft.
        committed_before = translator.target_text[: len(translator.target_text) - len(final.committed_text)].strip()
        old_text = (committed_before + " " + before.replace("\ufffd", "")).strip()
        degenerate = any(step.degenerate for step in log.steps)
        ratio_new = len(translator.target_text.split()) / len(words)
        ratio_old = len(old_text.split()) / len(words)
        source_words += len(words)
        guarded_words += len(translator.target_text.split())
        unguarded_words += len(old_text.split())
        if degenerate or ratio_old > 1.5:
            flagged += 1
            print(f"[{line.index}] source ({len(words)} words): {line.source}\n  old ({ratio_old:.2f}x): "
                  f"{old_text!r}\n  new ({ratio_new:.2f}x): {translator.target_text!r}", flush=True)
        if out:
            out.write(json.dumps({"index": line.index, "source": line.source, "reference": line.reference,
                                  "old": old_text, "new": translator.target_text, "degenerate": degenerate},
                                 ensure_ascii=False) + "\n")
    print(f"{args.system}: {len(lines)} {args.split} lines, {flagged} flagged; target/source words: guarded "
          f"{guarded_words / source_words:.2f}, unguarded final flush {unguarded_words / source_words:.2f}; "
          f"{time.time() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
