"""The draft filters: line breaks, loops (one copy kept), a foreign script, copies of the source, turns into its
language, openings in it; and the final budget."""
import pytest

from policies.degenerate import (
    DEGENERATE_CUTS,
    DRAFT_FILTERS,
    DraftText,
    FilterSettings,
    copy_start,
    judge,
    make_filters,
    opening_copy_start,
    foreign_script_start,
    language_turn_start,
    loop_start,
    opens_in_source_language,
    opens_with_source_word,
    quoted_units,
)
from policies.transcript import first_loop_start
from policies.units import split_units, target_unit_for, units_prefix_length

LINE_BREAK, FOREIGN_SCRIPT, LOOP = "line_end", "foreign_script", "loop"  # the cuts' names
CUTS = (LINE_BREAK, FOREIGN_SCRIPT, LOOP)
COPIES = ("copy", "opening_copy", "language_turn")


def verdict(draft, prefix=(), source=(), names=tuple(DRAFT_FILTERS), unit="word", target_lang="de", live=False,
            copy_words=4, turn_words=1):
    """What the filters `names` (all by default) make of `draft` after `prefix`, for an English `source`."""
    filters = make_filters(names, FilterSettings(unit, "en", target_lang, copy_words, turn_words))
    return judge(filters, DraftText(draft, list(prefix), list(source), live))


def usable(prefix, draft, names=CUTS):
    """(length, cut): how much of a draft the cut filters keep, and which one cut it."""
    found = verdict(draft, prefix, names=names)
    return found.length, found.cut


def copy_length(prefix, draft, source, names=COPIES, **settings):
    """Where the copy filters find that the draft copies the source (None: nowhere)."""
    return verdict(draft, prefix, source, names=names, **settings).copied


def test_a_draft_ends_at_its_first_line_break():
    assert usable([], "Guten Tag.") == (len("Guten Tag."), "")
    assert usable([], "Guten Tag.\nGerman translation:") == (len("Guten Tag."), LINE_BREAK)
    assert usable([], "a\r\nb") == (1, LINE_BREAK)


@pytest.mark.parametrize("text, kept", [
    ("wenn Sie. Sie. Sie.", "wenn Sie."),                      # one unit three times
    ("Das ist . . . . .", "Das ist ."),                        # punctuation loop
    ("Jünglichen. Jünglichen. Jünglichen.", "Jünglichen."),
    ("So warum hat der Match prefix So warum hat der Match prefix", "So warum hat der Match prefix"),
])
def test_loop_is_cut_after_one_copy(text, kept):
    units = text.split()
    start = loop_start(units, "word")
    assert start is not None and " ".join(units[:start]) == kept


@pytest.mark.parametrize("text", [
    "Das ist sehr, sehr gut",           # a short block twice is language
    "Schritt für Schritt",
    "Die Daten, die Daten sind gut",
    "one two three four",
])
def test_real_text_is_no_loop(text):
    assert loop_start(text.split(), "word") is None


@pytest.mark.parametrize("text, kept", [
    ("The first one is generating the personas. The first one is generating the personas. The first one",
     "The first one is generating the personas."),     # a loop that does not run to the end
    ("wenn Sie. Sie. Sie. und dann", "wenn Sie."),
    ("Die Daten, die Daten sind gut", None),
])
def test_first_loop_start_finds_a_loop_anywhere(text, kept):
    units = text.split()
    start = first_loop_start(units, "word")
    assert (None if start is None else " ".join(units[:start])) == kept


def test_a_loop_followed_by_other_words_is_found_only_by_first_loop_start():
    units = "wenn Sie. Sie. Sie. und dann".split()
    assert loop_start(units, "word") is None and first_loop_start(units, "word") == 2


def test_chinese_loops_in_characters():
    assert loop_start(list("谢谢"), "char") is None
    assert loop_start(list("我们的模型我们的模型"), "char") == 5
    assert loop_start(list("好好好"), "char") == 1


