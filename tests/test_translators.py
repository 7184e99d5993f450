"""The LLM text translators (AlignAtt and wait-k) on tiny checkpoints: append-only output, stability units,
stream isolation, the extreme operating points, and clear errors for bad input."""
import copy
import dataclasses
import itertools
import json
import math
from types import SimpleNamespace
from pathlib import Path

import pytest

import backends.heads
from common.stream import Emission, SourceWord
from common.config import ConfigError, build_config
from evaluation.policy_stats import COUNTED_RULES
from policies.acceptance import Acceptance
from agents.systems.config import AlignAttConfig, LocalAgreementConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator, LocalAgreementTranslator, WaitkTranslator
from backends.heads import HeadFileError, HeadSet
from backends.hf.lm import CausalLM
from backends.models import ModelNotFoundError, load_causal_lm
from observed import observe
from policies.degenerate import DraftText
from policies.units import split_units

SENTENCE = "the committee approved the new budget for schools and hospitals after a long debate".split()


@pytest.fixture(scope="module")
def tiny_lm(tiny_checkpoint):
    return CausalLM(*load_causal_lm(str(tiny_checkpoint("qwen3"))))


def heads_of(lm, count=6):
    return HeadSet(tuple((layer, head) for layer in range(lm.model.config.num_hidden_layers)
                         for head in range(lm.model.config.num_attention_heads))[:count])


def stream(translator, words):
    """Feed word by word, then flush; return the emissions."""
    translator.reset()
    emissions = [translator.feed([SourceWord(w)]) for w in words]
    emissions.append(translator.flush())
    return emissions


def test_alignatt_output_is_append_only_and_whole_units(tiny_lm):
    translator = AlignAttTranslator(tiny_lm, AlignAttConfig(border=-1, median_width=3, final_max_new_tokens=40), heads_of(tiny_lm))
    seen = observe(translator)
    emissions = stream(translator, SENTENCE)
    assert all(e.retract_units == 0 for e in emissions)
    units = [u for e in emissions for u in e.new_units]
    assert units == translator.emitted_units
    for step in seen.steps:
        # What was committed is a prefix of the draft that ends on a complete word.
        assert step.draft_text.startswith(step.committed_text)
        rest = step.draft_text[len(step.committed_text):]
        assert rest == "" or rest[0].isspace() or step.committed_text == ""
    # The draft continues the committed target: the final text is the prompt's target prefix plus the flush.
    assert translator.target_text == " ".join(units)


def test_border_extremes_wait_for_the_end_or_accept_every_draft(tiny_lm):
    # A Chinese target: the random model's mixed-script output is not cut as a switch of script.
    never = AlignAttTranslator(tiny_lm, AlignAttConfig(border=-1000, target_lang="zh", final_max_new_tokens=40),
                               heads_of(tiny_lm))
    emissions = stream(never, SENTENCE)
    assert all(not e.new_units for e in emissions[:-1])
    # Waiting until the source is complete gives the offline (whole-sentence) translation: the offline row's
    # translator, and the same model's greedy draft up to where the guards end it.
    offline = WaitkTranslator(tiny_lm, WaitkConfig(k=1000, target_lang="zh", final_max_new_tokens=40))
    offline.flush([SourceWord(w) for w in SENTENCE])
    assert never.target_text == offline.target_text != ""
    greedy = tiny_lm.session(None).draft(never.prompts.build(SENTENCE, "").token_ids, 40, capture=False)
    greedy_text = tiny_lm.decode(greedy.tokens).replace("\ufffd", "")  # unfinished byte sequences are dropped
    assert greedy_text.strip().startswith(never.target_text)
    always = AlignAttTranslator(tiny_lm, AlignAttConfig(border=1000, final_max_new_tokens=40), heads_of(tiny_lm))
    seen = observe(always)
    stream(always, SENTENCE)
    assert all(step.scan is None or step.scan.accepted_tokens == len(step.draft.tokens) for step in seen.steps)


def test_streams_do_not_leak_into_each_other(tiny_lm):
    config = AlignAttConfig(border=-1, median_width=3, final_max_new_tokens=40)
    first = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    second = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    reference_a = [e.new_units for e in stream(first, SENTENCE)]
    reference_b = [e.new_units for e in stream(first, SENTENCE[:7])]  # same object, after reset
    # Interleave two streams on the same shared weights.
    first.reset(), second.reset()
    out_a, out_b = [], []
    for index in range(len(SENTENCE)):
        out_a.append(first.feed([SourceWord(SENTENCE[index])]).new_units)
        if index < 7:
            out_b.append(second.feed([SourceWord(SENTENCE[index])]).new_units)
    out_a.append(first.flush().new_units)
    out_b.append(second.flush().new_units)
    assert out_a == reference_a and out_b == reference_b


@pytest.mark.parametrize("target_lang, units_per_word, rate", [("de", 0.0, 1.0), ("zh", 0.0, 1.8), ("zh", 2.5, 2.5)])
def test_waitk_schedule_bounds_the_output(tiny_lm, target_lang, units_per_word, rate):
    """k = 3, then `rate` target units per word: 1 for word targets, 1.8 for Chinese characters unless set."""
    translator = WaitkTranslator(tiny_lm, WaitkConfig(k=3, target_lang=target_lang, units_per_word=units_per_word,
                                                      final_max_new_tokens=40))
    assert translator.acceptance.units_per_word == rate
    emissions = stream(translator, SENTENCE)
    written = 0
    for words_read, emission in enumerate(emissions[:-1], start=1):
        written += len(emission.new_units)
        assert written <= max(0, math.floor((words_read - 3 + 1) * rate + 1e-9))
    assert not any(e.new_units for e in emissions[:2]), "nothing before k words"


def test_the_instruction_position_reaches_the_prompt_of_every_step(tiny_lm):
    config = AlignAttConfig(border=-1, median_width=3, final_max_new_tokens=12, instruction_position="before_source")
    translator = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    seen = observe(translator)
    stream(translator, SENTENCE[:5])
    prompts = [step.prompt for step in seen.steps if step.prompt is not None]
    assert len(prompts) >= 2 and any(step.final for step in seen.steps)
    for prompt in prompts:  # the user turn: the instruction, then the source read so far
        assert f"{translator.prompts.instruction}\n\n{' '.join(SENTENCE[:prompt.word_count])}" in prompt.text


def test_flush_without_source_emits_nothing(tiny_lm):
    translator = AlignAttTranslator(tiny_lm, AlignAttConfig(), heads_of(tiny_lm))
    assert translator.flush().is_empty
    assert translator.feed([]).is_empty


def test_bad_configuration_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown language 'xx'"):
        build_config(AlignAttConfig, {"target_lang": "xx"})
    with pytest.raises(ConfigError, match="both 'en'"):
        build_config(AlignAttConfig, {"target_lang": "en"})
    with pytest.raises(ConfigError, match="instruction_position must be one of after_source, before_source"):
        build_config(AlignAttConfig, {"instruction_position": "first"})
    with pytest.raises(ConfigError, match="waitk_floor is the k of a wait-k schedule under the gate"):
        build_config(AlignAttConfig, {"waitk_floor": -1})
    with pytest.raises(HeadFileError, match="does not exist"):
        AlignAttTranslator.from_config(dataclasses.replace(AlignAttConfig(), heads=str(tmp_path / "none.json")),
                                       lm=object())
    with pytest.raises(HeadFileError, match="no default head set for model 'some/model' and direction en-de"):
        AlignAttTranslator.from_config(dataclasses.replace(AlignAttConfig(), model="some/model"), lm=object())
    shipped_heads = str(Path(backends.heads.__file__).parent / "qwen2.5-coder-0.5b-instruct_en-de.json")
    with pytest.raises(ModelNotFoundError, match="/no/such/model"):
        AlignAttTranslator.from_config(dataclasses.replace(AlignAttConfig(), model="/no/such/model",
                                                           heads=shipped_heads))


