"""The paper presets decide as the AlignAtt4LLM authors' code does (QuentinFuxa/Alignatt4LLM 81f971a) on each point
outside the gate (the gate: tests/test_alignatt_replay.py): its prompt, its live and final budgets, its repetition
penalty, text input's last word held back; and every shipped preset builds its agent's configuration."""
from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

import eval_configs
from agents.systems.config import AlignAttConfig, LocalAgreementConfig, WaitkConfig
from agents.systems.llm import AlignAttTranslator
from backends.heads import HeadSet
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm
from common.config import build_config, read_yaml
from common.stream import SourceWord
from policies.acceptance import Acceptance

SHIPPED = sorted(p.stem for p in eval_configs.DIRECTORY.glob("*.yaml"))
TEXT_CONFIGS = (AlignAttConfig, WaitkConfig, LocalAgreementConfig)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_preset_builds_its_agents_configuration(name):
    """A speech preset names its agent (`type`); a text preset is one of the LLM text policies' (or another text
    system's). An `extends` chain resolves, and every key is a knob its configuration knows."""
    import importlib

    values = read_yaml(eval_configs.path(name))
    if "type" in values:  # simulstream's processor class, as its runner imports it
        module, _, name = values["type"].rpartition(".")
        getattr(importlib.import_module(module), name).parse_config(SimpleNamespace(**values))
        return
    from agents.config_reference import config_classes

    built = []
    for config_class in (*TEXT_CONFIGS, *config_classes()):
        try:
            built.append(build_config(config_class, values))
        except Exception:  # noqa: BLE001 - not this preset's configuration
            continue
    assert built, f"{name}: no configuration class takes every key of it"


@pytest.fixture(scope="module")
def tokenizer(tiny_checkpoint):
    return load_causal_lm(str(tiny_checkpoint("qwen3")))[1]


WORDS = "Hello, world, how are you today.".split()


def test_the_reference_prompt_is_the_authors_layout(tokenizer):
    """Their system prompt, the user turn "[Current English ASR prefix]\\n" + the source and nothing after it, the
    committed target as the assistant's unfinished message, and a live source's trailing .!? dropped."""
    builder = PromptBuilder(tokenizer, "en", "de", style="alignatt4llm")
    prompt = builder.build(WORDS, "Hallo, Welt,", live=True)
    source = "Hello, world, how are you today"
    assert builder.user_content(source) == f"[Current English ASR prefix]\n{source}"
    assert "Translate live incremental English ASR into fluent, idiomatic German" in prompt.text
    assert "Let the runtime decide which drafted tokens are committed." in prompt.text
    assert "Output only the German translation" not in prompt.text  # our instruction is not theirs
    assert prompt.text.rstrip().endswith("Hallo, Welt,") and prompt.word_count == len(WORDS)
    assert f"\n{source}<|im_end|>" in prompt.text  # the final "." went with the live tail
    final = builder.build(WORDS, "", live=False)
    assert f"\n{source}.<|im_end|>" in final.text and final.word_count == len(WORDS)
    assert builder.build(["Hello", "."], live=True).word_count == 1  # a word of "." alone goes
    # The source map covers the source after the header: each word's tokens, the punctuation ones marked.
    words = [tokenizer.decode([prompt.token_ids[p]]) for p in prompt.source_positions]
    assert "".join(words).strip() == source
    # (the tiny tokenizer's lone spaces between words overlap no word either, and do not count, as theirs)
    marked = [w.strip() for w, punct in zip(words, prompt.source_token_punct) if punct]
    assert marked.count(",") == 2 and set(marked) == {",", ""}
    assert not any(punct for w, punct in zip(words, prompt.source_token_punct) if w.strip(" ,"))


class RecordingSession:
    """Stands in for a model session (a fake: it writes no translation, it records what a step asks for): drafts
    `reply` tokens for every request and keeps each call's budget, penalty and prompt."""

    def __init__(self, tokenizer, reply: str):
        self.tokenizer, self.reply, self.calls = tokenizer, reply, []

    def reset(self):
        pass

    def draft(self, prompt_ids, max_new_tokens, capture=True, stop=None, banned_first_tokens=(),
              repetition_penalty=1.0):
        from backends.draft import Draft

        self.calls.append(SimpleNamespace(budget=max_new_tokens, penalty=repetition_penalty,
                                          prompt=self.tokenizer.decode(prompt_ids)))
        draft = Draft(prompt_length=len(prompt_ids))
        for token in self.tokenizer.encode(self.reply, add_special_tokens=False)[:max_new_tokens]:
            draft.tokens.append(token)
        return draft


def paper_translator(tokenizer, reply: str, **overrides):
    """The paper text preset's translator over a `RecordingSession`, every draft token accepted (the gate aside)."""
    values = {**read_yaml(eval_configs.path("alignatt4llm_paper_text_cpu")), **overrides}
    session = RecordingSession(tokenizer, reply)
    lm = SimpleNamespace(tokenizer=tokenizer, session=lambda heads: session)
    translator = AlignAttTranslator(lm, build_config(AlignAttConfig, values), HeadSet(((0, 0),)))
    translator.acceptance = Acceptance()
    return translator, session


def source_tokens(tokenizer, words) -> int:
    return len(tokenizer(" ".join(words), add_special_tokens=False)["input_ids"])


def test_the_paper_budgets_and_penalty_reach_every_draft(tokenizer):
    """Live: min(16, max(4, source tokens + 8)); final: min(160, max(32, 3 x source tokens + 24)), the committed
    target not taken off; every draft with the repetition penalty 1.05."""
    reply = " Hallo Welt, wie geht es dir heute? " * 10
    translator, session = paper_translator(tokenizer, reply)
    translator.reset()
    for count in range(1, len(WORDS) + 1):
        translator.feed([SourceWord(WORDS[count - 1])])
    translator.flush()
    assert session.calls and all(call.penalty == 1.05 for call in session.calls)
    live, final = session.calls[:-1], session.calls[-1]
    # hold_back_words 1: the first word alone is not accessible, so no draft before the second
    assert len(live) == len(WORDS) - 1
    for count, call in zip(range(2, len(WORDS) + 1), live):
        assert call.budget == min(16, max(4, source_tokens(tokenizer, WORDS[:count]) + 8))
    assert translator.emitted_units  # something was committed before the final draft
    assert final.budget == min(160, max(32, 3 * source_tokens(tokenizer, WORDS) + 24))


def test_text_input_holds_the_last_word_read_back(tokenizer):
    """Without word times the authors' frontier leaves the last word inaccessible (`hold_back_words` 1)."""
    translator, session = paper_translator(tokenizer, " Hallo")
    seen = []
    translator.acceptance = SimpleNamespace(judge=lambda prompt, accessible, emitted: seen.append(accessible) or
                                            Acceptance().judge(prompt, accessible, emitted), capture=False,
                                            whole_drafts=False, may_write=lambda accessible, emitted: True,
                                            limit=Acceptance().limit, finish_segment=lambda: None)
    translator.reset()
    for word in WORDS[:4]:
        translator.feed([SourceWord(word)])
    assert seen == [1, 2, 3]  # read 2, 3, 4 words; the first word alone made no step
    assert math.isclose(translator.config.repetition_penalty, 1.05)
