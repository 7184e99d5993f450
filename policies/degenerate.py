"""Where a one-line translation draft stops being a translation: at a line break, a loop, a switch to a script the
target language does not use, a copy of the source (or an opening or a turn in its language) instead of its
translation, or past the length its source can need; and the introduction a model may open its translation with. Pure text rules shared
by every LLM translator and backend, decided as one by `DraftGuard.decide`.
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


def line_end(text: str) -> int | None:
    """Index of the first line break in `text`, or None: a one-line translation ends there (what follows is
    another turn, an explanation or a repeated prompt)."""
    match = re.search(r"[\r\n\u2028\u2029]", text)
    return None if match is None else match.start()


PUNCTUATION_KEY = "<punct>"  # what `comparison_key` makes of a unit of punctuation alone


def comparison_key(unit: str) -> str:
    """A unit as a loop compares it: case and punctuation ignored ("Sie." == "sie," ; "." == "…")."""
    bare = _PUNCTUATION.sub("", unit).casefold()
    return bare if bare else PUNCTUATION_KEY


def loop_start(units: Sequence[str], unit: Unit) -> int | None:
    """Index of the unit where a loop at the END of `units` starts repeating, or None when the tail is no loop.

    The tail is a loop when a block of m units (1 <= m <= MAX_BLOCK) occurs r times in a row at the end, with
    r >= 3 for short blocks (m <= SHORT_BLOCK[unit]) and r >= 2 otherwise; units compare without case and
    punctuation. The returned index is where the second copy begins: everything before it is kept (one copy).
    When several blocks fit, the one whose repetition starts earliest is taken (it cuts the most).
    """
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


def first_loop_start(units: Sequence[str], unit: Unit) -> int | None:
    """Index where the earliest-ending loop in `units` starts repeating (`loop_start` of the shortest prefix that
    ends in a loop), or None: a loop need not run to the end ("The second ingredient is the model size. The second
    ingredient is the model size. The second" is cut after the first "size.")."""
    for end in range(2, len(units) + 1):
        start = loop_start(units[:end], unit)
        if start is not None:
            return start
    return None


def _runs(words: Sequence[str], size: int) -> set[tuple[str, ...]]:
    """Every `size` consecutive words of `words`, as a loop compares them (`comparison_key`)."""
    keys = [comparison_key(w) for w in words]
    return {tuple(keys[i:i + size]) for i in range(len(keys) - size + 1)}


def foreign_script_start(units: Sequence[str], target_lang: str) -> int | None:
    """Index of the first unit written in a script the target language does not use (CJK ideographs, kana or
    hangul in a language written with an alphabet: the model switched language), or None. Chinese and Japanese
    targets may hold Latin runs, so nothing is foreign to them."""
    if primary_language(target_lang) in ("zh", "ja", "ko"):
        return None
    for index, unit in enumerate(units):
        if any(is_cjk_unit_char(c) or "\uac00" <= c <= "\ud7a3" for c in unit):
            return index
    return None


COPY_LOWER_CASE = 2  # of a copied run's units, at least this many written in lower case (see `copy_start`)
# A short draft of a segment's translation that opens with the source's own first this many words, one of them in
# lower case, is a copy (see `opening_copy_start`).
OPENING_COPY_WORDS = 2


def copy_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_words: Sequence[str],
               run: int) -> int | None:
    """Index, in `draft_units`, where the target (committed `prefix_units` + draft) starts repeating `run`
    consecutive source words in order, case and punctuation aside, with at least COPY_LOWER_CASE of those units
    written in lower case; None if it never does (or `run` < 1). The model is copying the source instead of
    translating it ("So was needed for a good generalization?"); the names and terms a translation keeps are mostly
    capitalised, and a run that begins in the prefix is reported at the draft's first unit."""
    if run < 1 or len(source_words) < run:
        return None
    source_runs = _runs(source_words, run)
    units = [*prefix_units, *draft_units]
    keys = [comparison_key(u) for u in units]
    for index in range(max(0, len(prefix_units) - run + 1), len(keys) - run + 1):
        if tuple(keys[index:index + run]) in source_runs and sum(
                _lower_case(u) for u in units[index:index + run]) >= min(COPY_LOWER_CASE, run):
            return max(0, index - len(prefix_units))
    return None


