"""Which of two languages a few words of a draft are written in, from the commonest function words of the track's
languages (English, German, Italian, Czech; Chinese by its script). Pure data and one counting rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.units import CJK_LANGUAGES, is_cjk_unit_char, primary_language

# Each language's commonest function words, lower case, without punctuation (as `policies.degenerate.comparison_key`
# writes a unit: "don't" -> "dont"). A word common in two languages is listed in both ("in", "so", "was", "a"), so
# that it counts for neither: only a word of one language and not the other is evidence (`exclusive_words`).
FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("""
        the a an and of to in is are was were be been being that this these those it its we you they he she i me
        my our your their us them what which who whom there here not no but or if so do does did how why when can
        will would should could about from at by with for on as have has had just very also then now than some like
        all one going want think really lets dont im ive weve youre theyre thats whats theres isnt arent
        into over because""".split()),
    "de": frozenset("""
        der die das und ist sind ich wir sie es ein eine einen einem einer eines nicht zu mit von den dem des auf
        für im in dass wie auch aber oder wenn jetzt dann sehr diese dieser dieses diesen diesem haben hat habe
        wird werden wurde wurden kann können müssen muss uns unser unsere unseren mein meine heute nur noch schon
        über bei aus nach um was so also an man will gibt hallo vielen dank ihr ihnen war sein zum zur vom beim
        sich mich mir dies weil denn kein keine alle""".split()),
    "it": frozenset("""
        il lo la i gli le un una uno e è di da del della dello dei degli delle che non per con su sono siamo sei
        questo questa questi queste come anche ma o se qui ora molto noi io ci si ho abbiamo ha hanno nel nella
        nei al alla alle ai sul sulla grazie ciao più perché quando cosa sia tutti essere stato può fare mi ti vi
        a in no""".split()),
    "cs": frozenset("""
        a je jsou se na v ve že to z ze do o k s pro jako ale nebo když tak také jsem jsme ten ta tento tato toto
        které který která by bylo byl byla není už jen velmi při podle před po od co jak tady teď vás nás mi
        si bude budou má mají své jeho její jejich tedy proto aby i on""".split()),
}


def has_function_words(lang: str) -> bool:
    """Whether `language_evidence` can recognise `lang` (its function words, or its script)."""
    lang = primary_language(lang)
    return lang in FUNCTION_WORDS or lang in CJK_LANGUAGES


def pair_has_function_words(source_lang: str, target_lang: str) -> bool:
    """Whether the source language's function words are listed and `language_evidence` can recognise the target,
    so a text in one can be told from the other (the rules that read them are off for any other pair)."""
    return primary_language(source_lang) in FUNCTION_WORDS and has_function_words(target_lang)


def exclusive_words(lang: str, other: str) -> frozenset[str]:
    """The function words of `lang` that are not function words of `other`."""
    return FUNCTION_WORDS.get(primary_language(lang), frozenset()) - FUNCTION_WORDS.get(primary_language(other),
                                                                                         frozenset())


def language_evidence(keys: Sequence[str], source_lang: str, target_lang: str) -> tuple[int, int]:
    """(source, target): how many of `keys` (units as `comparison_key` writes them) are function words of the source
    language only, and how many belong to the target only: its function words only, or, for a CJK target, any
    unit in its script."""
    source_only = exclusive_words(source_lang, target_lang)
    target_only = exclusive_words(target_lang, source_lang)
    cjk_target = primary_language(target_lang) in CJK_LANGUAGES
    source = sum(key in source_only for key in keys)
    target = sum(key in target_only or (cjk_target and any(is_cjk_unit_char(c) for c in key)) for key in keys)
    return source, target