@pytest.mark.parametrize("border", [-2, -1, 0])
def test_stopping_the_draft_at_the_first_rejected_token_changes_no_decision(tiny_lm, border):
    config = AlignAttConfig(border=border, median_width=3, final_max_new_tokens=40)
    early = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm), stop_at_first_failure=True)
    full = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm), stop_at_first_failure=False)
    seen_early, seen_full = observe(early), observe(full)
    assert [e.new_units for e in stream(early, SENTENCE)] == [e.new_units for e in stream(full, SENTENCE)]
    assert [s.scan for s in seen_early.steps] == [s.scan for s in seen_full.steps]
    assert sum(len(s.draft.tokens) for s in seen_early.steps) <= sum(len(s.draft.tokens) for s in seen_full.steps)


FLOOR_TRANSLATION = "der Ausschuss hat nach einer langen Debatte den neuen Haushalt für Schulen und Krankenhäuser " \
                    "genehmigt."


def floored_translator(tiny_lm, monkeypatch, translator_class, floor: int, heard: str):
    """AlignAtt (or wait-k with k = `floor`) over a fake session that drafts the whole of FLOOR_TRANSLATION every
    step, with fake attention rows that let the gate accept the draft's tokens up to the text `heard` and no more."""
    import torch
    from backends.draft import Draft

    session = ScriptedDraftSession(tiny_lm.tokenizer, {" ".join(SENTENCE[:n]): FLOOR_TRANSLATION
                                                       for n in range(1, len(SENTENCE) + 1)})
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    if translator_class is WaitkTranslator:
        return WaitkTranslator(lm, WaitkConfig(k=floor, max_new_tokens=64, final_max_new_tokens=64))
    translator = AlignAttTranslator(lm, AlignAttConfig(border=1000, waitk_floor=floor, max_new_tokens=64,
                                                       final_max_new_tokens=64), heads_of(tiny_lm))

    def rows(draft, positions, start, stop):
        written = " ".join(translator.segment_units)
        ends = [len(written + tiny_lm.decode(draft.tokens[:index + 1])) for index in range(start, stop)]
        attention = torch.ones(stop - start, 1, len(positions))
        attention[torch.tensor(ends) > len(heard)] = float("nan")
        return attention

    monkeypatch.setattr(Draft, "source_attention", rows)
    return translator


def written_after_each_word(translator) -> list[int]:
    """How many units the translator has written after each source word (live steps only)."""
    return list(itertools.accumulate(len(e.new_units) for e in stream(translator, SENTENCE)[:-1]))


@pytest.mark.parametrize("floor, expected", [(0, [4] * 14), (2, [max(4, read - 1) for read in range(1, 15)]),
                                             (4, [max(4, read - 3) for read in range(1, 15)])])
def test_the_waitk_floor_commits_what_the_gate_or_waitk_allows_whichever_is_more(tiny_lm, monkeypatch, floor,
                                                                                  expected):
    """The gate accepts the translation's first four words. Live, after `read` words, AlignAtt has written those
    four, or with the floor as many as wait-k writes (read - k + 1), whichever is more. The policy log counts the
    steps where the floor wrote past the gate: those that took the written count above four."""
    translator = floored_translator(tiny_lm, monkeypatch, AlignAttTranslator, floor, "der Ausschuss hat nach ")
    seen = observe(translator)
    assert written_after_each_word(translator) == expected
    assert translator.target_text == FLOOR_TRANSLATION
    past_the_gate = sum(1 for before, after in zip([0, *expected], expected) if after > max(before, 4))
    assert seen.stats.floor_steps == past_the_gate and (past_the_gate > 0) == (floor > 0)
    assert seen.stats.floor_tokens >= past_the_gate


@pytest.mark.parametrize("k", [1, 3])
def test_under_a_gate_that_accepts_nothing_the_waitk_floor_writes_what_waitk_writes(tiny_lm, monkeypatch, k):
    """Every token rejected: AlignAtt with `waitk_floor` k writes, step by step, the units the wait-k translator
    with that k writes (its own schedule and stopping rule: the reference); with the floor off, nothing live."""
    waitk = written_after_each_word(floored_translator(tiny_lm, monkeypatch, WaitkTranslator, k, ""))
    floored = floored_translator(tiny_lm, monkeypatch, AlignAttTranslator, k, "")
    seen = observe(floored)
    assert written_after_each_word(floored) == waitk and waitk[-1] > 0
    assert floored.target_text == FLOOR_TRANSLATION
    assert seen.stats.floor_steps == sum(1 for before, after in zip([0, *waitk], waitk) if after > before)
    gate_alone = floored_translator(tiny_lm, monkeypatch, AlignAttTranslator, 0, "")
    seen_alone = observe(gate_alone)
    assert written_after_each_word(gate_alone) == [0] * 14
    assert seen_alone.stats.floor_steps == seen_alone.stats.floor_tokens == 0


def test_the_waitk_floor_leaves_a_draft_stopped_at_its_first_rejected_token_deciding_as_a_whole_draft(tiny_lm):
    """On the tiny model's own drafts and attention: stopping at the first rejected token (drafting on while the
    floor's units are incomplete) decides as drafting the whole budget and scanning afterwards."""
    config = AlignAttConfig(border=-1, median_width=3, final_max_new_tokens=40, target_lang="zh", waitk_floor=2)
    early = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm), stop_at_first_failure=True)
    full = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm), stop_at_first_failure=False)
    assert [e.new_units for e in stream(early, SENTENCE)] == [e.new_units for e in stream(full, SENTENCE)]


class ScriptedDraftSession:
    """Stands in for a model session (a fake: no model writes these drafts on purpose): drafts the scripted
    translation of the longest scripted source the prompt holds, after the target prefix the prompt ends with, and
    ends it with end-of-sequence as a model does once it has translated what it read."""

    def __init__(self, tokenizer, translations: dict[str, str]):
        self.tokenizer, self.translations = tokenizer, translations

    def reset(self):
        pass

    def draft(self, prompt_ids, max_new_tokens, capture=True, stop=None, banned_first_tokens=(),
              repetition_penalty=1.0):
        from backends.draft import Draft

        assert not banned_first_tokens, "the scripted translations never open with a source word"
        prompt = self.tokenizer.decode(prompt_ids)
        source = max((s for s in self.translations if s in prompt), key=len)
        prefix = prompt.rsplit("assistant\n", 1)[1].split("</think>\n\n")[-1]  # after Qwen3's empty thought
        assert self.translations[source].startswith(prefix), f"the prompt's target {prefix!r} is not the model's text"
        draft = Draft(prompt_length=len(prompt_ids))
        for token in self.tokenizer.encode(self.translations[source][len(prefix):], add_special_tokens=False):
            draft.tokens.append(token)
            if len(draft.tokens) == max_new_tokens or (stop is not None and stop(draft)):
                return draft
        draft.finished = True
        return draft