def opening_copy_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_words: Sequence[str],
                       run: int) -> int | None:
    """0 where a segment's draft, nothing of it committed yet, opens as a copy that `copy_start` cannot see yet;
    else None. A draft too short for a run (fewer than `run` units) copies when its first OPENING_COPY_WORDS units
    are the source's first words, one of them in lower case: a live step early in a sentence sees only those
    words, and once they are committed the rest follows them in the same language ("Okay, now" | "I'm going to
    talk about ..."). A longer draft copies when its first `run` units (three or more) hold the source's opening
    words in order but for one, at least COPY_LOWER_CASE of them in lower case: the model writes the sentence in
    English and changes a word it heard ("God's love everyone and" for "God's Mourning everyone and"). "So in
    unserer Methode" shares only two words with "So in our method" and translates it."""
    if run < 1 or prefix_units:
        return None
    opening = min(run, OPENING_COPY_WORDS)
    if opening <= len(draft_units) < run and len(source_words) >= opening and [
            comparison_key(u) for u in draft_units[:opening]] == [comparison_key(w) for w in source_words[:opening]] \
            and any(_lower_case(u) for u in draft_units[:opening]):
        return 0
    if run > OPENING_COPY_WORDS and len(draft_units) >= run:
        matched = matched_in_order(draft_units[:run], source_words[:run + 1])
        if len(matched) >= run - 1 and sum(_lower_case(draft_units[i]) for i in matched) >= COPY_LOWER_CASE:
            return 0
    return None


OPENING_LANGUAGE_UNITS = 8  # a segment's opening draft is judged by the language of this many of its first units


def opens_in_source_language(prefix_units: Sequence[str], draft_units: Sequence[str], source_lang: str,
                             target_lang: str) -> bool:
    """Whether a segment's draft, with nothing of it committed yet, opens in the source language: among its first
    OPENING_LANGUAGE_UNITS units, at least one function word of the source language only and none of the target
    language only (`policies.function_words.language_evidence`). The model wrote the sentence in the source
    language without copying it ("God's love is" for a first chunk misheard as "God-mourning everyone and"), which
    no copy rule can see. Off (False) for a language pair whose function words are not listed."""
    if prefix_units or not pair_has_function_words(source_lang, target_lang):
        return False
    keys = [comparison_key(u) for u in draft_units[:OPENING_LANGUAGE_UNITS]]
    source, target = language_evidence(keys, source_lang, target_lang)
    return source >= 1 and target == 0


LANGUAGE_TURN_UNITS = 5  # a draft turns into the source language where this many consecutive units say so


def quoted_units(units: Sequence[str]) -> list[bool]:
    """For each unit, whether it stands inside a quotation: from a unit that opens with one of OPENING_QUOTES to
    the unit that ends with one of CLOSING_QUOTES (punctuation after it aside), both included. A title a
    translation keeps in the source language stands there ('die Arbeit „Prompting PaLM for Translation“')."""
    inside, quoted = False, []
    for unit in units:
        inside = inside or unit[:1] in OPENING_QUOTES
        quoted.append(inside)
        if inside and len(unit) > 1 and unit.rstrip(".,;:!?")[-1:] in CLOSING_QUOTES:
            inside = False
    return quoted


def language_turn_start(prefix_units: Sequence[str], draft_units: Sequence[str], source_lang: str, target_lang: str,
                        min_source_words: int) -> int | None:
    """Index, in `draft_units`, where the target (committed `prefix_units` + draft) turns into the source language:
    the first source-language function word of the first LANGUAGE_TURN_UNITS consecutive units that hold at least
    `min_source_words` function words of the source language only, none of the target's
    (`policies.function_words.language_evidence`), a lower-case word that is no function word (a name or a title
    is capitalised: "University of Science and Technology of China") and no quoted unit (`quoted_units`); None
    where it never does, or `min_source_words` < 1, or the pair's function words are not listed. A turn that
    begins in the prefix is reported at the draft's first unit. The model goes on in the source language after a
    translated start ("Zweite, wir | aim to investigate the ..."), which a copy rule misses where the words are
    the model's own."""
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


def matched_in_order(units: Sequence[str], words: Sequence[str]) -> list[int]:
    """Indices of `units` in a longest common subsequence with `words`, case and punctuation aside (a unit of
    punctuation alone matches nothing)."""
    keys = [None if key == PUNCTUATION_KEY else key for key in map(comparison_key, units)]
    targets = [comparison_key(w) for w in words]
    # lengths[i][j]: the longest common subsequence of keys[i:] and targets[j:]
    lengths = [[0] * (len(targets) + 1) for _ in range(len(keys) + 1)]
    for i in range(len(keys) - 1, -1, -1):
        for j in range(len(targets) - 1, -1, -1):
            lengths[i][j] = (lengths[i + 1][j + 1] + 1 if keys[i] == targets[j]
                             else max(lengths[i + 1][j], lengths[i][j + 1]))
    matched, i, j = [], 0, 0
    while i < len(keys) and j < len(targets):
        if keys[i] == targets[j]:
            matched.append(i)
            i, j = i + 1, j + 1
        elif lengths[i + 1][j] >= lengths[i][j + 1]:
            i += 1
        else:
            j += 1
    return matched


