"""The LLM text translators (AlignAtt and wait-k) on tiny checkpoints: append-only output, stability units,
stream isolation, the extreme operating points, and clear errors for bad input."""
import dataclasses
from pathlib import Path

import pytest

import backends.heads
from agents.core import SourceWord
from agents.harness.config import ConfigError, build_config
from agents.systems.config import AlignAttConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator, WaitkTranslator
from backends.heads import HeadFileError, HeadSet
from backends.hf.lm import CausalLM
from backends.models import ModelNotFoundError, load_causal_lm
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
    emissions = stream(translator, SENTENCE)
    assert all(e.retract_units == 0 for e in emissions)
    units = [u for e in emissions for u in e.new_units]
    assert units == translator.emitted_units
    for step in translator.steps:
        # What was committed is a prefix of the draft that ends on a complete word.
        assert step.draft_text.startswith(step.committed_text)
        rest = step.draft_text[len(step.committed_text):]
        assert rest == "" or rest[0].isspace() or step.committed_text == ""
    # The draft continues the committed target: the final text is the prompt's target prefix plus the flush.
    assert translator.target_text == " ".join(units)


def test_border_extremes_wait_for_the_end_or_accept_every_draft(tiny_lm):
    never = AlignAttTranslator(tiny_lm, AlignAttConfig(border=-1000, final_max_new_tokens=40), heads_of(tiny_lm))
    emissions = stream(never, SENTENCE)
    assert all(not e.new_units for e in emissions[:-1])
    # Waiting until the source is complete gives the offline (whole-sentence) greedy translation.
    offline = tiny_lm.session(None).draft(never.prompts.build(SENTENCE, "").token_ids, 40, capture=False)
    offline_text = tiny_lm.decode(offline.tokens).replace("\ufffd", "")  # unfinished byte sequences are dropped
    assert never.target_text == " ".join(split_units(offline_text, "word"))
    always = AlignAttTranslator(tiny_lm, AlignAttConfig(border=1000, final_max_new_tokens=40), heads_of(tiny_lm))
    stream(always, SENTENCE)
    assert all(step.scan is None or step.scan.accepted_tokens == len(step.draft.tokens) for step in always.steps)


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


def test_waitk_schedule_bounds_the_output(tiny_lm):
    translator = WaitkTranslator(tiny_lm, WaitkConfig(k=3, final_max_new_tokens=40))
    emissions = stream(translator, SENTENCE)
    written = 0
    for words_read, emission in enumerate(emissions[:-1], start=1):
        written += len(emission.new_units)
        assert written <= max(0, words_read - 3 + 1)
    assert not any(e.new_units for e in emissions[:2]), "nothing before k words"


def test_flush_without_source_emits_nothing(tiny_lm):
    translator = AlignAttTranslator(tiny_lm, AlignAttConfig(), heads_of(tiny_lm))
    assert translator.flush().is_empty
    assert translator.feed([]).is_empty


def test_bad_configuration_is_a_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="unknown language 'xx'"):
        build_config(AlignAttConfig, {"target_lang": "xx"})
    with pytest.raises(ConfigError, match="both 'en'"):
        build_config(AlignAttConfig, {"target_lang": "en"})
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
    assert [e.new_units for e in stream(early, SENTENCE)] == [e.new_units for e in stream(full, SENTENCE)]
    assert [s.scan for s in early.steps] == [s.scan for s in full.steps]
    assert sum(len(s.draft.tokens) for s in early.steps) <= sum(len(s.draft.tokens) for s in full.steps)
