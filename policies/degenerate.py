"""Where a one-line translation draft stops being a translation (a line break, a loop, a foreign script, a copy of
the source, a turn into its language, an opening with its first word): pure rules, decided as one by `DraftGuard`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from dataclasses import dataclass

from policies.function_words import FUNCTION_WORDS, exclusive_words, language_evidence, pair_has_function_words
from policies.units import Unit, is_cjk_unit_char, primary_language, split_units, units_prefix_length

# A loop of a block of m units needs this many copies in a row before it is cut: one-unit and two-unit repeats
# occur in real text ("sehr, sehr", "谢谢"), longer blocks repeated even twice do not.
SHORT_BLOCK_REPEATS = 3
LONG_BLOCK_REPEATS = 2
SHORT_BLOCK = {"word": 2, "char": 3}  # blocks of at most this many units are short
MAX_BLOCK = 16  # longest block searched for (units)
_PUNCTUATION = re.compile(r"[\W_]+", re.UNICODE)


PUNCTUATION_KEY = "<punct>"  # what `comparison_key` makes of a unit of punctuation alone


def comparison_key(unit: str) -> str:
    """A unit as a loop compares it: case and punctuation ignored ("Sie." == "sie," ; "." == "…")."""
    bare = _PUNCTUATION.sub("", unit).casefold()
    return bare if bare else PUNCTUATION_KEY


def loop_start(units: Sequence[str], unit: Unit) -> int | None:
    """Index where the second copy of a loop at the END of `units` begins (one copy is kept), or None: a block of m
    <= MAX_BLOCK units repeated SHORT_BLOCK_REPEATS times in a row (short blocks) or LONG_BLOCK_REPEATS (longer),
    units compared by `comparison_key`; of several blocks, the one that cuts the most."""
    keys = [comparison_key(u) for u in units]
    n = len(keys)
    best: int | None = None
    for block in range(1, min(MAX_BLOCK, n // 2) + 1):
        needed = SHORT_BLOCK_REPEATS if block <= SHORT_BLOCK[unit] else LONG_BLOCK_REPEATS
        if block * needed > n:
            continue
        tail = keys[n - block:]
        copies = 1
        while (copies + 1) * block <= n and keys[n - (copies + 1) * block: n - copies * block] == tail:
            copies += 1
        if copies >= needed:
            start = n - (copies - 1) * block
            best = start if best is None else min(best, start)
    return best


def foreign_script_start(units: Sequence[str], target_lang: str) -> int | None:
    """Index of the first unit in CJK or hangul script where the target language is written with an alphabet (the
    model switched language: "up 至 40 BLEURT"), or None; nothing is foreign to a zh, ja or ko target."""
    if primary_language(target_lang) in ("zh", "ja", "ko"):
        return None
    return next((index for index, unit in enumerate(units)
                 if any(is_cjk_unit_char(c) or "\uac00" <= c <= "\ud7a3" for c in unit)), None)


COPY_LOWER_CASE = 2  # of a copied run's units, at least this many written in lower case (see `copy_start`)


def copy_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_words: Sequence[str],
               run: int) -> int | None:
    """Index in `draft_units` where `prefix_units` + draft repeat `run` consecutive source words (`comparison_key`),
    at least COPY_LOWER_CASE of them in lower case (a kept name or term is mostly capitalised), or None: the model
    copies instead of translating ("So was needed for a good generalization?"). A run begun in the prefix gives 0."""
    if run < 1 or len(source_words) < run:
        return None
    source_keys = [comparison_key(w) for w in source_words]
    source_runs = {tuple(source_keys[i:i + run]) for i in range(len(source_keys) - run + 1)}
    units = [*prefix_units, *draft_units]
    keys = [comparison_key(u) for u in units]
    for index in range(max(0, len(prefix_units) - run + 1), len(keys) - run + 1):
        if tuple(keys[index:index + run]) in source_runs and sum(
                _lower_case(u) for u in units[index:index + run]) >= min(COPY_LOWER_CASE, run):
            return max(0, index - len(prefix_units))
    return None


OPENING_COPY_WORDS = 2  # see `opening_copy_start`


def opening_copy_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_words: Sequence[str],
                       run: int) -> int | None:
    """0 where a segment's draft, nothing of it committed and too short for a `copy_start` run, opens with the
    source's first OPENING_COPY_WORDS words, one in lower case ("Pretrained parameters" for "Pretrained parameters
    can contain"): once committed, the rest went on in English. Else None."""
    opening = min(run, OPENING_COPY_WORDS)
    if run < 1 or prefix_units or not opening <= len(draft_units) < run or len(source_words) < opening:
        return None
    matches = list(map(comparison_key, draft_units[:opening])) == list(map(comparison_key, source_words[:opening]))
    return 0 if matches and any(_lower_case(u) for u in draft_units[:opening]) else None