def _lower_case(unit: str) -> bool:
    """Whether a unit has letters and all of them are lower case ("the", "don't"; not "I'm", "GPU" or "3")."""
    letters = [c for c in unit if c.isalpha()]
    return bool(letters) and all(c.islower() for c in letters)


# The introduction of a translation written by the model itself ('Die Übersetzung auf Deutsch lautet: "…', 'Ecco il
# traduttore:' and the translation on the next line): a clause of one sentence that ends in a colon and opens a
# quotation or a new line, at the very start of the segment's translation. Every preamble ends in one of
# OPENING_QUOTES or in white space that holds a line break.
OPENING_QUOTES = "\"“„«»「『"
CLOSING_QUOTES = "\"”“«»」』"
PREAMBLE_CLAUSE = r"\s*[^\W\d_][^\n:：.!?。！？" + re.escape(OPENING_QUOTES + CLOSING_QUOTES) + r"]{0,80}"
PREAMBLE = re.compile(PREAMBLE_CLAUSE + r"[:：](?:\s*[" + re.escape(OPENING_QUOTES) + r"]|[ \t]*\n\s*)")
PREAMBLE_SO_FAR = re.compile(PREAMBLE_CLAUSE + r"(?:[:：][ \t]*)?")  # what may still grow into a PREAMBLE


def may_be_quoted(source_words: Sequence[str]) -> bool:
    """A source with a colon or a quotation mark may be translated with them ('He said, "yes"' -> 'Er sagte:
    „Ja"'), so nothing is a preamble there."""
    return any(c in word for word in source_words for c in ":：" + OPENING_QUOTES + CLOSING_QUOTES)


def preamble_length(draft_text: str, source_words: Sequence[str]) -> int:
    """Length of the introduction a segment's translation opens with: a clause of the model's own that ends in a
    colon and opens a quotation ('Die Übersetzung auf Deutsch lautet: "') or a new line ('Ecco il traduttore:\\n\\n'),
    or 0 (always where the source may be quoted)."""
    if may_be_quoted(source_words):
        return 0
    match = PREAMBLE.match(draft_text)
    return 0 if match is None else match.end()


def may_become_preamble(draft_text: str, source_words: Sequence[str]) -> bool:
    """Whether a segment's opening draft, written up to `draft_text`, may still turn out to open with a preamble
    (`preamble_length`): it is one clause so far, of at most 80 characters and without a sentence end, perhaps
    followed by its colon. A policy that would commit the draft's first words drafts on until this is False:
    'Ecco' committed before ' il traduttore:\\n' showed could not be taken back."""
    return not may_be_quoted(source_words) and PREAMBLE_SO_FAR.fullmatch(draft_text) is not None


def with_opened_quotation(preamble: str) -> str:
    """`preamble` as a prompt carries it: ending in an opening quotation mark. One that ends in a new line gets '"'
    after it: without it the model wrote its introduction again or nothing (0.5B en→it, 1.5B en→it "Let's get
    started."); with it the model goes on with the translation in quotes, as after 'lautet: "'."""
    return preamble if preamble.rstrip()[-1:] in OPENING_QUOTES else preamble + '"'


def without_closing_quote(text: str) -> str:
    """`text` without the quotation mark that closes it, if one does ('… unzureichend sind."' -> '… sind.'): the
    end of a translation whose preamble opened the quotation."""
    stripped = text.rstrip()
    return stripped[:-1] + text[len(stripped):] if stripped and stripped[-1] in CLOSING_QUOTES else text


def loop_free_length(prefix_units: Sequence[str], draft_text: str, unit: Unit) -> int | None:
    """Length of the part of `draft_text` before a loop that the committed `prefix_units` plus the draft end in,
    or None when they end in no loop. The loop may begin inside the prefix; the cut never goes before the draft."""
    draft_units = split_units(draft_text, unit)
    start = loop_start([*prefix_units, *draft_units], unit)
    if start is None:
        return None
    return units_prefix_length(draft_text, unit, max(0, start - len(prefix_units)))


