"""Read the hypotheses of `simulagents eval` runs, not only their scores: length against the references, empty
lines, loops, repeated clauses, copied source runs, lines that open with their source's first word ("We | forniamo")
or turn into its language, preambles, sentence periods inside a sentence and unfinished lines, one line per run of an
OUT folder (text runs: SimulEval's instances; speech runs: the output resegmented onto the reference lines by
OmniSTEval).

    .venv/bin/python -m evaluation.read_text_outputs runs/eval-text-de
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from evaluation.runs import EvaluationError, finished_runs, run_lines
from policies.degenerate import (
    CLOSING_QUOTES,
    OPENING_QUOTES,
    PUNCTUATION_KEY,
    comparison_key,
    foreign_script_start,
    language_turn_start,
    opens_in_source_language,
)
from policies.degenerate import opens_with_source_word as guard_opens_with_source_word
from policies.transcript import ends_sentence
from policies.units import split_units, target_unit_for

WORD = re.compile(r"[\w']+")
PERIOD_INSIDE = re.compile(r"\w\. [a-zäöüß]")  # "die. sehr": a full stop followed by a lower-case word


def copies_source(hypothesis: str, source: str, length: int = 4) -> bool:
    """Whether `length` consecutive hypothesis words are lower-case source words (names and terms, which references
    keep too, are mostly capitalised). Each Chinese or Japanese character is a word of its own, so English left
    inside Chinese counts ("我们present our new model给大家"), and a character between two English words breaks a run."""
    source_words = {w.lower() for w in WORD.findall(source)}
    run = 0
    for word in (word for unit in split_units(hypothesis, "char") for word in WORD.findall(unit)):
        run = run + 1 if word.islower() and word in source_words else 0
        if run >= length:
            return True
    return False


def loops(hypothesis: str, unit: str = "word") -> bool:
    """Whether a block of 1-3 units (words, or Chinese/Japanese characters) comes three times in a row."""
    units = [u.strip() for u in split_units(hypothesis.lower(), unit)]  # "char" units keep the space before them
    return any(units[i:i + size] == units[i + size:i + 2 * size] == units[i + 2 * size:i + 3 * size]
               for size in (1, 2, 3) for i in range(len(units) - 3 * size + 1))


CLAUSE_UNITS = {"word": 6, "char": 8}  # a run this long said twice in one line is a repeated clause
SOURCE_REPEAT_WORDS = 4  # ... unless the source itself says some run of this many words twice


def _repeats_run(units: list[str], size: int) -> bool:
    """Whether some `size` consecutive units occur twice in `units` without overlapping."""
    first: dict[tuple[str, ...], int] = {}
    for index in range(len(units) - size + 1):
        run = tuple(units[index:index + size])
        if run in first and index - first[run] >= size:
            return True
        first.setdefault(run, index)
    return False


def repeats_clause(hypothesis: str, source: str, unit: str = "word") -> bool:
    """Whether a line says a clause twice (CLAUSE_UNITS[unit] units in a row occur again, case and punctuation
    aside, as the draft guard compares them) where its source says no SOURCE_REPEAT_WORDS words twice: a repeat that
    `loops` misses because something stands between the copies, or because it is longer than a loop's block."""
    units = [key for key in map(comparison_key, split_units(hypothesis, unit)) if key != PUNCTUATION_KEY]
    source_words = [w.lower() for w in WORD.findall(source)]
    return _repeats_run(units, CLAUSE_UNITS[unit]) and not _repeats_run(source_words, SOURCE_REPEAT_WORDS)


def opens_with_source_word(units: list[str], source_words: list[str], source_lang: str, target_lang: str) -> bool:
    """Whether a line opens with its source's own first word and goes on in the target language ("We | forniamo un
    metodo" for "We provide a method": `policies.degenerate.opens_with_source_word`, the redraft's own check); a
    source that may be quoted (a title) keeps its words."""
    return not may_be_quoted(source_words) and guard_opens_with_source_word([], units, source_words, source_lang,
                                                                              target_lang)