def scripted_translator(tiny_lm, translator_class, translations: dict[str, str]):
    """wait-1, or AlignAtt accepting every token (the policy writes as much as the draft holds), over a
    `ScriptedDraftSession` of `translations`."""
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer,
                         session=lambda heads: ScriptedDraftSession(tiny_lm.tokenizer, translations))
    if translator_class is WaitkTranslator:
        return WaitkTranslator(lm, WaitkConfig(k=1, final_max_new_tokens=40))
    translator = AlignAttTranslator(lm, AlignAttConfig(border=1000, final_max_new_tokens=40), heads_of(tiny_lm))
    translator.acceptance = Acceptance()  # every token accepted
    return translator


@pytest.mark.parametrize("units_per_word, written", [(0.0, [0, 0, 1, 3, 5, 7, 9, 10]),
                                                     (1.0, [0, 0, 1, 2, 3, 4, 5, 6])])
def test_waitk_writes_chinese_characters_at_the_rate_per_word(tiny_lm, units_per_word, written):
    """A Chinese translation takes about 1.8 characters per English word (the MCIF calibration references): by
    default wait-3 writes that many per word read; at one per word it wrote half the sentence after its end."""
    words = "the committee approved the new budget for schools and hospitals after debate".split()
    translation = "委员会在辩论后批准了学校和医院的新预算。"
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: ScriptedDraftSession(
        tiny_lm.tokenizer, {" ".join(words[:n]): translation for n in range(1, len(words) + 1)}))
    translator = WaitkTranslator(lm, WaitkConfig(k=3, target_lang="zh", units_per_word=units_per_word,
                                                 final_max_new_tokens=60))
    emissions = stream(translator, words[:8])
    assert list(itertools.accumulate(len(e.new_units) for e in emissions[:-1])) == written
    assert "".join(translator.emitted_units) == translation


def test_waitk_commits_whole_tokens_of_a_chinese_draft(tiny_lm):
    """"我们" is one token of two characters: a budget that ends between them commits neither (the model, whose
    prompt ended in a lone "我", went on "开发了" and the line read "我开发了"); every step ends on a token boundary
    and the whole translation is written."""
    tokenizer = copy.deepcopy(tiny_lm.tokenizer)
    tokenizer.add_tokens(["我们", "开发", "数据集"])
    words = "to solve these problems we developed a new dataset today".split()
    translation = "为了解决这些问题，我们开发了新的数据集。"
    lm = SimpleNamespace(tokenizer=tokenizer, session=lambda heads: ScriptedDraftSession(
        tokenizer, {" ".join(words[:n]): translation for n in range(1, len(words) + 1)}))
    # Two characters per word: the budgets 2, 4, ..., 16 end inside "我们" (10) and "开发" (12).
    translator = WaitkTranslator(lm, WaitkConfig(k=3, target_lang="zh", units_per_word=2.0, final_max_new_tokens=60))
    emissions = stream(translator, words)
    tokens = tokenizer.encode(translation, add_special_tokens=False)
    prefixes = (tokenizer.decode(tokens[:count]) for count in range(len(tokens) + 1))
    token_ends = {len(prefix) for prefix in prefixes if "\ufffd" not in prefix}  # not inside a character's bytes
    committed = list(itertools.accumulate(len("".join(e.new_units)) for e in emissions[:-1]))
    assert committed == [0, 0, 2, 4, 6, 8, 9, 11, 14, 16]  # 9: "，" without the "我" of "我们"
    assert all(length == 0 or length in token_ends for length in committed)
    assert "".join(translator.emitted_units) == translation


@pytest.mark.parametrize("translator_class", [WaitkTranslator, AlignAttTranslator])
def test_a_live_draft_that_ends_does_not_commit_its_last_word_before_the_punctuation_that_may_follow(
        tiny_lm, translator_class):
    """After "Good morning everyone," a model may end its draft at "zusammen" and write "zusammen, und" once
    "thank" is read. Committing "zusammen" at the draft's end left the comma a unit of its own: "zusammen , und"."""
    words = "Good morning everyone, thank you.".split()
    translations = {" ".join(words[:n]): text for n, text in [
        (1, "Guten"), (2, "Guten Morgen"), (3, "Guten Morgen zusammen"), (4, "Guten Morgen zusammen, und danke"),
        (5, "Guten Morgen zusammen, und danke Ihnen.")]}
    translator = scripted_translator(tiny_lm, translator_class, translations)
    emissions = stream(translator, words)
    units = [unit for emission in emissions for unit in emission.new_units]
    assert " ".join(units) == "Guten Morgen zusammen, und danke Ihnen."
    assert "zusammen," in units  # the word waited for its comma; before, "zusammen" and "," were two units
    # A live step commits all but the last word of a draft that ended; the final step commits the rest.
    assert [list(e.new_units) for e in emissions[:3]] == [[], ["Guten"], ["Morgen"]]


@pytest.mark.parametrize("translator_class", [WaitkTranslator, AlignAttTranslator])
def test_a_draft_that_goes_on_inside_the_last_committed_word_is_joined_to_it(tiny_lm, translator_class):
    """`make demo` on an AVX512 Xeon: a live step committed "Sprachtranslation" (its draft went on " sprechen"), and
    the final draft, hearing "translations", went on "en diskutieren.": the output read "Sprachtranslation en
    diskutieren.". The model wrote one word, so it is emitted as one (`Emission.joins_last_unit`), the next prompt
    holds it whole, and the piece takes no place in a wait-k budget."""
    words = "Here I will now discuss simultaneous speech translations today.".split()
    translations = {" ".join(words[:n]): text for n, text in [
        (1, "Hier"), (2, "Hier werde ich"), (3, "Hier werde ich die simultane Sprachtranslation sprechen"),
        (9, "Hier werde ich die simultane Sprachtranslationen heute diskutieren.")]}
    translator = scripted_translator(tiny_lm, translator_class, translations)
    emissions = stream(translator, words)
    assert " ".join(translator.emitted_units) == "Hier werde ich die simultane Sprachtranslationen heute diskutieren."
    assert [u for e in emissions[:8] for u in e.new_units][-1] == "Sprachtranslation"  # committed live
    # The live step that reads the last word drafts "en heute diskutieren." and commits all but its last word.
    assert [e for e in emissions if e.joins_last_unit] == [emissions[8]]
    assert emissions[8] == Emission(new_units=("en", "heute"), joins_last_unit=True)
    assert translator.emitted_units[-3:] == ["Sprachtranslationen", "heute", "diskutieren."]


def test_a_tokenizer_that_drops_the_leading_space_when_decoding_never_joins_a_draft_to_the_last_word():
    """Decoded alone, a SentencePiece decoder with a strip (Llama-2's) writes " und" as "und": every draft would
    look as if it went on inside the last word, so such a tokenizer turns joining off."""
    from tokenizers import decoders

    from agents.systems.llm import decodes_leading_space
    from tiny_checkpoints import build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer("qwen3")
    assert decodes_leading_space(tokenizer)
    tokenizer.backend_tokenizer.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Strip(" ", 1, 0)])
    assert tokenizer.decode(tokenizer(" und", add_special_tokens=False)["input_ids"]) == "und"
    assert not decodes_leading_space(tokenizer)
    translator = WaitkTranslator(SimpleNamespace(tokenizer=tokenizer, session=lambda heads: None), WaitkConfig(k=1))
    assert not translator.decodes_leading_space