def test_the_cuts_cut_at_a_line_break_or_a_loop_inside_the_draft_only():
    assert usable([], "Guten Tag.\nDeutsch:") == (len("Guten Tag."), LINE_BREAK)
    assert usable([], "Guten Tag.") == (len("Guten Tag."), "")
    # The loop began in the committed prefix: the draft keeps nothing of it.
    assert usable(["Sie.", "Sie."], " Sie. Sie.") == (0, LOOP)
    draft = " wenn Sie. Sie. Sie. Sie."
    length, cut = usable(["Ich", "weiß,"], draft)
    assert cut == LOOP and draft[:length] == " wenn Sie."
    # A loop before the line's end names the loop: the draft had stopped being a translation first.
    draft = " wenn Sie. Sie. Sie.\nDeutsch:"
    assert usable(["Ich"], draft) == (len(" wenn Sie."), LOOP)
    assert LINE_BREAK not in DEGENERATE_CUTS and LOOP in DEGENERATE_CUTS
    assert usable([], draft, names=()) == (len(draft), "")  # no filter listed: the paper's whole draft


def test_guard_cuts_a_switch_of_script():
    draft = "Query in mehrere. 自然. 模型. 翻译。"
    length, cut = usable([], draft)
    assert cut == FOREIGN_SCRIPT and draft[:length] == "Query in mehrere."
    assert foreign_script_start(["使用", " GPU"], "zh") is None
    assert foreign_script_start(["Hallo", "Welt"], "de") is None


def test_the_token_budget_follows_the_source():
    from policies.budget import token_budget

    assert token_budget(13, 2.0, 8, 1, 256) == 34
    assert token_budget(13, 2.0, 8, 1, 256, committed_tokens=30) == 4
    assert token_budget(13, 2.0, 8, 1, 256, committed_tokens=60) == 1  # never below the floor
    assert token_budget(500, 2.0, 8, 1, 256) == 256  # never above the cap
    # the reference code's budgets: min(16, max(4, source + 8)) live, min(160, max(32, 3 x source + 24)) final
    assert [token_budget(n, 1.0, 8, 4, 16) for n in (0, 3, 8, 40)] == [8, 11, 16, 16]
    assert [token_budget(n, 3.0, 24, 32, 160) for n in (2, 10, 60)] == [32, 54, 160]
    with pytest.raises(ValueError, match="need ratio >= 0"):
        token_budget(13, 2.0, 8, 0, 256)


SOURCE = "So what is needed for a good generalization ?".split()


@pytest.mark.parametrize("prefix, draft, start", [
    ("", "So was needed for a good generalization?", 2),  # the 0.5B model's copy (MCIF, offline row)
    ("", "So was benötigt für eine gute Generalisierung?", None),
    ("So was needed", "for a good generalization?", 0),  # a run that began in the committed prefix
    ("So was", "needed for a good", 0),
    ("So was", "needed for a", None),  # three words: not yet a copy
    ("", "Was ist für eine gute generalization nötig?", None),  # one kept term is no copy
])
def test_a_run_of_source_words_in_order_is_a_copy(prefix, draft, start):
    assert copy_start(prefix.split(), draft.split(), SOURCE, 4) == start


def test_a_copy_needs_lower_case_words_and_source_order():
    source = "We thank Strong Black Women Inc for the data".split()
    assert copy_start([], "Wir danken Strong Black Women Inc für die Daten".split(), source, 4) is None  # a name
    assert copy_start([], "Wir danken for the data".split(), source, 3) == 2
    assert copy_start([], "data the for Wir".split(), source, 3) is None  # the words, not in the source's order
    assert copy_start([], "needed for a good".split(), SOURCE, 0) is None  # off
    assert copy_start(["Was"], "what".split(), SOURCE, 4) is None