OPENING_LANGUAGE_UNITS = 8  # a segment's opening draft is judged by the language of this many of its first units


def opens_in_source_language(prefix_units: Sequence[str], draft_units: Sequence[str], source_lang: str,
                             target_lang: str) -> bool:
    """Whether a segment's draft, nothing of it committed yet, opens in the source language: its first
    OPENING_LANGUAGE_UNITS units hold a function word of the source language only and none of the target's ("God's
    love is" for "God-mourning everyone and", no copy). False for a pair whose function words are not listed."""
    if prefix_units or not pair_has_function_words(source_lang, target_lang):
        return False
    keys = [comparison_key(u) for u in draft_units[:OPENING_LANGUAGE_UNITS]]
    source, target = language_evidence(keys, source_lang, target_lang)
    return source >= 1 and target == 0


def opens_with_source_word(prefix_units: Sequence[str], draft_units: Sequence[str], source_words: Sequence[str],
                           source_lang: str, target_lang: str) -> bool:
    """Whether a segment's draft, nothing of it committed yet, opens with the source's first word, not quoted, the
    only function word of the source language only among its first OPENING_LANGUAGE_UNITS units ("For | esempio, ci
    sono" for "For instance, there are": one word copies no run, and the target's words outnumber it)."""
    keys = [comparison_key(u) for u in draft_units[:OPENING_LANGUAGE_UNITS]]
    if prefix_units or len(keys) < 2 or keys[:1] != [comparison_key(w) for w in source_words[:1]] or \
            draft_units[0][:1] in OPENING_QUOTES or not pair_has_function_words(source_lang, target_lang):
        return False
    source_only = exclusive_words(source_lang, target_lang)
    return keys[0] in source_only and not source_only.intersection(keys[1:])


LANGUAGE_TURN_UNITS = 5  # a draft turns into the source language where this many consecutive units say so


def quoted_units(units: Sequence[str]) -> list[bool]:
    """For each unit, whether it stands inside a quotation, its marks included: a title a translation keeps in the
    source language stands there ('die Arbeit „Prompting PaLM for Translation“')."""
    inside, quoted = False, []
    for unit in units:
        inside = inside or unit[:1] in OPENING_QUOTES
        quoted.append(inside)
        if inside and len(unit) > 1 and unit.rstrip(".,;:!?")[-1:] in CLOSING_QUOTES:
            inside = False
    return quoted


def language_turn_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_lang: str, target_lang: str,
                        min_source_words: int) -> int | None:
    """Index in `draft_units` where `prefix_units` + draft turn into the source language ("Zweite, wir | aim to
    investigate the"), or None: at the first source-only function word of LANGUAGE_TURN_UNITS consecutive units with
    at least `min_source_words` of those, none of the target's, a lower-case word that is no function word (names
    are capitalised) and nothing quoted. A turn begun in the prefix gives 0; off for unlisted pairs."""
    if min_source_words < 1 or not pair_has_function_words(source_lang, target_lang):
        return None
    units = [*prefix_units, *draft_units]
    keys = [comparison_key(u) for u in units]
    quoted = quoted_units(units)
    listed = FUNCTION_WORDS[primary_language(source_lang)] | FUNCTION_WORDS.get(primary_language(target_lang),
                                                                                frozenset())
    source_only = exclusive_words(source_lang, target_lang)
    for index in range(max(0, len(prefix_units) - LANGUAGE_TURN_UNITS + 1), len(units)):
        window = range(index, min(len(units), index + LANGUAGE_TURN_UNITS))  # shorter at the end: a live draft's
        source, target = language_evidence([keys[i] for i in window], source_lang, target_lang)
        if source >= min_source_words and target == 0 and not any(quoted[i] for i in window) and any(
                _lower_case(units[i]) and keys[i] not in listed for i in window):
            turn = next(i for i in window if keys[i] in source_only)
            return max(0, turn - len(prefix_units))
    return None


def _lower_case(unit: str) -> bool:
    """Whether a unit has letters, all in lower case ("the"; not "I'm", "GPU" or "3")."""
    letters = [c for c in unit if c.isalpha()]
    return bool(letters) and all(c.islower() for c in letters)


OPENING_QUOTES = "\"“„«»「『"  # a quotation's marks (`quoted_units`)
CLOSING_QUOTES = "\"”“«»」』"


# What cut a draft (`DraftGuard.usable_length`): a line break ends a one-line translation, the others a degenerate one.
LINE_BREAK, FOREIGN_SCRIPT, LOOP = "line break", "foreign script", "loop"
DEGENERATE_CUTS = (FOREIGN_SCRIPT, LOOP)


@dataclass(frozen=True)
class Decision:
    """A draft's usable translation: its first `length` characters, ended by `cut` (or ""), of which the first `copied`
    copy nothing (None: none copies); `redraft`: drafted again with its first token banned instead (it opens with the
    source's first word); `found`: the rules whose checks found something (docs/draft_rules.md)."""

    length: int = 0
    cut: str = ""
    copied: int | None = None
    found: tuple[str, ...] = ()
    redraft: bool = False