@pytest.mark.parametrize("translator_class", [AlignAttTranslator, LocalAgreementTranslator])
def test_no_live_step_writes_before_min_accessible_words(tiny_lm, translator_class):
    """A sentence's first words leave the draft to guess ("Therefore," -> "Dieses"): with min_accessible_words 3
    no live step writes before the segment's third word is read, and every later step writes as before (the
    scripted model writes the same translation of each source either way)."""
    words = "Here we present our new model today .".split()
    translations = {" ".join(words[:n]): text for n, text in [
        (1, "Hier wir"), (2, "Hier stellen wir"), (3, "Hier stellen wir unser"), (4, "Hier stellen wir unser neues"),
        (5, "Hier stellen wir unser neues Modell"), (6, "Hier stellen wir unser neues Modell heute"),
        (7, "Hier stellen wir unser neues Modell heute vor"), (8, "Hier stellen wir unser neues Modell heute vor.")]}
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer,
                         session=lambda heads: ScriptedDraftSession(tiny_lm.tokenizer, translations))

    def translator(minimum):
        if translator_class is LocalAgreementTranslator:
            return LocalAgreementTranslator(lm, LocalAgreementConfig(min_accessible_words=minimum,
                                                                     final_max_new_tokens=40))
        made = AlignAttTranslator(lm, AlignAttConfig(border=1000, min_accessible_words=minimum,
                                                     final_max_new_tokens=40), heads_of(tiny_lm))
        made.acceptance = Acceptance()  # every token accepted
        return made

    eager = [list(e.new_units) for e in stream(translator(0), words)]
    held = [list(e.new_units) for e in stream(translator(3), words)]
    assert any(eager[:2]) and not any(held[:2])
    assert any(held[2:4]), "from the third word on, steps write (LocalAgreement once two drafts agree)"
    assert sum(eager, []) == sum(held, []) == "Hier stellen wir unser neues Modell heute vor.".split()
    with pytest.raises(ConfigError, match="min_accessible_words"):
        AlignAttConfig(min_accessible_words=-1).validate()


class RankedScriptSession:
    """Stands in for a model session (a fake: the scripted loops are what a model writes by accident): for the
    target prefix the prompt ends with, drafts the first scripted continuation whose first token is not banned, as
    greedy decoding takes the best token left (an error where none is left, or with `last_if_all_banned` the last: the
    tiny test tokenizer spells most words letter by letter, " tue" and " tecniche" both begin with " t"); records
    each draft's prefix and banned tokens."""

    def __init__(self, tokenizer, continuations: dict[str, list[str]], last_if_all_banned: bool = False):
        self.tokenizer, self.continuations, self.calls = tokenizer, continuations, []
        self.last_if_all_banned = last_if_all_banned

    def reset(self):
        pass

    def draft(self, prompt_ids, max_new_tokens, capture=True, stop=None, banned_first_tokens=(),
              repetition_penalty=1.0):
        from backends.draft import Draft

        prefix = self.tokenizer.decode(prompt_ids).rsplit("assistant\n", 1)[1].split("</think>\n\n")[-1]
        self.calls.append((prefix, tuple(banned_first_tokens)))
        encoded = [self.tokenizer.encode(text, add_special_tokens=False) for text in self.continuations[prefix]]
        allowed = [tokens for tokens in encoded if tokens[0] not in banned_first_tokens]
        assert allowed or self.last_if_all_banned, f"every continuation of {prefix!r} begins with a banned token"
        tokens = allowed[0] if allowed else encoded[-1]
        draft = Draft(prompt_length=len(prompt_ids))
        for token in tokens:
            draft.tokens.append(token)
            if len(draft.tokens) == max_new_tokens or (stop is not None and stop(draft)):
                return draft
        draft.finished = True
        return draft


# Evaluation line 85 (first four talks, en→it, AlignAtt text preset, the embedded 0.5B model in bf16, 2026-12-07): its
# live steps committed up to "usando le", its final draft was " tue tue tue" and the retry after " tue", that token
# banned, the rest of the line (docs/draft_rules.md). Here one final draft holds both.
LOOPING_FINAL = "Il nostro paper ha investigato il problema della generalizzazione usando le tue tue tue"
LOOP_KEPT = "Il nostro paper ha investigato il problema della generalizzazione usando le tue"
LOOP_RETRY = " tecniche di identificazione delle entità nomi o le tue tecniche di identificazione delle entità nomi."


@pytest.mark.parametrize("retries", [3, 0])
def test_a_final_draft_cut_by_a_loop_is_drafted_again_from_the_cut(tiny_lm, retries):
    """The loop " tue tue tue" is cut after its first " tue"; the final draft is made again from there, " tue" banned,
    and the line goes on. Without retries it ends at the cut, 13 words short."""
    words = "Our paper investigated the problem of generalization using the Named Entity Recognition Task or the NER " \
            "task.".split()
    session = RankedScriptSession(tiny_lm.tokenizer, {"": [LOOPING_FINAL], LOOP_KEPT: [LOOP_RETRY]},
                                  last_if_all_banned=True)  # the real retry began with " tecniche", not " tue"
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    translator = WaitkTranslator(lm, WaitkConfig(k=100, final_retries=retries))  # only the final step drafts
    seen = observe(translator)
    emissions = stream(translator, words)
    assert " ".join(unit for e in emissions for unit in e.new_units) == LOOP_KEPT + (LOOP_RETRY if retries else "")
    banned = tiny_lm.tokenizer.encode(" tue", add_special_tokens=False)[:1]
    assert session.calls == [("", ())] + ([(LOOP_KEPT, tuple(banned))] if retries else [])
    assert (seen.stats.final_degenerate, seen.stats.final_retries) == (1, bool(retries))


# Calibration line 6 (en→it, AlignAtt and wait-3 text presets, the embedded 0.5B model in bf16, 2026-12-07): without
# the opening-word redraft the line came out as OPENS_WITH_SOURCE_WORD, with it (31dca70) as REDRAFTED_OPENING.
OPENING_SOURCE = "For instance, there are lots of coverage on certain natural languages."
OPENS_WITH_SOURCE_WORD = "For esempio, ci sono molte sottolineazioni su alcune lingue naturali."
REDRAFTED_OPENING = "Per esempio, ci sono molte sottolineazioni su alcune lingue naturali."


def scripted_line(tokenizer, opening: list[str], line: str) -> RankedScriptSession:
    """A session whose segment opens with `opening`'s drafts (best first) and, once `line`'s first words are
    committed, goes on with the rest of `line`."""
    words = line.split()
    return RankedScriptSession(tokenizer, {"": opening, **{" ".join(words[:i]): [" " + " ".join(words[i:])]
                                                           for i in range(1, len(words))}})


ALL_FILTERS = AlignAttConfig().draft_filters


def without(*names: str) -> tuple[str, ...]:
    """Every draft filter but `names`."""
    return tuple(name for name in ALL_FILTERS if name not in names)


@pytest.mark.parametrize("k, filters", [(100, ALL_FILTERS), (2, ALL_FILTERS),
                                        (100, without("opening_word"))])
