"""The speech cascade's AlignAtt gate at the shipped preset, and the guards against degenerate output, on the
embedded real model (Qwen2.5-Coder-0.5B-Instruct): cases that went wrong before the guards."""
import dataclasses

import pytest

import eval_configs
from common.stream import SourceWord
from common.config import build_config, read_yaml
from agents.systems.cascade import CascadeTranslator
from agents.systems.config import CascadeConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator, WaitkTranslator, resolve_heads
from backends.hf.lm import CausalLM
from backends.models import load_causal_lm
from fake_agents import RATE, TimelineRecognizer, timeline_audio
from policies.units import split_units
from observed import observe

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def real_lm(embedded_model_path):
    return CausalLM(*load_causal_lm(str(embedded_model_path)))


def preset(name: str, config_class):
    names = {f.name for f in dataclasses.fields(config_class)}
    values = read_yaml(eval_configs.path(name))
    return build_config(config_class, {k: v for k, v in values.items() if k in names})


def test_shipped_speech_preset_withholds_a_draft_that_attends_to_a_word_not_yet_heard(real_lm):
    """"Today we present our new model", spoken with a scripted recogniser: at 2.5 s "model" ended 0.1 s ago (inside
    the hold-back), so it is not accessible; the draft "Hier wird unser neues Mod|ell" attends to it when it writes
    "Mod", and the gate must stop there. (With the old preset, border 1, no token could ever fail: a peak can lie
    at most one word past the last accessible one.)"""
    config = preset("alignatt4llm_cpu", CascadeConfig)
    words = "Today we present our new model".split()
    timeline = [(word, 0.4 * i, 0.4 * (i + 1)) for i, word in enumerate(words)]
    translator = AlignAttTranslator(real_lm, config, resolve_heads(config))
    cascade = CascadeTranslator(TimelineRecognizer(timeline), translator, config)
    seen = observe(translator)
    cascade.feed_audio(timeline_audio(2.5))
    step = seen.steps[-1]
    assert step.accessible_words == len(words) - 1
    assert step.gate_fired and step.gate_stopped_tokens >= 1
    rejected = step.scan.decisions[-1]
    assert rejected.failure == "source_frontier" and rejected.source_word == len(words) - 1
    # The rejected token is the start of "Modell"; it and what follows are withheld.
    tokens = step.draft.tokens
    assert translator._decode(tokens[:step.scan.accepted_tokens + 1]).rstrip().endswith("Mod")
    assert "Mod" in step.draft_text and "Mod" not in step.committed_text
    assert step.draft_text.startswith(step.committed_text) and step.committed_text.split()
    assert seen.stats.gate_fired == 1 and seen.stats.live_steps == 1


def test_waitk_reads_one_word_per_write_without_drafting_the_budget(real_lm):
    translator = WaitkTranslator(real_lm, WaitkConfig(k=3, max_new_tokens=16))
    seen = observe(translator)
    words = "The committee approved the new budget for schools and hospitals after a long debate".split()
    for word in words:
        translator.feed([SourceWord(word)])
    live = [step for step in seen.steps if not step.final]
    # Drafting stops as soon as one unit more than the schedule allows has begun.
    for step in live:
        assert len(split_units(step.draft_text, "word")) <= 2 or step.draft.finished or step.degenerate
    assert sum(len(step.draft.tokens) for step in live) < 8 * len(live)
    translator.flush()
    assert 0.6 <= len(translator.target_text.split()) / len(words) <= 1.4
