"""Stability units: the smallest target fragments that may be committed (words, or CJK characters).
Decides which prefix of an accepted draft ends on a complete unit, so partial words or bytes are never emitted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Literal

Unit = Literal["word", "char"]

CJK_LANGUAGES = frozenset({"zh", "ja"})

REPLACEMENT_CHARACTER = "\ufffd"  # what a tokenizer decodes an incomplete UTF-8 byte sequence to

# Code point ranges whose characters are each one unit in "char" mode.
_CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2FDF),  # CJK radicals supplement, Kangxi radicals
    (0x3000, 0x303F),  # CJK symbols and punctuation (U+3000 itself is whitespace and handled first)
    (0x3040, 0x30FF),  # hiragana, katakana
    (0x3100, 0x312F),  # bopomofo
    (0x31A0, 0x31FF),  # bopomofo extended, CJK strokes, katakana phonetic extensions
    (0x3200, 0x33FF),  # enclosed CJK letters, CJK compatibility
    (0x3400, 0x4DBF),  # CJK unified ideographs extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFE10, 0xFE1F),  # vertical forms
    (0xFE30, 0xFE4F),  # CJK compatibility forms
    (0xFF61, 0xFF9F),  # halfwidth CJK punctuation and halfwidth katakana
    (0x20000, 0x3FFFF),  # CJK unified ideographs extensions B and later, compatibility supplement
)
_FULLWIDTH_FORMS = (0xFF00, 0xFFEF)


def is_cjk_unit_char(char: str) -> bool:
    """True for a CJK ideograph, kana, or CJK/fullwidth punctuation character: each is a unit on its own."""
    code = ord(char)
    if any(low <= code <= high for low, high in _CJK_RANGES):
        return not char.isspace()
    if _FULLWIDTH_FORMS[0] <= code <= _FULLWIDTH_FORMS[1]:
        # Fullwidth punctuation and symbols ("，", "：", "！", "￥"); fullwidth letters and digits join runs.
        return unicodedata.category(char)[0] in "PS"
    return False


def primary_language(lang: str) -> str:
    """The primary subtag of a language code, lower-case: "zh-CN", "zh_Hans", "ZH" -> "zh"; "" for no code."""
    return re.split(r"[-_]", lang.strip(), maxsplit=1)[0].lower() if isinstance(lang, str) else ""


def target_unit_for(lang: str) -> Unit:
    """The stability unit of a target language: "char" for Chinese and Japanese, "word" otherwise.

    Accepts region or script suffixes ("zh-CN", "zh_Hans") by looking at the primary subtag only.
    """
    primary = primary_language(lang)
    if not primary:
        raise ValueError(f"target language code is empty ({lang!r}); pass an ISO 639-1 code such as 'de' or 'zh'")
    return "char" if primary in CJK_LANGUAGES else "word"


def _check_unit(unit: str) -> None:
    if unit not in ("word", "char"):
        raise ValueError(f"unknown stability unit {unit!r}; use 'word' or 'char' (see target_unit_for)")


def _unit_spans(text: str, unit: Unit) -> list[tuple[int, int]]:
    """(start, end) of every unit, where start is the first non-space character and end is exclusive."""
    spans: list[tuple[int, int]] = []
    position = 0
    while position < len(text):
        char = text[position]
        if char.isspace():
            position += 1
            continue
        start = position
        if unit == "char" and is_cjk_unit_char(char):
            position += 1
        else:
            position += 1
            while position < len(text) and not text[position].isspace():
                if unit == "char" and is_cjk_unit_char(text[position]):
                    break
                position += 1
        spans.append((start, position))
    return spans


def split_units(text: str, unit: Unit, continues: bool = False) -> list[str]:
    """Split text into stability units.

    "word": whitespace-separated words (``text.split()``).
    "char": each CJK ideograph, kana or CJK/fullwidth punctuation mark is one unit; a run of other non-space
    characters (Latin letters, digits, ASCII punctuation) is one unit. Whitespace stays attached to the unit that
    follows it, so ``"".join(split_units(text, "char")) == text.strip()``; with `continues` (the text continues
    units already emitted, as the next step's draft does) the first unit keeps its leading whitespace too, so
    ``"".join(...) == text.rstrip()`` and "使用" + " GPU" stays "使用 GPU".
    """
    _check_unit(unit)
    if unit == "word":
        return text.split()
    units: list[str] = []
    previous_end: int | None = 0 if continues else None
    for start, end in _unit_spans(text, unit):
        units.append(text[start if previous_end is None else previous_end : end])
        previous_end = end
    return units


def continues_last_unit(continuation: str, unit: Unit) -> bool:
    """Whether `continuation`, text drafted right after emitted units, goes on inside the last of them instead of
    starting a new one: for words, where it starts with anything but whitespace ("Open" + "AI", "Decoder" +
    "-Module", "Marker" + ", die"). Characters are concatenated anyway, so a CJK target never needs it."""
    _check_unit(unit)
    return unit == "word" and bool(continuation) and not continuation[0].isspace()


def units_prefix_length(text: str, unit: Unit, count: int) -> int:
    """Length of the prefix of `text` that holds its first `count` units (0 for none), without what follows them:
    ``text[:units_prefix_length(text, unit, n)]`` is the text of ``split_units(text, unit)[:n]``."""
    _check_unit(unit)
    if count <= 0:
        return 0
    spans = _unit_spans(text, unit)
    if count > len(spans):
        raise ValueError(f"text has {len(spans)} units, asked for the first {count}")
    return spans[count - 1][1]


def join_units(units: Iterable[str], unit: Unit) -> str:
    """Inverse of split_units: words are joined with one space, CJK units are concatenated as they are."""
    _check_unit(unit)
    return (" " if unit == "word" else "").join(units)


def _closes_trailing_run(next_char: str | None, unit: Unit) -> bool:
    """Whether the character after the text ends a trailing word / non-CJK run."""
    if next_char is None:  # unknown continuation (token budget hit): the unit may go on
        return False
    if next_char == "":  # the draft ended with end-of-sequence: the text is complete
        return True
    first = next_char[0]
    if first.isspace():
        return True
    return unit == "char" and is_cjk_unit_char(first)


def committable_prefix_length(text: str, next_char: str | None, unit: Unit) -> int:
    """Length of the longest prefix of ``text`` that ends on a complete unit (never inside one).

    ``text`` is the accepted part of a draft and ``next_char`` what follows it in the draft: a non-empty string
    when the draft continues, ``""`` when the draft ended with end-of-sequence, ``None`` when unknown (the draft
    was cut by the token budget, so the last unit may be incomplete). U+FFFD (an incomplete UTF-8 sequence) is
    never committed: the text is cut before the first one, which then counts as an unknown continuation.
    The returned prefix carries no trailing whitespace.
    """
    _check_unit(unit)
    if next_char is not None and not isinstance(next_char, str):
        raise ValueError(f"next_char must be a str or None, got {type(next_char).__name__}")
    replacement_at = text.find(REPLACEMENT_CHARACTER)
    if replacement_at >= 0:
        text, next_char = text[:replacement_at], REPLACEMENT_CHARACTER
    spans = _unit_spans(text, unit)
    if not spans:
        return 0
    last_start, last_end = spans[-1]
    last_is_cjk = unit == "char" and is_cjk_unit_char(text[last_start])
    followed_by_space = last_end < len(text)  # only whitespace can follow the last unit inside the text
    if last_is_cjk or followed_by_space or _closes_trailing_run(next_char, unit):
        return last_end
    return spans[-2][1] if len(spans) > 1 else 0