def test_a_segment_that_opens_with_the_sources_first_word_is_drafted_again_without_it(tiny_lm, k, filters):
    """The final draft (k=100) and the live steps (k=2) drop a draft that opens with the source's "For" and take
    the one drafted without its first token; without the opening_word filter, the line opens with "For"."""
    session = scripted_line(tiny_lm.tokenizer, [OPENS_WITH_SOURCE_WORD, REDRAFTED_OPENING], REDRAFTED_OPENING)
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    translator = WaitkTranslator(lm, WaitkConfig(k=k, draft_filters=filters, target_lang="it"))
    seen = observe(translator)
    output = " ".join(unit for e in stream(translator, OPENING_SOURCE.split()) for unit in e.new_units)
    redrafts = "opening_word" in filters
    assert output == (REDRAFTED_OPENING if redrafts else OPENS_WITH_SOURCE_WORD)
    banned = tuple(tiny_lm.tokenizer.encode("For", add_special_tokens=False)[:1])
    assert (("", banned) in session.calls) is redrafts
    assert seen.fired["opening_word"] == int(redrafts)


def test_local_agreement_keeps_the_redrafted_opening_in_its_window(tiny_lm):
    """LocalAgreement's window holds each step's hypothesis: a draft dropped for its opening is not one of them."""
    session = scripted_line(tiny_lm.tokenizer, [OPENS_WITH_SOURCE_WORD, REDRAFTED_OPENING], REDRAFTED_OPENING)
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    translator = LocalAgreementTranslator(lm, LocalAgreementConfig(target_lang="it"))
    translator.reset()
    assert not translator.feed([SourceWord("For")]).new_units
    assert [h[0] for h in translator.acceptance.hypotheses] == ["Per"]
    assert translator.feed([SourceWord("instance,")]).new_units[:2] == ("Per", "esempio,")


def test_waitk_config_rejects_a_bad_units_per_word():
    with pytest.raises(ConfigError, match="units_per_word must be > 0"):
        build_config(WaitkConfig, {"units_per_word": -1.0})


@pytest.mark.parametrize("filters, retries, expected, fired", [
    (ALL_FILTERS, 3, "Das ist das Modell, das wir verwenden.", {"loop", "final_retries"}),
    (ALL_FILTERS, 0, "Das ist das Modell, das", {"loop"}),
    (without("loop"), 3, "Das ist das Modell, das das das das", set()),
])
def test_a_filter_not_listed_does_not_run_and_the_event_log_counts_each_filters_finds(tiny_lm, tmp_path, filters,
                                                                                       retries, expected, fired):
    """The measurement of docs/draft_rules.md: a filter left out of `draft_filters` does not run, and the counts the
    evaluation makes of the event log give, per filter or rule, the drafts where it found something."""
    from evaluation.policy_stats import policy_rows

    words = "This is the model that we use in all our experiments.".split()
    session = RankedScriptSession(tiny_lm.tokenizer, {"": ["Das ist das Modell, das das das das"],
                                                      "Das ist das Modell, das": [" wir verwenden."]})
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    log = tmp_path / "events.jsonl"
    translator = WaitkTranslator(lm, WaitkConfig(k=100, draft_filters=filters, final_retries=retries,
                                                 event_log=str(log)))
    assert " ".join(unit for e in stream(translator, words) for unit in e.new_units) == expected
    [row] = policy_rows(log)
    assert {name[len("fired_"):] for name, value in row.items() if name.startswith("fired_") and value} == fired
    with pytest.raises(ConfigError, match="draft_filters: unknown filter.s. loops"):
        build_config(WaitkConfig, {"draft_filters": "line_end+loops"})
    assert build_config(WaitkConfig, {"draft_filters": "none"}).draft_filters == ()
    assert build_config(WaitkConfig, {"draft_filters": ["loop", "copy"]}).draft_filters == ("loop", "copy")


def test_local_agreement_commits_only_what_two_translations_agree_on(tiny_lm):
    translator = LocalAgreementTranslator(tiny_lm, LocalAgreementConfig(final_max_new_tokens=40))
    seen = observe(translator)
    translator.reset()
    previous: list[str] | None = None
    for word in SENTENCE:
        before = len(translator.emitted_units)
        emission = translator.feed([SourceWord(word)])
        assert emission.retract_units == 0
        step = seen.steps[-1]
        hypothesis = split_units(step.draft_text, "word")
        new = list(emission.new_units)
        if previous is None:
            assert new == []  # one translation agrees with nothing yet
        else:
            # The new units open both this translation and the previous one (after what was committed before).
            assert hypothesis[:len(new)] == new and previous[:len(new)] == new
        previous = hypothesis[len(new):] if len(hypothesis) > len(new) else []
        assert len(translator.emitted_units) == before + len(new)
    translator.flush()
    assert seen.steps[-1].final



@pytest.mark.harness
def test_local_agreement_text_agent_runs_through_simuleval_cli(tmp_path, tiny_checkpoint):
    """The text peer through SimulEval's real CLI gives what its translator gives when fed the same words."""
    from harness_runs import simuleval_text_run

    model = str(tiny_checkpoint("gemma4"))  # (a tiny model that writes something for both sentences)
    sources = [" ".join(SENTENCE[:8]), " ".join(SENTENCE[8:])]
    instances = simuleval_text_run(tmp_path, "agents.alignatt4llm.LocalAgreementTextAgent", sources, ["a", "b"],
                                   "--model", model, "--final-max-new-tokens", "24")
    translator = LocalAgreementTranslator(CausalLM(*load_causal_lm(model)),
                                          LocalAgreementConfig(model=model, final_max_new_tokens=24))
    for source, instance in zip(sources, instances):
        stream(translator, source.split())
        assert instance["prediction"] == translator.target_text and translator.target_text


def test_the_event_log_counts_into_each_segments_row_and_eval_reports_the_gate_share(tiny_lm, tmp_path):
    """`event_log`: the translator's events, which the evaluation counts into one `policy.jsonl` row per finished
    segment (the counts an observer makes of the same events); `simulagents eval` turns them into the share of live
    steps where the gate fired."""
    from evaluation.policy_stats import EVENT_LOG, POLICY_LOG, policy_rows
    from evaluation.scoring import policy_scores

    log = tmp_path / EVENT_LOG
    translator = AlignAttTranslator(tiny_lm, AlignAttConfig(border=-2, median_width=3, final_max_new_tokens=20,
                                                            event_log=str(log)), heads_of(tiny_lm))
    stream(translator, SENTENCE[:6])
    seen = observe(translator)
    stream(translator, SENTENCE[6:])  # reset between the two: the log keeps both streams' lines
    lines = policy_rows(log)
    assert len(lines) == 2 and all(line["final_steps"] == 1 for line in lines)
    assert lines[-1] == seen.stats.row()  # the second stream, counted as it ran
    assert {name for name in lines[-1] if name.startswith("fired_")} == {f"fired_{rule}" for rule in COUNTED_RULES}
    live = sum(line["live_steps"] for line in lines)
    fired = sum(line["gate_fired"] for line in lines)
    assert lines[-1]["live_steps"] == sum(1 for step in seen.steps if not step.final) > 0
    assert policy_scores(tmp_path)["gate fired (% of steps)"] == pytest.approx(100.0 * fired / live)
    assert policy_scores(tmp_path)["floor committed (% of steps)"] == 0.0  # the floor is off
    assert [json.loads(line) for line in (tmp_path / POLICY_LOG).read_text().splitlines()] == lines
    assert policy_scores(tmp_path / "absent") == {}