@pytest.mark.parametrize("source_lang, target_lang, draft, opens_in_source", [
    # `make demo` on an AVX2-only CPU: the first draft of "God-mourning everyone and" shares no word with it
    ("en", "de", "God's love is", True),
    ("en", "de", "God's love", False),  # no function word: nothing to tell by
    ("en", "de", "So, instead of doing that, we turn to", True),
    ("en", "de", "So was benötigt", False),  # "so" and "was" are German words too: no evidence either way
    ("en", "de", "We müssen", False),  # one word of each language: not told apart
    ("en", "de", "Hallo, ich bin Sara", False),
    ("en", "de", "Okay, gut.", False),
    ("en", "it", "So we are going", True),
    ("en", "it", "Ciao a tutti", False),
    ("en", "it", "I modelli linguistici", False),  # "i": an article in Italian, a pronoun in English
    ("en", "zh", "So we are going", True),
    ("en", "zh", "所以 we are going", False),  # a unit in the target's script
    ("cs", "en", "Je to velmi důležité", True),
    ("cs", "en", "It is very important", False),
    ("cs", "en", "To je", True),
    ("en", "fr", "So we are going", False),  # a pair whose function words are not listed: off
    ("fr", "en", "So we are going", False),
])
def test_a_draft_that_opens_in_the_source_language(source_lang, target_lang, draft, opens_in_source):
    units = split_units(draft, target_unit_for(target_lang))
    assert opens_in_source_language([], units, source_lang, target_lang) is opens_in_source
    assert not opens_in_source_language(["Hier"], units, source_lang, target_lang)  # only the segment's opening


def test_the_opening_language_filter_holds_a_live_draft_that_opens_in_the_source_language():
    """A live draft that opens the segment in the source language copies from its start (the turn filter, which
    would find "is" later in the draft, aside)."""
    source = "God-mourning everyone and".split()
    names = tuple(name for name in DRAFT_FILTERS if name != "language_turn")
    assert verdict("God's love is", [], source, names, live=True).copied == 0
    assert verdict("God's love is", [], source, names).copied is None  # a final draft is not held for its language
    assert verdict("love is", ["Guten"], source, names, live=True).copied is None  # committed units stay
    assert verdict("Guten Morgen, alle", [], source, names, live=True).copied is None
    assert copy_length([], "God's love is", source, names=("copy", "opening_copy")) is None  # no copy
    without = tuple(name for name in names if name != "opening_language")
    assert verdict("God's love is", [], source, without, live=True).copied is None


@pytest.mark.parametrize("source, draft, target_lang, opens", [
    # en→it calibration lines 6, 109 and 11, the segment's first drafts under AlignAtt (2026-12-07)
    ("For instance, there are lots of coverage", "For esempio, ci sono molte", "it", True),
    ("So, it's important to select a good prompting strategy.", "So, è importante selezionare", "it", True),
    ("We provide a uniform data set", "We forniamo un set", "it", True),
    ("We provide a uniform data set", "We forniamo", "de", True),
    ("For example, we put the German", "For example, we put", "it", False),  # more English: a copy's or a turn's
    ("For example, we put the German", "Per esempio, mettiamo", "it", False),
    ("So, it's important", "Ecco, è importante", "it", False),  # not the source's word
    ("Pretrained parameters can contain", "Pretrained Parameter", "de", False),  # no function word
    ('"The Matrix" is a film', '"The Matrix" è un film', "it", False),  # a quoted title keeps its words
    ("We provide a method", "We", "it", False),  # one unit: too short to tell
    ("I modelli", "I modelli", "it", False),  # "i" is an Italian article too
    ("So we are going", "So nous allons", "fr", False),  # a pair whose function words are not listed: off
])
def test_a_draft_that_opens_with_the_sources_first_word(source, draft, target_lang, opens):
    units = split_units(draft, "word")
    assert opens_with_source_word([], units, source.split(), "en", target_lang) is opens
    assert not opens_with_source_word(["Per"], units, source.split(), "en", target_lang)  # only the opening


def test_the_opening_word_filter_drafts_an_opening_with_the_sources_first_word_again():
    """The `opening_word` filter asks for the draft again (its first token banned), live and final drafts alike;
    a filter not listed does not run."""
    source = "For instance, there are lots of coverage".split()
    for live in (True, False):
        found = verdict("For esempio, ci sono molte", [], source, target_lang="it", live=live)
        assert found.redraft and "opening_word" in found.found
    assert not verdict("Per esempio, ci sono molte", [], source, target_lang="it").redraft
    without = tuple(name for name in DRAFT_FILTERS if name != "opening_word")
    assert not verdict("For esempio, ci", [], source, names=without, target_lang="it").redraft


