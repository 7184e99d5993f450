"""Replays a preset's AlignAtt gate decision on recorded or synthetic attention, one draft per line, so that the
package can be held against another implementation of the gate (the paper authors' code, a port, a new backend).

    .venv/bin/python benchmarks/alignatt_replay.py --config eval_configs/alignatt4llm_paper_low.yaml < drafts.jsonl
    .venv/bin/python benchmarks/alignatt_replay.py --paper < drafts.jsonl      # the same: the paper presets' gate

Input, one JSON object a line: {"rows": T x H x S attention of each draft token's selected heads over the S source
tokens, "token_word": S word indices, "token_punct": S booleans (tokens that overlap no word once the word's leading
quotes and brackets and trailing punctuation are trimmed, as the reference code's units: `backends.prompt.
punctuation_tokens`), "accessible_words": int, "final": bool}. Output, one line each: {"accepted": draft tokens the
gate accepts before word rounding, "reason": the first rejected token's failure, or null}; a final draft accepts
every token, an empty one none (null; the reference reports `observer_empty`). Blank lines are skipped. A bad line
stops the replay with one error naming it (exit status 2).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Sequence

import numpy as np
import yaml

import eval_configs
from common.config import read_yaml
from policies.alignatt import AlignAttParams, scan_draft

PARAM_KEYS = tuple(field.name for field in dataclasses.fields(AlignAttParams))
PAPER = eval_configs.path("alignatt4llm_paper_text")  # the gate of every paper preset: the authors' (81f971a)
DRAFT_KEYS = ("rows", "token_word", "token_punct", "accessible_words", "final")


def load_preset(path: Path) -> dict:
    """The AlignAttParams keys of a YAML preset, over those of the preset it `extends`."""
    return {key: value for key, value in read_yaml(path).items() if key in PARAM_KEYS}


def decide(draft: object, params: AlignAttParams) -> dict:
    """The gate's decision on one draft (a parsed input line); ValueError naming what is wrong with a bad one."""
    if not isinstance(draft, dict):
        raise ValueError("a draft must be a JSON object")
    missing = [key for key in DRAFT_KEYS if key not in draft]
    if missing:
        raise ValueError(f"missing key(s): {', '.join(missing)}")
    token_word, token_punct = draft["token_word"], draft["token_punct"]
    if not isinstance(token_word, list) or not all(type(word) is int for word in token_word):
        raise ValueError("token_word must be a list of integers (the word index of each source token)")
    if not isinstance(token_punct, list) or not all(type(punct) is bool for punct in token_punct):
        raise ValueError("token_punct must be a list of booleans (one per source token)")
    if len(token_punct) != len(token_word):
        raise ValueError(f"token_punct has {len(token_punct)} entries for {len(token_word)} source tokens")
    if type(draft["accessible_words"]) is not int or type(draft["final"]) is not bool:
        raise ValueError("accessible_words must be an integer and final a boolean")
    try:
        rows = np.array(draft["rows"])
    except ValueError as error:  # ragged lists
        raise ValueError(f"rows must be a T x H x S array of numbers: {error}") from None
    if rows.shape == (0,):  # an empty draft
        rows = rows.reshape(0, 1, len(token_word))
    if rows.ndim != 3 or rows.dtype.kind not in "fi":
        raise ValueError(f"rows must be a T x H x S array of numbers, got shape {rows.shape} of {rows.dtype}")
    result = scan_draft(rows, np.array(token_word, dtype=np.int64), draft["accessible_words"], params,
                        np.array(token_punct, dtype=bool))
    if draft["final"]:
        return {"accepted": rows.shape[0], "reason": None}
    stopped = result.accepted_tokens < rows.shape[0]
    return {"accepted": result.accepted_tokens, "reason": result.decisions[-1].failure if stopped else None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--config", type=Path, help="YAML preset: its gate keys (AlignAttParams fields); default: "
                                                    "AlignAttParams defaults")
    choice.add_argument("--paper", action="store_true", help=f"the paper presets' gate, the authors': {PAPER.name}")
    args = parser.parse_args(argv)
    try:
        config = PAPER if args.paper else args.config
        params = AlignAttParams(**(load_preset(config) if config else {}))
    except (OSError, ValueError, TypeError, yaml.YAMLError) as error:
        print(f"alignatt_replay: preset {config}: {error}".replace("\n", " "), file=sys.stderr)
        return 2
    for number, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        try:
            decision = decide(json.loads(line), params)
        except (ValueError, TypeError, OverflowError) as error:  # json.JSONDecodeError is a ValueError
            print(f"alignatt_replay: line {number}: {error}".replace("\n", " "), file=sys.stderr)
            return 2
        print(json.dumps(decision), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
