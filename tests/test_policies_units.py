"""Tests for policies.units: target unit choice, unit splitting and the committable prefix of a draft."""

from __future__ import annotations

import random

import pytest

from policies.units import (
    CJK_LANGUAGES,
    committable_prefix_length,
    continues_last_unit,
    is_cjk_unit_char,
    join_units,
    split_units,
    target_unit_for,
    units_prefix_length,
)


# --- target_unit_for --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lang, expected", [
    ("zh", "char"), ("ja", "char"), ("ZH", "char"), ("zh-CN", "char"), ("zh_Hans", "char"), ("ja-JP", "char"),
    (" zh ", "char"), ("de", "word"), ("it", "word"), ("en-US", "word"), ("ko", "word"), ("zhx", "word"),
])
def test_target_unit_for(lang: str, expected: str) -> None:
    assert target_unit_for(lang) == expected


@pytest.mark.parametrize("lang", ["", "   ", "-CN"])
def test_target_unit_for_rejects_empty(lang: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        target_unit_for(lang)


def test_cjk_languages_is_frozen() -> None:
    assert CJK_LANGUAGES == frozenset({"zh", "ja"})
    assert isinstance(CJK_LANGUAGES, frozenset)


# --- character classes ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("char", ["我", "是", "の", "カ", "ｶ", "，", "。", "、", "「", "」", "！", "？", "：", "（", "￥", "㐀", "𠀀"])
def test_cjk_unit_chars(char: str) -> None:
    assert is_cjk_unit_char(char)


@pytest.mark.parametrize("char", ["a", "Z", "1", ",", ".", "!", "ä", "é", "-", " ", "\u3000", "\ufffd", "Ａ", "１", "“"])
def test_non_cjk_unit_chars(char: str) -> None:
    assert not is_cjk_unit_char(char)


# --- split_units / join_units -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("我是 Sara Papi，来自", ["我", "是", " Sara", " Papi", "，", "来", "自"]),
    ("我是Sara", ["我", "是", "Sara"]),
    ("Sara是", ["Sara", "是"]),
    ("  我 是  ", ["我", " 是"]),
    ("版本3.5很好", ["版", "本", "3.5", "很", "好"]),
    ("GPT-4o模型。", ["GPT-4o", "模", "型", "。"]),
    ("こんにちは、世界", ["こ", "ん", "に", "ち", "は", "、", "世", "界"]),
    ("Ａ１测试", ["Ａ１", "测", "试"]),  # fullwidth letters/digits form a run; fullwidth punctuation does not
    ("", []),
    ("   ", []),
    ("a\u3000b", ["a", "\u3000b"]),  # the ideographic space is whitespace
])
def test_split_units_char(text: str, expected: list[str]) -> None:
    assert split_units(text, "char") == expected


@pytest.mark.parametrize("text", [
    "我是 Sara Papi，来自", "  leading and trailing  ", "混合 text 和\t中文\n", "", "一", "abc", "x 我 y  z",
])
def test_split_units_char_round_trips_stripped_text(text: str) -> None:
    assert "".join(split_units(text, "char")) == text.strip()
    assert join_units(split_units(text, "char"), "char") == text.strip()


def test_split_units_char_round_trip_random() -> None:
    alphabet = ["a", "b", "1", ".", ",", " ", "  ", "\n", "我", "是", "，", "。", "カ", "Ａ", "\u3000"]
    rng = random.Random(7)
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        units = split_units(text, "char")
        assert "".join(units) == text.strip()
        assert all(unit.strip() for unit in units)  # no unit is whitespace only
        for unit in units:
            core = unit.lstrip()
            assert not any(char.isspace() for char in core)  # whitespace only at the front of a unit
            assert len(core) == 1 or not any(is_cjk_unit_char(char) for char in core)  # CJK chars stand alone