def test_the_function_words_tell_mcif_references_from_their_sources(shared_data):
    """On the MCIF dev calibration talks: a reference opens in English only where it quotes an English title, and
    nearly every English source line opens in English (the lists' calibration; `opens_in_source_language`)."""
    from common.datasets import load_mcif, mcif_split

    for target_lang in ("de", "it", "zh"):
        lines = mcif_split(load_mcif(shared_data, target_lang), "calibration")
        unit = target_unit_for(target_lang)
        references = sum(opens_in_source_language([], split_units(line.reference, unit), "en", target_lang)
                         for line in lines)
        sources = sum(opens_in_source_language([], split_units(line.source, unit), "en", target_lang)
                      for line in lines)
        assert len(lines) > 150 and references <= 2 and sources >= 0.97 * len(lines), (target_lang, references,
                                                                                        sources)


@pytest.mark.parametrize("source_lang, target_lang, prefix, draft, turn", [
    # eval lines that stayed English after a German start (AlignAtt, 2 s preset, 2026-12-02)
    ("en", "de", "", "Wir addressed the problem of the", "the problem of the"),
    ("en", "de", "Zweite, wir aim", "to investigate the problem", "to investigate the problem"),
    ("en", "de", "", "So, instead of doing that, we turn to", "of doing that, we turn to"),
    ("en", "de", "", "Wir gehen von der Frage aus, was", None),  # German: "was" and "aus" are not English only
    ("en", "de", "", "von der University of Science and Technology of China.", None),  # a name: capitalised
    ("en", "de", "", "ist State of the Art.", None),
    ("en", "de", "", 'die Arbeit „Are you copying my model?“ vor', None),  # a quoted title
    ("en", "de", "", "das Lied Easy on Me von Adele", None),
    ("en", "de", "", "the problem", None),  # one source-only function word
    ("en", "de", "Wir betrachten the", "problem of", "problem of"),  # the turn began in the prefix: reported at the draft's start
    ("en", "it", "", "Il modello is trained on the data", "is trained on the data"),
    ("en", "zh", "", "我们 will look at the data", "will look at the data"),
    ("cs", "en", "", "We show that je to velmi důležité", "je to velmi důležité"),
    ("en", "fr", "", "Nous avons the problem of the", None),  # a pair whose function words are not listed: off
])
def test_a_draft_that_turns_into_the_source_language(source_lang, target_lang, prefix, draft, turn):
    unit = target_unit_for(target_lang)
    prefix_units, units = split_units(prefix, unit), split_units(draft, unit, continues=bool(prefix))
    start = language_turn_start(prefix_units, units, source_lang, target_lang, 2)
    assert (None if start is None else draft[units_prefix_length(draft, unit, start):].strip()) == turn
    assert language_turn_start(prefix_units, units, source_lang, target_lang, 0) is None  # off


def test_a_turn_needs_as_many_source_words_as_asked():
    units = "Wir addressed the problem".split()
    assert language_turn_start([], units, "en", "de", 1) == 2  # "the": one
    assert language_turn_start([], units, "en", "de", 2) is None
    assert language_turn_start([], [*units, "of", "the"], "en", "de", 3) == 2


def test_quoted_units_run_from_an_opening_to_a_closing_quotation_mark():
    units = 'Die Arbeit „Are you copying my model?“ kurz, "When Does" es'.split()
    assert [u for u, q in zip(units, quoted_units(units)) if q] == ["„Are", "you", "copying", "my", "model?“",
                                                                     '"When', 'Does"']


def test_a_turn_into_the_source_language_is_a_copy():
    source = "We tackled the issue of context in translation.".split()  # no copy: the words are the model's
    draft = "Wir addressed the problem of"
    assert draft[:copy_length([], draft, source, turn_words=2)] == "Wir addressed"  # a copy from "the"
    assert copy_length([], draft, source, names=("copy", "opening_copy")) is None  # not listed: off
    assert copy_length([], "Wir haben das Problem des Kontexts", source, turn_words=2) is None