def test_the_policy_counts_count_each_gate_rule_that_fired_apart():
    """Every rule of the gate (`FailureReason`) has its own count, and the counts add up to gate_fired."""
    import typing

    from evaluation.policy_stats import PolicyStats
    from agents.systems.events import Step
    from backends.draft import Draft
    from policies.alignatt import FailureReason, ScanResult, TokenDecision

    stats = PolicyStats()
    draft = Draft(prompt_length=4, tokens=[1, 2, 3])
    reasons = typing.get_args(FailureReason)
    accepted = TokenDecision(0, 0, 1.0, 0.0, 1.0, None)
    for reason in (*reasons, "provenance_weak", None):
        decisions = (accepted,) + ((TokenDecision(1, 1, 0.1, 0.9, 0.1, reason),) if reason else (accepted,))
        stats.add(Step(None, draft, "", "", 1, scan=ScanResult(1 if reason else 2, decisions)).summary())
    counts = {reason: getattr(stats, f"gate_{reason}") for reason in reasons}
    assert counts == {reason: 2 if reason == "provenance_weak" else 1 for reason in reasons}
    assert stats.gate_fired == len(reasons) + 1 == sum(counts.values()) and stats.live_steps == len(reasons) + 2


def test_eval_counts_drafts_that_ended_their_line_apart_from_degenerate_ones(tmp_path):
    """A draft that closes its line after translating a partial source is not degenerate: the counts keep line ends
    and degenerate cuts (loops, foreign scripts) apart, live and final, and eval reports each as a share of all
    drafts."""
    from evaluation.policy_stats import EVENT_LOG, PolicyStats
    from evaluation.scoring import policy_scores
    from agents.systems.events import SegmentEnd, Step
    from backends.draft import Draft

    draft = Draft(prompt_length=4, tokens=[1, 2])
    steps = [Step(None, draft, "", "", 1, cut=cut) for cut in ("line_end", "line_end", "loop", "", "")]
    steps += [Step(None, draft, "", "", 1, final=True, cut=cut, copied=cut == "foreign_script")
              for cut in ("line_end", "foreign_script")]
    steps.append(Step(None, draft, "", "", 1, copied=True))
    stats = PolicyStats()
    for step in steps:
        stats.add(step.summary())
    assert (stats.line_breaks, stats.degenerate, stats.final_line_breaks, stats.final_degenerate) == (2, 1, 1, 1)
    assert (stats.copied, stats.final_copied) == (1, 1)
    assert not Step(None, draft, "", "", 1, cut="line_end").degenerate
    assert Step(None, draft, "", "", 1, cut="foreign_script").degenerate
    events = [*steps, SegmentEnd()]
    (tmp_path / EVENT_LOG).write_text("".join(json.dumps(event.summary()) + "\n" for event in events))
    scores = policy_scores(tmp_path)
    assert scores["degenerate drafts (%)"] == pytest.approx(100 * 2 / 8)
    assert scores["line-ended drafts (%)"] == pytest.approx(100 * 3 / 8)
    assert scores["copying drafts (%)"] == pytest.approx(100 * 2 / 8)


def test_streams_on_server_threads_share_no_tokenizer_state(tiny_lm):
    """A server runs each stream's steps on its own thread over the shared weights. A fast tokenizer keeps its
    truncation settings in one Rust object, so one stream calling with other settings (here: truncation to 4 tokens,
    in a loop) must not reach another stream's prompts; shared, it cuts them ("cannot map the source span")."""
    import threading
    import time

    config = AlignAttConfig(border=-1, median_width=3, final_max_new_tokens=40)
    other = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    streaming = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    assert len({id(tiny_lm.tokenizer), id(other.tokenizer), id(streaming.tokenizer)}) == 3
    reference = [e.new_units for e in stream(streaming, SENTENCE)]
    done, errors = threading.Event(), []

    def truncating_caller():
        while not done.is_set():
            try:
                other.tokenizer(" ".join(SENTENCE * 20), truncation=True, max_length=4)
            except Exception as error:  # noqa: BLE001 - reported by the assertion below
                errors.append(error)
                return

    caller = threading.Thread(target=truncating_caller)
    caller.start()
    try:
        deadline = time.time() + 20
        outputs = []
        while time.time() < deadline and len(outputs) < 5:
            outputs.append([e.new_units for e in stream(streaming, SENTENCE)])
    finally:
        done.set()
        caller.join()
    assert not errors, errors
    assert outputs and all(output == reference for output in outputs)


def test_the_soft_frontier_knob_refuses_a_mass_outside_zero_one_and_reaches_the_scan(tiny_lm):
    with pytest.raises(ConfigError, match="frontier_min_mass is an attention mass in \\[0, 1\\], got 1.5"):
        build_config(AlignAttConfig, {"model": "embedded", "frontier_min_mass": 1.5})
    for name in ("source_mass_threshold", "argmax_mass_threshold"):
        with pytest.raises(ConfigError, match=f"{name} is an attention mass in \\[0, 1\\], got -0.1"):
            build_config(AlignAttConfig, {"model": "embedded", name: -0.1})
    config = build_config(AlignAttConfig, {"model": "embedded", "frontier_min_mass": 0.03, "border": -2,
                                           "source_mass_threshold": 0.1})
    translator = AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm))
    assert translator.acceptance.params.frontier_min_mass == 0.03 and translator.acceptance.params.border == -2
    assert translator.acceptance.params.source_mass_threshold == 0.1


def test_the_head_vote_knob_refuses_an_unknown_vote_and_reaches_the_scan(tiny_lm):
    with pytest.raises(ConfigError, match="head_vote must be one of mean, lower_median, got 'median'"):
        build_config(AlignAttConfig, {"model": "embedded", "head_vote": "median"})
    assert AlignAttTranslator(tiny_lm, build_config(AlignAttConfig, {"model": "embedded"}),
                              heads_of(tiny_lm)).acceptance.params.head_vote == "mean"  # the paper's
    config = build_config(AlignAttConfig, {"model": "embedded", "head_vote": "lower_median"})
    assert AlignAttTranslator(tiny_lm, config, heads_of(tiny_lm)).acceptance.params.head_vote == "lower_median"


class CopyingSession:
    """Stands in for a model session (a fake: it copies its source on purpose, as the 0.5B model does by accident):
    given n read source words, drafts `opening` and then copies the source from its fourth word on; a first token it
    may not write makes it take the next of `after_ban` (what the model would write instead)."""

    def __init__(self, tokenizer, source: list[str], opening: str, after_ban: list[str]):
        self.tokenizer, self.source, self.opening, self.after_ban = tokenizer, source, opening, after_ban
        self.banned_calls = 0
        self.bans: list[tuple[int, ...]] = []  # the first tokens each draft may not write

    def reset(self):
        pass

    def draft(self, prompt_ids, max_new_tokens, capture=True, stop=None, banned_first_tokens=(),
              repetition_penalty=1.0):
        read, prefix = read_and_target(self.tokenizer.decode(prompt_ids), self.source)
        text = " ".join([self.opening, *self.source[3:read]])
        if banned_first_tokens:
            self.banned_calls += 1
            self.bans.append(tuple(banned_first_tokens))
            text = prefix + self.after_ban[self.banned_calls - 1]
        draft = scripted_draft(self.tokenizer, prompt_ids, prefix, text, max_new_tokens, stop)
        assert not (banned_first_tokens and draft.tokens) or draft.tokens[0] not in banned_first_tokens
        return draft