@pytest.mark.parametrize("text, expected", [
    ("Ich bin  Sara Papi,\nund", ["Ich", "bin", "Sara", "Papi,", "und"]),
    ("  ", []),
    ("我是 Sara", ["我是", "Sara"]),
])
def test_split_units_word(text: str, expected: list[str]) -> None:
    assert split_units(text, "word") == expected


def test_join_units() -> None:
    assert join_units(["Ich", "bin", "Sara"], "word") == "Ich bin Sara"
    assert join_units(["我", "是", " Sara"], "char") == "我是 Sara"
    assert join_units([], "word") == ""


@pytest.mark.parametrize("bad_unit", ["words", "character", "", "WORD"])
def test_unknown_unit_rejected(bad_unit: str) -> None:
    with pytest.raises(ValueError, match="'word' or 'char'"):
        split_units("a b", bad_unit)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'word' or 'char'"):
        join_units(["a"], bad_unit)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'word' or 'char'"):
        committable_prefix_length("a b", "", bad_unit)  # type: ignore[arg-type]


# --- committable_prefix_length, word units ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, next_char, committed", [
    ("Ich bin Sara", "", "Ich bin Sara"),  # end of sequence: the last word is complete
    ("Ich bin Sara", " ", "Ich bin Sara"),  # the draft continues with a space
    ("Ich bin Sara", "\n", "Ich bin Sara"),
    ("Ich bin Sara", " Papi", "Ich bin Sara"),  # next_char may be longer than one character
    ("Ich bin Sara", "h", "Ich bin"),  # "Sarah": the last word goes on
    ("Ich bin Sara", ",", "Ich bin"),  # the last word is "Sara," which is not complete yet
    ("Ich bin Sara", None, "Ich bin"),  # budget hit: the last word may be incomplete
    ("Ich bin Sara ", None, "Ich bin Sara"),  # whitespace inside the text closes the word
    ("Ich bin Sara  ", "P", "Ich bin Sara"),
    ("Ich", "t", ""),
    ("Ich", None, ""),
    ("Ich", "", "Ich"),
    ("", "", ""),
    ("   ", None, ""),
    ("  Ich bin", "", "  Ich bin"),  # leading whitespace is part of the prefix
    ("Straße,", "", "Straße,"),
    ("Ich bin Sa\ufffd", "", "Ich bin"),  # never commit U+FFFD, and what precedes it may be incomplete
    ("Ich bin \ufffdSara", "", "Ich bin"),
    ("Ich bin Sara", "\ufffd", "Ich bin"),
])
def test_committable_prefix_word(text: str, next_char: str | None, committed: str) -> None:
    length = committable_prefix_length(text, next_char, "word")
    assert text[:length] == committed


# --- committable_prefix_length, char units ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, next_char, committed", [
    ("我是", None, "我是"),  # a trailing CJK character is always complete
    ("我是", "a", "我是"),
    ("我是", "", "我是"),
    ("我是 Sara", "", "我是 Sara"),
    ("我是 Sara", None, "我是"),  # a trailing Latin run may continue
    ("我是 Sara", "h", "我是"),
    ("我是 Sara", " ", "我是 Sara"),
    ("我是 Sara", "，", "我是 Sara"),  # fullwidth punctuation closes the run
    ("我是 Sara", "来", "我是 Sara"),  # a CJK character closes the run
    ("我是 Sara", "。", "我是 Sara"),
    ("我是 Sara", ".", "我是"),  # ASCII punctuation continues the run
    ("我是 Sara Papi", None, "我是 Sara"),
    ("我是 Sara Papi，", None, "我是 Sara Papi，"),
    ("我是 Sara Papi，来", None, "我是 Sara Papi，来"),
    ("我是\ufffd", "", "我是"),  # incomplete UTF-8 sequence: cut before it
    ("我\ufffd是", "", "我"),  # cut before the FIRST U+FFFD
    ("我是 Sara\ufffd", "", "我是"),  # the run before U+FFFD may be incomplete
    ("我是", "\ufffd", "我是"),
    ("\ufffd我是", "", ""),
    ("Sara", None, ""),
    ("Sara", "", "Sara"),
    ("版本3", "5", "版本"),  # "35" would be one run
    ("版本3", ".", "版本"),
    ("版本3.5", "版", "版本3.5"),
    ("我是 ", None, "我是"),  # trailing whitespace is not part of the prefix
    ("Sara ", None, "Sara"),
    ("", None, ""),
])
def test_committable_prefix_char(text: str, next_char: str | None, committed: str) -> None:
    length = committable_prefix_length(text, next_char, "char")
    assert text[:length] == committed