def test_a_turn_is_rare_in_mcif_references_and_common_in_their_sources(shared_data):
    """The threshold's calibration (`language_turn_words` 1, chosen on the calibration talks: it flags the most
    English sources, 170 of 174 in each direction, and the same references as 2, which flags 158 / 153 / 164
    sources; 3 flags one reference less but a third fewer sources): each line read whole as a draft, a reference
    turns into English only in a title whose quotation opened on the line before, and nearly every English source
    line holds a turn."""
    from common.datasets import load_mcif, mcif_split

    for target_lang in ("de", "it", "zh"):
        lines = mcif_split(load_mcif(shared_data, target_lang), "calibration")
        unit = target_unit_for(target_lang)

        def turning(texts, words):
            return [text for text in texts
                    if language_turn_start([], split_units(text, unit), "en", target_lang, words) is not None]

        references = {words: turning([line.reference for line in lines], words) for words in (1, 2)}
        sources = {words: len(turning([line.source for line in lines], words)) for words in (1, 2)}
        assert len(lines) > 150 and len(references[1]) <= 2 and references[1] == references[2], target_lang
        assert sources[1] >= 0.95 * len(lines) and sources[1] > sources[2] >= 0.85 * len(lines), (target_lang, sources)


def test_the_filters_report_where_a_copy_begins_apart_from_their_cuts():
    draft = "So was needed for a good generalization?"
    found = verdict(draft, [], SOURCE)
    assert (found.length, found.cut) == (len(draft), "")  # a copy ends no draft
    assert draft[:found.copied] == "So was"
    assert verdict(draft, [], SOURCE, names=CUTS).copied is None  # no copy filter listed
    text = "所以 what is needed for"
    assert text[:copy_length([], text, SOURCE, names=("copy",), unit="char", target_lang="zh")] == "所以"


# Drafts the embedded model (Qwen2.5-Coder-0.5B-Instruct, bf16, AlignAtt text preset, en→de) wrote on the calibration
# text split (docs/journal/draft-rules-measurements.md, 2026-12-05): the line's hypothesis with the rule measured off,
# which is the draft that rule cut or held in the all-on run. A draft is judged as it grows (the stop condition reads
# every token), so `first_cut` reads it word by word.
CALIBRATION_DRAFTS = [
    ("loop", 18, "In this setting, the source language is the same as target language, for example German to German "
     "or English to English.", "Die Situation ist sehr " + "sehr " * 40 + "very very", "Die Situation ist sehr", LOOP),
    ("loop", 147, 'The task here is to identify the correct entity that the pronoun "he" refers to, which in this case '
     "is Servin.", "Die Aufgabe hier ist, " + "die deutsche Übersetzung des englischen Textes zu finden, das " * 3
     + "die deutsche Übersetzung des eng", "Die Aufgabe hier ist, die deutsche Übersetzung des englischen Textes zu "
     "finden, das", LOOP),
    ("foreign_script", 108, "And this can go, in extreme cases, up to 40 BLEURT points.",
     "Und dies kann gehen, in extremen Fällen, up 至 40 BLEURT Punkte.", "Und dies kann gehen, in extremen Fällen, up",
     FOREIGN_SCRIPT),
    ("foreign_script", 126, "So, it seems that PaLM chooses to produce a better-sounding translation, sometimes by "
     "dropping parts of the source sentence that are made in translation.", "So, es scheint, dass PALM eine "
     "besser-sounding Übersetzung zu produzieren, oft durch丢te Teile des Quellensatzes, die von der Ausgabe übersetzt "
     "werden.", "So, es scheint, dass PALM eine besser-sounding Übersetzung zu produzieren, oft", FOREIGN_SCRIPT),
]


def first_cut(names, draft: str) -> tuple[str, str]:
    """What the filters `names` keep of the shortest word prefix of `draft` they cut, and the cut ((draft, "") if
    none)."""
    words = draft.split(" ")
    for count in range(1, len(words) + 1):
        text = " ".join(words[:count])
        length, cut = usable([], text, names)
        if cut:
            return text[:length].rstrip(), cut
    return draft, ""


@pytest.mark.parametrize("rule, line, source, draft, kept, cut", CALIBRATION_DRAFTS)
def test_each_cut_rule_cuts_a_draft_the_model_wrote_on_the_calibration_split(rule, line, source, draft, kept, cut):
    """The all-on run's line is the kept text and what its retry wrote after it (line 147: "... zu finden, das den
    pronoun "he" ..."); with the rule off the draft went out as it was."""
    assert first_cut(CUTS, draft) == (kept, cut)
    assert first_cut(tuple(name for name in CUTS if name != rule), draft) == (draft, "")