# What cut a draft (`DraftGuard.usable_length`), "" where nothing did. A line break is how a one-line translation
# ends, often after translating a partial source well; the other cuts mean the draft stopped being a translation.
LINE_BREAK, FOREIGN_SCRIPT, LOOP = "line break", "foreign script", "loop"
DEGENERATE_CUTS = (FOREIGN_SCRIPT, LOOP)
# A draft that copies the source (`DraftGuard.copy_length`) is still text about the source, only not translated:
# nothing is committed from the copy on while the source runs, and a final draft is made again from it.
COPY = "copied source"


@dataclass(frozen=True)
class Decision:
    """How much of one draft is a usable translation: its first `length` characters, ended by `cut` ("" where
    nothing ended it); of those, the first `copied` copy nothing (None: none copies); or, instead, a redraft with
    the draft's opening introduction `preamble` moved into the prompt. `found`: the rules whose checks found
    something (measurement: docs/draft_rules.md)."""

    length: int = 0
    cut: str = ""
    copied: int | None = None
    preamble: str = ""
    found: tuple[str, ...] = ()


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
               may_redraft: bool = False, live: bool = False) -> Decision:
        """The one decision on a draft of `draft_text` after the committed `prefix_units`: where a redraft is
        allowed, a segment's first draft that opens with an introduction of the model's own is drafted again with
        it in the prompt, its quotation opened (`Decision.preamble`); otherwise the draft's usable length
        (`usable_length`) and, of that, what copies nothing (`copy_length`; a `live` draft that opens the segment in
        the source language copies from its start: a later draft, seeing more, may translate)."""
        if may_redraft and not prefix_units and "preamble" not in self.off and (
                length := preamble_length(draft_text, source_words)):
            quoted = with_opened_quotation(draft_text[:length])
            return Decision(preamble=draft_text[:length] if "quotation" in self.off else quoted,
                            found=("preamble", *(("quotation",) if quoted != draft_text[:length] else ())))
        found: list[str] = []
        length, cut = self.usable_length(prefix_units, draft_text, found=found)
        copied = self.copy_length(prefix_units, draft_text[:length], source_words, found=found)
        if live and self.copy_run >= 1 and "opening_language" not in self.off and opens_in_source_language(
                prefix_units, split_units(draft_text[:length], self.unit), self.source_lang, self.target_lang):
            copied = 0
            found.append("opening_language")
        return Decision(length, cut, copied, "", tuple(found))

    def usable_length(self, prefix_units: Sequence[str], draft_text: str, *,
                      found: list[str] | None = None) -> tuple[int, str]:
        """(length, cut): how much of `draft_text` (the continuation of the committed `prefix_units`) is still a
        translation, and which rule ended it there: LINE_BREAK, or one of DEGENERATE_CUTS (a foreign script, a
        loop); "" where none did. After a cut the translation is over; the rest is never used. The rules that
        found something go to `found`."""
        found = [] if found is None else found
        length, cut = len(draft_text), ""
        newline = line_end(draft_text)
        if newline is not None:
            length, cut = newline, LINE_BREAK
        if "foreign_script" not in self.off and (start := _found(found, "foreign_script", foreign_script_start(
                split_units(draft_text[:length], self.unit), self.target_lang))) is not None:
            length, cut = units_prefix_length(draft_text[:length], self.unit, start), FOREIGN_SCRIPT
        loop = None if "loop" in self.off else _found(found, "loop", loop_free_length(prefix_units, draft_text[:length],
                                                                                      self.unit))
        if loop is not None:
            length, cut = loop, LOOP
        return length, cut

    def copy_length(self, prefix_units: Sequence[str], draft_text: str, source_words: Sequence[str], *,
                    found: list[str] | None = None) -> int | None:
        """Length of the part of `draft_text` (the continuation of `prefix_units`) before it starts copying
        `source_words` (`copy_start` with `copy_run` words) or turns into the source language
        (`language_turn_start` with `turn_words` words), or None where it does neither."""
        found = [] if found is None else found
        units = split_units(draft_text, self.unit)
        run = 0 if "copy" in self.off else self.copy_run
        copy = _found(found, "copy", copy_start(prefix_units, units, source_words, run))
        if copy is None and "opening_copy" not in self.off:  # the opening's near copy only where no run is found
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
    """Tokens a final draft may use: ratio x source tokens + slack in all for the segment's target, less what the
    committed target already holds, within [1, cap]. (A translation runs about as long as its source; a budget
    far beyond that only buys room for loops.)"""
    if ratio <= 0 or slack < 0 or cap < 1:
        raise ValueError(f"need ratio > 0, slack >= 0 and cap >= 1, got {ratio}, {slack}, {cap}")
    total = math.ceil(ratio * source_tokens) + slack
    return max(1, min(cap, total - target_prefix_tokens))