def _unit_ends(text: str, unit: str) -> set[int]:
    """Independent reference: the end offsets of every unit in the text (pos after its last character)."""
    ends: set[int] = {0}
    consumed = len(text) - len(text.lstrip())
    for piece in split_units(text, unit) if unit == "char" else []:
        consumed += len(piece)
        ends.add(consumed)
    if unit == "word":
        position = 0
        for word in text.split():
            position = text.index(word, position) + len(word)
            ends.add(position)
    return ends


@pytest.mark.parametrize("unit", ["word", "char"])
def test_committable_prefix_never_ends_inside_a_unit_random(unit: str) -> None:
    alphabet = ["a", "b", "1", ".", ",", " ", "\n", "我", "是", "，", "。", "\ufffd", "Ａ"]
    rng = random.Random(11)
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))
        next_char = rng.choice([None, "", "a", " ", "我", "，", "\ufffd", "."])
        length = committable_prefix_length(text, next_char, unit)  # type: ignore[arg-type]
        prefix = text[:length]
        assert "\ufffd" not in prefix
        assert prefix == prefix.rstrip()
        assert length in _unit_ends(text, unit)
        # Monotone in information: the end of sequence commits at least as much as an unknown continuation.
        at_end_of_sequence = committable_prefix_length(text, "", unit)  # type: ignore[arg-type]
        assert at_end_of_sequence >= committable_prefix_length(text, None, unit)  # type: ignore[arg-type]
        # Whatever is committed stays committed when the draft is longer (stability).
        if next_char:
            assert committable_prefix_length(text + next_char, None, unit) >= length  # type: ignore[arg-type]


def test_committable_prefix_rejects_non_string_next_char() -> None:
    with pytest.raises(ValueError, match="next_char"):
        committable_prefix_length("a b", 3, "word")  # type: ignore[arg-type]


def test_split_units_char_continuing_text_keeps_the_space_before_a_latin_run() -> None:
    assert split_units(" GPU加速", "char", continues=True) == [" GPU", "加", "速"]
    assert split_units(" GPU加速", "char") == ["GPU", "加", "速"]
    emitted = ["使", "用"] + split_units(" GPU加速", "char", continues=True)
    assert join_units(emitted, "char") == "使用 GPU加速"


@pytest.mark.parametrize("text, unit", [(" wenn Sie. Sie.  Sie. ", "word"), ("我们的模型 GPU，很好。", "char"),
                                        ("", "word"), ("  ", "char")])
def test_units_prefix_length_ends_after_the_first_units(text, unit):
    units = split_units(text, unit)
    for count in range(len(units) + 1):
        prefix = text[:units_prefix_length(text, unit, count)]
        assert split_units(prefix, unit) == units[:count]
        assert count == 0 or not prefix[-1].isspace()
    with pytest.raises(ValueError, match="units"):
        units_prefix_length(text, unit, len(units) + 1)


@pytest.mark.parametrize("continuation, unit, continues", [
    ("en diskutieren.", "word", True),  # "Sprachtranslation" + "en": one word
    ("-Module, die", "word", True), (", die", "word", True), (".", "word", True),
    (" diskutieren.", "word", False), ("\ndann", "word", False), ("", "word", False),
    ("速", "char", False), ("s", "char", False),  # characters are concatenated anyway
])
def test_continues_last_unit(continuation: str, unit: str, continues: bool) -> None:
    assert continues_last_unit(continuation, unit) is continues