def read_and_target(prompt: str, source: list[str]) -> tuple[int, str]:
    """What a fake session reads off its decoded prompt: how many of `source`'s words it holds, and the target
    prefix after the assistant's turn."""
    read = max(n for n in range(1, len(source) + 1) if " ".join(source[:n]) in prompt)
    return read, prompt.rsplit("assistant\n", 1)[1].split("</think>\n\n")[-1]


def scripted_draft(tokenizer, prompt_ids, prefix: str, text: str, max_new_tokens: int, stop):
    """The Draft a fake session writes: the tokens of `text` after the prompt's target `prefix`, one at a time, until
    the budget or `stop` ends it (finished when the text ran out)."""
    from backends.draft import Draft

    assert text.startswith(prefix), f"the prompt's target {prefix!r} is not the model's text {text!r}"
    draft = Draft(prompt_length=len(prompt_ids))
    for token in tokenizer.encode(text[len(prefix):], add_special_tokens=False):
        draft.tokens.append(token)
        if len(draft.tokens) == max_new_tokens or (stop is not None and stop(draft)):
            return draft
    draft.finished = True
    return draft


COPIED = "So what is needed for a good generalization?".split()


TRANSLATED = " benötigt für eine gute Generalisierung?"
COPIES_AGAIN = " is needed for a good generalization?"


@pytest.mark.parametrize("after_ban, retries, expected", [
    ([TRANSLATED], 3, "So was benötigt für eine gute Generalisierung?"),
    ([COPIES_AGAIN, TRANSLATED], 3, "So was benötigt für eine gute Generalisierung?"),  # the second retry translates
    ([COPIES_AGAIN, TRANSLATED], 1, "So was needed for a good generalization?"),  # one retry only: the copy is kept
    ([COPIES_AGAIN, ", needed for a good generalization?", " and needed for a good generalization?"], 3,
     "So was needed for a good generalization?"),  # every retry copies: kept
    ([""], 3, "So was needed for a good generalization?"),  # gives nothing: the copy is kept
    ([TRANSLATED], 0, "So was needed for a good generalization?"),  # no retry: kept at once
])
def test_a_final_draft_that_copies_the_source_is_drafted_again_from_the_copy(tiny_lm, after_ban, retries, expected):
    """"So was needed for a good generalization?" (the 0.5B model, MCIF): from "needed" the draft repeats the
    source. The final draft is made again from there with another first token, up to `final_retries` times, each
    retry banning the first tokens of every copying draft before it ("Okay, now I'm going to talk about …", then
    "OK, now I'm going …": eval line 135); where all copy, or one writes nothing, the copy is kept (an untranslated
    sentence still says more than a missing one)."""
    session = CopyingSession(tiny_lm.tokenizer, COPIED, "So was", after_ban)
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    translator = WaitkTranslator(lm, WaitkConfig(k=100, final_max_new_tokens=60, final_retries=retries))
    seen = observe(translator)
    # k=100: only the final step drafts
    assert " ".join(unit for e in stream(translator, COPIED) for unit in e.new_units) == expected
    calls = min(retries, len(after_ban))
    assert session.banned_calls == calls
    first_tokens = [tiny_lm.tokenizer.encode(" needed", add_special_tokens=False)[0],
                    *(tiny_lm.tokenizer.encode(text, add_special_tokens=False)[0] for text in after_ban[:calls - 1])]
    assert session.bans == [tuple(first_tokens[:n + 1]) for n in range(calls)]  # each retry bans every copy's opening
    copying_retries = sum("needed" in text for text in after_ban[:calls])
    stats = seen.stats
    assert (stats.final_copied, stats.final_retries, stats.final_retries_copied) == (1, calls, copying_retries)
    # the turn rule would see "for a" (tested below)
    off = WaitkTranslator(lm, WaitkConfig(k=100, final_max_new_tokens=60,
                                          draft_filters=without("copy", "opening_copy", "language_turn")))
    seen_off = observe(off)
    assert " ".join(unit for e in stream(off, COPIED) for unit in e.new_units) == " ".join(["So was", *COPIED[3:]])
    assert session.banned_calls == calls and seen_off.stats.final_copied == 0
    with pytest.raises(ConfigError, match="copy_guard_words must be >= 1, got 0; to run without the copy filter"):
        build_config(WaitkConfig, {"copy_guard_words": 0})
    with pytest.raises(ConfigError, match="final_retries must be >= 0"):
        build_config(WaitkConfig, {"final_retries": -1})


# Lines of the calibration text split (AlignAtt text preset, the embedded 0.5B model in bf16, en→de;
# docs/journal/draft-rules-measurements.md, 2026-12-07): the line with `final_retries` 0, where the final draft copied
# the source whole and stayed so, and the all-on run's line, the retry after the copy's first token was banned.
CALIBRATION_COPIES = [
    (41, "Pretraining on English natural language can significantly boost the performance of Few-shot on target "
     "natural languages, and we found multilingual language models such as Codex and BLOOM are still inadequate for "
     "cross-lingual semantic parsing tasks.", "Die Pretraining auf englischen natürlichen Sprachen kann sehr stark "
     "die Performanz von Few-shot auf target natürlichen Sprachen verbessern, und wir haben multilingualen "
     "Sprachmodelle wie Codex und BLOOM noch nicht insbesondere für die Cross-lingual Semantic Parsing-Task."),
    (52, "Let's first introduce the background about embedding as services.",
     "Es ist zunächst, ein Background über Services zu eingebauen."),
]


@pytest.mark.parametrize("line, source, retry", CALIBRATION_COPIES)
def test_a_final_draft_the_model_copied_on_the_calibration_split_is_drafted_again(tiny_lm, line, source, retry):
    """The model's final draft was its source, word for word (calibration line 41, 52); the copy rule finds it
    from the first word and the retry, its first token banned, is the all-on run's line. Without retries the
    untranslated line goes out."""
    for retries, expected in ((3, retry), (0, source)):
        session = RankedScriptSession(tiny_lm.tokenizer, {"": [source, retry]})
        lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
        translator = WaitkTranslator(lm, WaitkConfig(k=1000, final_max_new_tokens=200, final_retries=retries))
        assert " ".join(u for e in stream(translator, source.split()) for u in e.new_units) == expected, line
        assert len(session.calls) == 1 + bool(retries)


def test_a_live_step_commits_nothing_from_where_its_draft_copies_the_source(tiny_lm):
    """A live draft's copy is seen once it repeats four read source words in order; from then on no live step
    commits it (the words before it went out: a guard sees only what has been read), and the final draft is made
    again from the first uncommitted word."""
    session = CopyingSession(tiny_lm.tokenizer, COPIED, "So was", [" eine gute Generalisierung?"])
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    config = AlignAttConfig(border=1000, final_max_new_tokens=60, draft_filters=without("language_turn"))  # copy alone
    translator = AlignAttTranslator(lm, config, heads_of(tiny_lm))
    translator.acceptance = Acceptance()  # every token accepted
    seen = observe(translator)
    emissions = stream(translator, COPIED)
    live = [list(e.new_units) for e in emissions[:-1]]
    # A live step keeps a finished draft's last word back; at 7 words read "needed for a good" is a copy.
    assert live == [["So"], [], [], ["was"], ["needed"], ["for"], [], []]
    assert [s.copied for s in seen.steps if not s.final] == [False] * 6 + [True, True]
    assert seen.stats.copied == 2
    assert list(emissions[-1].new_units) == ["eine", "gute", "Generalisierung?"]


