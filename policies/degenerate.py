"""Draft filters: where a one-line translation draft stops being a translation (a line break, a loop, a foreign
script, a copy of the source, a turn into its language, an opening with its first word), one small class each.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class DraftText:
    """What a filter looks at: a draft's text, the target units committed before it in the segment (`prefix`), the
    segment's source words, and whether the step is live (the source may still grow)."""

    text: str
    prefix: Sequence[str]
    source: Sequence[str]
    live: bool = False


CUT, COPY, REDRAFT = "cut", "copy", "redraft"  # what a filter's find means (`DraftFilter.kind`)


@dataclass(frozen=True)
class FilterSettings:
    """What the filters of one translation direction are set with."""

    unit: Unit
    source_lang: str
    target_lang: str
    copy_words: int = 4  # `Copy`: this many consecutive source words repeated in the draft are a copy
    turn_words: int = 1  # `LanguageTurn`: source-only function words that make a turn


class DraftFilter:
    """A rule that says where a draft stops being a translation: `find` gives the character where it does, or None;
    a rule over the draft's units (`split_units`) gives the unit instead (`start`).

    kind CUT: the text ends there (nothing after it is used; drafting stops there); COPY: from there it copies the
    source (a live step commits nothing from there, a final draft is made again from there); REDRAFT: the draft is
    made again without its first token."""

    name: str
    kind: str

    def __init__(self, settings: FilterSettings):
        self.settings = settings

    def find(self, draft: DraftText) -> int | None:
        unit = self.settings.unit
        start = self.start(split_units(draft.text, unit), draft)
        return None if start is None else units_prefix_length(draft.text, unit, start)

    def start(self, units: list[str], draft: DraftText) -> int | None:
        """The index of the draft's unit where it stops being a translation, or None."""
        raise NotImplementedError


class LineEnd(DraftFilter):
    """A one-line translation ends at its first line break."""

    name, kind = "line_end", CUT

    def find(self, draft):
        newline = re.search(r"[\r\n\u2028\u2029]", draft.text)
        return None if newline is None else newline.start()


class ForeignScript(DraftFilter):
    """The model switched script (`foreign_script_start`)."""

    name, kind = "foreign_script", CUT

    def start(self, units, draft):
        return foreign_script_start(units, self.settings.target_lang)


class Loop(DraftFilter):
    """A loop's second copy goes (`loop_start`), never text before the draft."""

    name, kind = "loop", CUT

    def start(self, units, draft):
        start = loop_start([*draft.prefix, *units], self.settings.unit)
        return None if start is None else max(0, start - len(draft.prefix))


class Copy(DraftFilter):
    """A run of `copy_words` source words repeated in order (`copy_start`)."""

    name, kind = "copy", COPY

    def start(self, units, draft):
        return copy_start(draft.prefix, units, draft.source, self.settings.copy_words)


class OpeningCopy(DraftFilter):
    """A segment's draft too short for a `Copy` run that opens with the source's first words, one of them in lower
    case (`opening_copy_start`)."""

    name, kind = "opening_copy", COPY

    def start(self, units, draft):
        return opening_copy_start(draft.prefix, units, draft.source, self.settings.copy_words)


class LanguageTurn(DraftFilter):
    """A draft that turns into the source language (`language_turn_start`)."""

    name, kind = "language_turn", COPY

    def start(self, units, draft):
        s = self.settings
        return language_turn_start(draft.prefix, units, s.source_lang, s.target_lang, s.turn_words)


class OpeningLanguage(DraftFilter):
    """A live draft that opens the segment in the source language copies from its start
    (`opens_in_source_language`): a later draft, seeing more words, may translate."""

    name, kind = "opening_language", COPY

    def start(self, units, draft):
        s = self.settings
        return 0 if draft.live and opens_in_source_language(draft.prefix, units, s.source_lang, s.target_lang) \
            else None


class OpeningWord(DraftFilter):
    """A segment's draft that opens with the source's first word is made again without it
    (`opens_with_source_word`)."""

    name, kind = "opening_word", REDRAFT

    def start(self, units, draft):
        s = self.settings
        return 0 if opens_with_source_word(draft.prefix, units, draft.source, s.source_lang, s.target_lang) else None


# Every filter by the name a preset lists it under (`draft_filters`), in the order they apply: the cuts first, each
# on what the earlier ones left, then the others on the text the cuts left.
DRAFT_FILTERS: dict[str, type[DraftFilter]] = {cls.name: cls for cls in (
    LineEnd, ForeignScript, Loop, Copy, OpeningCopy, LanguageTurn, OpeningLanguage, OpeningWord)}
DEGENERATE_CUTS = (ForeignScript.name, Loop.name)  # the cuts of a draft that stopped being a translation


@dataclass(frozen=True)
class Verdict:
    """What the filters made of a draft: its usable text is its first `length` characters, ended by the filter `cut`
    ("" where none cut it), of which the first `copied` copy nothing (None: nothing copies); `redraft`: make it again
    without its first token; `found`: the filters that found something, in order."""

    length: int
    cut: str = ""
    copied: int | None = None
    redraft: bool = False
    found: tuple[str, ...] = ()


def make_filters(names: Sequence[str], settings: FilterSettings) -> tuple[DraftFilter, ...]:
    """The filters named, in `DRAFT_FILTERS`' order; a ValueError naming an unknown one."""
    unknown = sorted(set(names) - set(DRAFT_FILTERS))
    if unknown:
        raise ValueError(f"unknown draft filter(s) {', '.join(unknown)}; the filters are {', '.join(DRAFT_FILTERS)}")
    return tuple(cls(settings) for name, cls in DRAFT_FILTERS.items() if name in names)


def judge(filters: Sequence[DraftFilter], draft: DraftText) -> Verdict:
    """Apply `filters` (`make_filters`' order) to a draft: each cut shortens the text the later filters see."""
    length, cut, copied, redraft, found = len(draft.text), "", None, False, []
    for rule in filters:
        start = rule.find(DraftText(draft.text[:length], draft.prefix, draft.source, draft.live))
        if start is None:
            continue
        found.append(rule.name)
        if rule.kind == CUT:
            length, cut = start, rule.name
        elif rule.kind == COPY:
            copied = start if copied is None else min(copied, start)
        else:
            redraft = True
    return Verdict(length, cut, copied, redraft, tuple(found))