@dataclass(frozen=True)
class DraftGuard:
    """Every rule of this module for one translation direction, decided as one: `decide`."""

    unit: Unit
    target_lang: str
    copy_run: int = 0  # `copy_length`: this many consecutive source words repeated in the draft are a copy; 0: off
    source_lang: str = ""  # `language_turn_start`, `opens_in_source_language`: the source's language
    turn_words: int = 0  # `copy_length`: a draft that turns into `source_lang` (`language_turn_start`) copies; 0: off
    off: frozenset[str] = frozenset()  # rules measured off (config.DRAFT_RULES)

    def decide(self, draft_text: str, prefix_units: Sequence[str], source_words: Sequence[str],
               live: bool = False) -> Decision:
        """A draft's usable length (`usable_length`) and, of that, what copies nothing (`copy_length`; a `live` draft
        that opens the segment in the source language copies from its start: a later draft may translate); or that
        it is drafted again without its first token (`opens_with_source_word`)."""
        found: list[str] = []
        length, cut = self.usable_length(prefix_units, draft_text, found=found)
        copied = self.copy_length(prefix_units, draft_text[:length], source_words, found=found)
        units, guarded = split_units(draft_text[:length], self.unit), self.copy_run >= 1
        if live and guarded and "opening_language" not in self.off and opens_in_source_language(
                prefix_units, units, self.source_lang, self.target_lang):
            copied = 0
            found.append("opening_language")
        redraft = guarded and "opening_word" not in self.off and opens_with_source_word(
            prefix_units, units, source_words, self.source_lang, self.target_lang)
        if redraft:
            found.append("opening_word")
        return Decision(length, cut, copied, tuple(found), redraft)

    def usable_length(self, prefix_units: Sequence[str], draft_text: str, *,
                      found: list[str] | None = None) -> tuple[int, str]:
        """(length, cut): how much of `draft_text` after `prefix_units` is still a translation, and what ended it
        (LINE_BREAK, one of DEGENERATE_CUTS, or ""); nothing after a cut is used. The rules that fired: `found`."""
        found = [] if found is None else found
        newline = re.search(r"[\r\n\u2028\u2029]", draft_text)  # a one-line translation ends there
        length, cut = (len(draft_text), "") if newline is None else (newline.start(), LINE_BREAK)
        if "foreign_script" not in self.off and (start := _found(found, "foreign_script", foreign_script_start(
                split_units(draft_text[:length], self.unit), self.target_lang))) is not None:
            length, cut = units_prefix_length(draft_text[:length], self.unit, start), FOREIGN_SCRIPT
        units = split_units(draft_text[:length], self.unit)  # a loop's second copy goes, never text before the draft
        if "loop" not in self.off and _found(found, "loop", loop := loop_start([*prefix_units, *units], self.unit)) \
                is not None:
            length, cut = units_prefix_length(draft_text[:length], self.unit, max(0, loop - len(prefix_units))), LOOP
        return length, cut

    def copy_length(self, prefix_units: Sequence[str], draft_text: str, source_words: Sequence[str], *,
                    found: list[str] | None = None) -> int | None:
        """Length of `draft_text` after `prefix_units` before it copies `source_words` (`copy_start`,
        `opening_copy_start`) or turns into the source language (`language_turn_start`), or None."""
        found = [] if found is None else found
        units = split_units(draft_text, self.unit)
        run = 0 if "copy" in self.off else self.copy_run
        copy = _found(found, "copy", copy_start(prefix_units, units, source_words, run))
        if copy is None and "opening_copy" not in self.off:
            copy = _found(found, "opening_copy", opening_copy_start(prefix_units, units, source_words, run))
        starts = [start for start in (copy, _found(found, "language_turn", language_turn_start(
            prefix_units, units, self.source_lang, self.target_lang, self.turn_words))) if start is not None]
        return units_prefix_length(draft_text, self.unit, min(starts)) if starts else None


def _found(found: list[str], rule: str, start):
    """`start`, with `rule` added to `found` where it is not None."""
    if start is not None:
        found.append(rule)
    return start


def final_budget(source_tokens: int, target_prefix_tokens: int, ratio: float, slack: int, cap: int) -> int:
    """Tokens a final draft may use: ratio x source tokens + slack for the segment's target, less what is committed,
    within [1, cap] (a budget far beyond the source's length only buys room for loops)."""
    if ratio <= 0 or slack < 0 or cap < 1:
        raise ValueError(f"need ratio > 0, slack >= 0 and cap >= 1, got {ratio}, {slack}, {cap}")
    total = math.ceil(ratio * source_tokens) + slack
    return max(1, min(cap, total - target_prefix_tokens))