TURNING = "Second, we will investigate the problem of context.".split()


@pytest.mark.parametrize("turn_words, expected, live_english", [
    (1, "Zweitens, wir investigate Problem des Kontexts.", []),  # the default: held from "the"
    (2, "Zweitens, wir investigate the Problem des Kontexts.", ["the"]),  # "the" out before "of" was drafted
    (None, "Zweitens, wir investigate the problem of context.", ["the", "problem", "of"]),  # off: the English goes out
])
def test_a_draft_that_turns_into_the_source_language_is_held_and_made_again(tiny_lm, turn_words, expected,
                                                                             live_english):
    """"Zweite, wir aim to investigate the ..." (AlignAtt, eval split): the draft goes on in English in words of its
    own, which no run of source words shows (the copy rule is off here to make sure of that). From its first
    English-only function word on no live step commits it once `language_turn_words` of them show
    (the `language_turn` filter), and the final draft is made again from there with its first token banned, as a
    copy is."""
    session = CopyingSession(tiny_lm.tokenizer, TURNING, "Zweitens, wir", [" Problem des Kontexts."])
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    filters = without("copy", "opening_copy", "opening_language", "opening_word", *(() if turn_words else
                                                                                    ("language_turn",)))
    config = AlignAttConfig(border=1000, final_max_new_tokens=60, draft_filters=filters,
                            language_turn_words=turn_words or 1)
    translator = AlignAttTranslator(lm, config, heads_of(tiny_lm))
    translator.acceptance = Acceptance()  # every token accepted
    seen = observe(translator)
    emissions = stream(translator, TURNING)
    assert " ".join(u for e in emissions for u in e.new_units) == expected
    live = [u for e in emissions[:-1] for u in e.new_units]
    assert live == ["Zweitens,", "wir", "investigate", *live_english]
    assert any(step.copied for step in seen.steps if not step.final) is bool(turn_words)
    assert (seen.stats.final_copied, session.banned_calls) == ((1, 1) if turn_words else (0, 0))
    with pytest.raises(ConfigError, match="language_turn_words must be >= 1, got 0; to run without the language_turn"):
        build_config(AlignAttConfig, {"language_turn_words": 0})


class SourceLanguageSession:
    """Stands in for a model session (a fake: it writes English on purpose, as the 0.5B model did for `make demo`'s
    misheard first chunk on an AVX2-only CPU): with nothing of the segment's translation in its prompt and n read
    source words it drafts the first n + 2 words of `english` (its first draft "God's love is", which shares no run
    with the source) until it has read `english_until` words, then the first n words of `german`; after an English
    target prefix it goes on in English."""

    def __init__(self, tokenizer, source: list[str], english: str, german: str, english_until: int):
        self.tokenizer, self.source, self.english, self.german = tokenizer, source, english.split(), german.split()
        self.english_until = english_until

    reset = CopyingSession.reset

    def draft(self, prompt_ids, max_new_tokens, capture=True, stop=None, banned_first_tokens=(),
              repetition_penalty=1.0):
        assert not banned_first_tokens, "a draft that opens in the source language is not made again"
        read, prefix = read_and_target(self.tokenizer.decode(prompt_ids), self.source)
        english = " ".join(self.english).startswith(prefix) and (bool(prefix) or read < self.english_until)
        text = " ".join(self.english[:read + 2] if english else self.german[:read])
        return scripted_draft(self.tokenizer, prompt_ids, prefix, text, max_new_tokens, stop)


@pytest.mark.parametrize("english_until, expected", [
    (3, "Guten Morgen allerseits, danke fürs Kommen."),  # the third word brings a translation
    (100, "God's love is with all of you who came"),  # English to the end: the final draft is kept
])
def test_no_live_step_commits_a_draft_that_opens_in_the_source_language(tiny_lm, english_until, expected):
    """Whisper heard "Good morning everyone" as "God-mourning everyone and", and the first drafts were English of
    the model's own ("God's love is ..."), which copies no source run: no live step commits them
    (the `opening_language` filter), so the drafts that see more words translate
    from the segment's start. Off, "God's love" is committed and the line stays English, as `make demo`'s first line
    did. A final draft is not held or made again for its language."""
    source = "God-mourning everyone and thank you for coming.".split()
    english = "God's love is with all of you who came here today."

    def translate(filters):
        session = SourceLanguageSession(tiny_lm.tokenizer, source, english,
                                        "Guten Morgen allerseits, danke fürs Kommen.", english_until)
        lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
        config = AlignAttConfig(border=1000, final_max_new_tokens=60, draft_filters=filters)
        translator = AlignAttTranslator(lm, config, heads_of(tiny_lm))
        translator.acceptance = Acceptance()  # every token accepted
        return translator, observe(translator), stream(translator, source)

    # the rule for a turn later in the draft: tested below
    translator, seen, emissions = translate(without("language_turn"))
    assert " ".join(u for e in emissions for u in e.new_units) == expected
    live = [step for step in seen.steps if not step.final]
    held = min(english_until - 1, len(source))  # the live steps that drafted English (one per word read)
    assert [step.copied for step in live[:held]] == [True] * held and not any(step.copied for step in live[held:])
    assert all(not e.new_units for e in emissions[:held])
    assert seen.stats.final_copied == 0
    translator, seen, emissions = translate(without("language_turn", "copy", "opening_copy", "opening_language",
                                                    "opening_word"))
    assert " ".join(u for e in emissions for u in e.new_units) == "God's love is with all of you who came"
    assert emissions[0].new_units == ("God's", "love")  # all but the draft's last unit


def test_no_live_step_commits_the_source_language_words_before_a_copy(tiny_lm):
    """`make demo` on a Zen 4 (2026-12-05): at 2 s Whisper heard "God's Mourning everyone and thank you", four of
    those words accessible, and the 0.5B model drafted "God's love everyone and thank you for coming.". The copy rule
    finds its run ("everyone and thank you") at the third unit, so "God's love" was committed before it and the line
    stayed English. A draft that opens the segment in the source language ("and") commits nothing, whether or not
    it also copies a run."""
    heard = "God's Mourning everyone and thank you".split()
    english = "God's love everyone and thank you for coming."
    session = SourceLanguageSession(tiny_lm.tokenizer, heard, english, "Guten Morgen allerseits, danke fürs Kommen.",
                                    english_until=100)
    lm = SimpleNamespace(tokenizer=tiny_lm.tokenizer, session=lambda heads: session)
    config = AlignAttConfig(border=1000, max_new_tokens=60, draft_filters=without("language_turn"))
    translator = AlignAttTranslator(lm, config, heads_of(tiny_lm))
    translator.acceptance = Acceptance()  # every token accepted
    seen = observe(translator)
    translator.reset()
    words = [SourceWord(word, end_time=0.3 * (index + 1)) for index, word in enumerate(heard)]
    emission = translator.revise(words, now=1.25)  # words ended by 1.2 s: four accessible
    step = seen.steps[-1]
    assert (step.accessible_words, step.final, step.draft_text) == (4, False, english)
    copy = next(f for f in translator.filters if f.name == "copy")
    assert copy.find(DraftText(english, [], heard)) == len("God's love")  # the run starts at "everyone"
    assert step.copied and step.committed_text == "" and emission.new_units == ()