def first_copy(names, draft: str, source: list[str]) -> tuple[int, str] | None:
    """How many words of `draft` the copy filters `names` read before they find a copy (a live step sees a draft
    grow), and what they keep then; None where they never do."""
    words = draft.split(" ")
    for count in range(1, len(words) + 1):
        text = " ".join(words[:count])
        length = copy_length([], text, source, names)
        if length is not None:
            return count, text[:length].rstrip()
    return None


@pytest.mark.parametrize("rule, line, source, draft, copied", [
    ("copy", 68, "Embedding marker contains two main steps.", "Embedding marker contains two main steps.", ""),
    # 2026-12-07, a final draft that `final_retries` 0 left as it was (the model wrote its source)
    ("opening_copy", 137, "Pretrained parameters can contain information about what presidents do and what a TV is",
     "Pretrained parameters can contain information about what presidents do and what a TV is", ""),
    ("opening_copy", 78, "Copyright verification is to detect whether a model behind another service contains the "
     "word mark.", "Copyright verification ist zu überprüfen, ob ein Model, der eine andere Service enthält", ""),
    ("copy", 41, "Pretraining on English natural language can significantly boost the performance",
     "Pretraining on English natural language can significantly boost the performance", ""),
    ("language_turn", 171, "Still, even the best-performing models seem to have difficulties with reliably "
     "integrating backward knowledge presented only at inference time.", "Auch die besten-Performing-Modelen seem to "
     "have difficulties with reliably integrating backward knowledge presented only at inference time.",
     "Auch die besten-Performing-Modelen seem"),
    ("language_turn", 160, 'In the Background-Pretrain setting, we assume that the background knowledge "Politicians '
     'seek elected seats in government" is contained in the pretrained parameters', "In der Background-Pretrain-"
     'Sitzung assumed that the background knowledge "Politicians seek elected seats in government" is contained in '
     "the pretrained parameters", "In der Background-Pretrain-Sitzung assumed"),
])
def test_each_copy_rule_finds_a_copy_the_model_wrote_on_the_calibration_split(rule, line, source, draft, copied):
    """The line's hypothesis with the rule off (calibration text split, docs/journal/draft-rules-measurements.md): the
    model copied the source, or went on in English. With the rule on, the copy is found from `copied` on, no live step
    commits it and the final draft is made again from there (the all-on line 68: "Ein Embeddingmarker enthält zwei
    Hauptstufen."); with it off, it is found later or never, or from a later word (the English words between go out)."""
    found = first_copy(COPIES, draft, source.split())
    assert found is not None and found[1] == copied
    # the copy rule off takes the opening copy with it: a copy's opening words are one (line 68: "Embedding marker")
    off_names = {rule, "opening_copy"} if rule == "copy" else {rule}
    off = first_copy(tuple(name for name in COPIES if name not in off_names), draft, source.split())
    assert off is None or off[0] > found[0] or len(off[1]) > len(found[1])  # later, or more of the English kept


@pytest.mark.parametrize("source, draft, start", [
    ("Pretrained parameters can contain", "Pretrained parameters", 0),  # calibration line 137 (both policies)
    ("Copyright verification is to detect", "Copyright verification", 0),  # calibration line 78
    ("So in our method, we first designate", "So in", 0),
    ("So in our method, we first designate", "So in unserer", 0),  # too short to tell yet: held
    ("So in our method, we first designate", "So in unserer Methode", None),  # four units: the run rule's
    ("Dan Jurafsky and Esin Durmus", "Dan Jurafsky", None),  # a name: no word in lower case
    ("GPT-4 is a model", "GPT-4", None),  # one unit: too short to tell
    ("In addition, we randomly sample 20 tasks", "In addition, wir räumlich", None),  # four units: the run decides
])
def test_a_short_draft_that_opens_with_the_sources_first_words_copies_it(source, draft, start):
    assert opening_copy_start([], draft.split(), source.split(), 4) == start
    assert opening_copy_start([], draft.split(), source.split(), 0) is None  # off
    assert opening_copy_start(["Hier"], draft.split(), source.split(), 4) is None  # only the segment's opening