SENTENCE_START = re.compile(r"(?:^|[.!?。！？]\s+)")
# The model's own introduction of its translation ('Die Übersetzung auf Deutsch lautet: "…'): one clause that ends in
# a colon and an opening quotation mark, a line break or the end of the line.
PREAMBLE = re.compile(r"\s*[^\W\d_][^\n:：.!?。！？" + re.escape(OPENING_QUOTES + CLOSING_QUOTES) + r"]{0,80}[:：](?:\s*["
                      + re.escape(OPENING_QUOTES) + r"]|[ \t]*\n|\s*$)")


def may_be_quoted(source_words: list[str]) -> bool:
    """A source with a colon or a quotation mark may be translated with them ('Er sagte: „Ja"'): no preamble there."""
    return any(c in word for word in source_words for c in ":：" + OPENING_QUOTES + CLOSING_QUOTES)


def has_preamble(hypothesis: str, source: str) -> bool:
    """Whether a sentence of the line opens with an introduction of the model's own ('Die Übersetzung lautet: "')."""
    return not may_be_quoted(source.split()) and any(PREAMBLE.match(hypothesis[match.end():])
                                                     for match in SENTENCE_START.finditer(hypothesis))


def unfinished(hypothesis: str, source: str) -> bool:
    """Whether a line stops short of a sentence end that its source has ("… usando le tue" for "… or the NER task.").
    `ends_sentence` reads each whole line as one word, so its checks for a recogniser's initials and abbreviations
    never fire on a translation's last word (Italian "o." is a word, not an initial)."""
    return ends_sentence(source.rstrip()) and not ends_sentence(hypothesis.rstrip())


def describe(run: Path) -> str:
    """One line on a run's hypotheses; lengths in the target's units (Chinese: characters, OmniSTEval's and
    SimulEval's latency unit; references of Chinese speech runs have no spaces, so words would not compare)."""
    hypotheses, references, sources = run_lines(run)
    result = json.loads((run / "result.json").read_text())
    unit = target_unit_for(result["target_lang"])
    source_lang, target_lang = result.get("source_lang", "en"), result["target_lang"]
    length = sum(len(split_units(h, unit)) for h in hypotheses) / max(
        1, sum(len(split_units(r, unit)) for r in references))
    counts = {
        "empty": sum(not h.strip() for h in hypotheses),
        "loops": sum(loops(h, unit) for h in hypotheses),
        "repeated clauses": sum(repeats_clause(h, s, unit) for h, s in zip(hypotheses, sources)),
        "copied source (4+ words)": sum(copies_source(h, s) for h, s in zip(hypotheses, sources)),
        "open with the source's first word": sum(
            opens_with_source_word(split_units(h, unit), s.split(), source_lang, target_lang)
            for h, s in zip(hypotheses, sources)),
        "open in the source language": sum(
            opens_in_source_language([], split_units(h, unit), source_lang, target_lang) for h in hypotheses),
        "turn into the source language": sum(
            language_turn_start([], split_units(h, unit), source_lang, target_lang, 1) is not None
            for h in hypotheses),
        "preambles": sum(has_preamble(h, s) for h, s in zip(hypotheses, sources)),
        "foreign script": sum(foreign_script_start(split_units(h, unit), target_lang) is not None
                              for h in hypotheses),
        "period inside a sentence": sum(bool(PERIOD_INSIDE.search(h)) and not PERIOD_INSIDE.search(s)
                                        for h, s in zip(hypotheses, sources)),
        "unfinished": sum(unfinished(h, s) for h, s in zip(hypotheses, sources)),
    }
    return f"{run.name}: {len(hypotheses)} lines, {unit}s / reference {unit}s {length:.2f}; " + ", ".join(
        f"{name} {count}" for name, count in counts.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a `simulagents eval --out` folder")
    try:
        runs = finished_runs(parser.parse_args().out)
    except EvaluationError as error:
        raise SystemExit(f"error: {error}") from None
    for run in runs.values():
        print(describe(run))


if __name__ == "__main__":
    main()
