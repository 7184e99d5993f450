"""`repetition_penalty` of the drafts (AlignAtt4LLM drafts with 1.05, prompt tokens penalised as vLLM does): on the
transformers backend against transformers' own `model.generate(repetition_penalty=...)` as the independent reference
(eager and compiled-step decoding, with and without a banned first token), 1.0 leaving drafts as they were, bad
values refused; on llama.cpp against a numpy penalty applied to llama.cpp's own logits step by step."""
import math

import numpy as np
import pytest
import torch
from transformers.generation.logits_process import RepetitionPenaltyLogitsProcessor

import backends.draft
from backends.hf.compiled_step import CompiledStep
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.models import load_causal_lm

SOURCES = ["the committee approved the new budget".split(),
           "after a long debate in the regional parliament the committee approved the budget".split()]
BUDGET = 12
STRONG = 2.0  # visibly changes the tiny model's drafts


@pytest.fixture(scope="module")
def lm(tiny_checkpoint):
    return CausalLM(*load_causal_lm(str(tiny_checkpoint("qwen3"))))


def prompts(lm) -> list[list[int]]:
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    return [builder.build(words, "").token_ids for words in SOURCES]


@torch.inference_mode()
def generated(lm: CausalLM, prompt_ids: list[int], budget: int, penalty: float) -> tuple[list[int], bool]:
    """transformers' greedy `generate` with its repetition penalty, ended by the draft's stop ids: (tokens, finished)."""
    input_ids = torch.tensor([prompt_ids])
    output = lm.model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                               repetition_penalty=penalty, max_new_tokens=budget,
                               eos_token_id=sorted(lm.stop_token_ids), pad_token_id=lm.tokenizer.pad_token_id)
    tokens = output[0, len(prompt_ids):].tolist()
    finished = bool(tokens) and tokens[-1] in lm.stop_token_ids
    return tokens[:-1] if finished else tokens, finished


@pytest.mark.parametrize("penalty", [1.05, STRONG])
def test_drafts_equal_transformers_generate_with_its_repetition_penalty(lm, penalty):
    session, changed = lm.session(None), 0
    for prompt_ids in prompts(lm):
        draft = session.draft(prompt_ids, BUDGET, capture=False, repetition_penalty=penalty)
        assert (draft.tokens, draft.finished) == generated(lm, prompt_ids, BUDGET, penalty)
        changed += draft.tokens != session.draft(prompt_ids, BUDGET, capture=False).tokens
    if penalty == STRONG:
        assert changed, "the strong penalty changes a draft (else this test shows nothing)"


def test_a_capturing_draft_is_penalised_alike_and_keeps_every_row(lm):
    session = lm.session([(0, 0), (1, 1)])
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    prompt = builder.build(SOURCES[1], "")
    draft = session.draft(prompt.token_ids, BUDGET, repetition_penalty=STRONG)
    assert (draft.tokens, draft.finished) == generated(lm, prompt.token_ids, BUDGET, STRONG)
    assert draft.source_attention(prompt.source_positions).shape[0] == len(draft.tokens)


def test_a_penalty_of_one_is_todays_draft_and_touches_no_logit(lm, monkeypatch):
    session = lm.session(None)
    before = [session.draft(p, BUDGET, capture=False) for p in prompts(lm)]

    def never(*args):
        raise AssertionError("a penalty of 1.0 must not touch the logits")

    monkeypatch.setattr(backends.draft, "penalise_repetitions", never)
    for prompt_ids, draft in zip(prompts(lm), before):
        again = session.draft(prompt_ids, BUDGET, capture=False, repetition_penalty=1.0)
        assert (again.tokens, again.finished) == (draft.tokens, draft.finished)
        assert (draft.tokens, draft.finished) == generated(lm, prompt_ids, BUDGET, 1.0)


@torch.inference_mode()
def test_a_banned_first_token_is_the_best_other_penalised_token_then_generate_continues(lm):
    session = lm.session(None)
    for prompt_ids in prompts(lm):
        # The reference's first pick: transformers' processor on a full forward's last row, then the ban.
        logits = lm.model(torch.tensor([prompt_ids])).logits[:, -1].float()
        penalised = RepetitionPenaltyLogitsProcessor(STRONG)(torch.tensor([prompt_ids]), logits)[0]
        ranked = [t for t in torch.argsort(penalised, descending=True, stable=True).tolist()
                  if t not in lm.stop_token_ids]
        for banned in ([ranked[0]], ranked[:3]):
            draft = session.draft(prompt_ids, BUDGET, capture=False, banned_first_tokens=banned,
                                  repetition_penalty=STRONG)
            assert draft.tokens[0] == ranked[len(banned)]
            # The rest penalises the prompt and the first token, as generate does with the first token in its prompt.
            rest = generated(lm, prompt_ids + draft.tokens[:1], BUDGET - 1, STRONG)
            assert (draft.tokens[1:], draft.finished) == rest


def test_the_compiled_step_path_is_penalised_alike(lm):
    """The compiled path's loop (static cache, one step per token, penalty outside the graph) with the step's forward
    left uncompiled: compiling costs a minute and the graph never sees the penalty."""
    stepped = CausalLM(lm.model, lm.tokenizer)
    stepped.compiled_step = CompiledStep(lm.model)
    stepped.compiled_step._forward = lm.model.forward
    session = stepped.session(None)
    assert session.static
    for prompt_ids in prompts(lm):
        for banned in ((), session.draft(prompt_ids, 1, capture=False, repetition_penalty=STRONG).tokens):
            draft = session.draft(prompt_ids, BUDGET, capture=False, banned_first_tokens=banned,
                                  repetition_penalty=STRONG)
            eager = lm.session(None).draft(prompt_ids, BUDGET, capture=False, banned_first_tokens=banned,
                                           repetition_penalty=STRONG)
            assert (draft.tokens, draft.finished) == (eager.tokens, eager.finished)


@pytest.mark.parametrize("penalty", [0.5, 0.0, -1.0, math.nan, math.inf, "1.05", True])
def test_a_bad_penalty_is_refused_with_the_fix(lm, penalty):
    with pytest.raises(ValueError, match=r"repetition_penalty must be a finite number >= 1.0.*pass 1.0"):
        lm.session(None).draft(prompts(lm)[0], BUDGET, capture=False, repetition_penalty=penalty)


@pytest.mark.real_model
def test_llama_cpp_draft_equals_a_numpy_penalty_on_its_own_logits_step_by_step(embedded_model_path):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp.lm import LlamaCppCausalLM

    llama_lm = LlamaCppCausalLM.load("embedded", n_ctx=512, n_threads=1)
    builder = PromptBuilder(llama_lm.tokenizer, "en", "de")
    session, reference = llama_lm.session([(0, 0)]), llama_lm.session(None)
    prompt_ids = builder.build(SOURCES[1], "").token_ids
    plain = session.draft(prompt_ids, 8, capture=False).tokens
    with pytest.raises(ValueError, match="finite number >= 1.0"):
        session.draft(prompt_ids, 8, repetition_penalty=0.5)
    for penalty, banned in ((1.05, ()), (STRONG, ()), (STRONG, plain[:1])):
        draft = session.draft(prompt_ids, 8, banned_first_tokens=banned, repetition_penalty=penalty)
        # The same llama.cpp calls as a plain draft (prompt, then one token at a time), picked in numpy here.
        tokens, logits = [], reference._prefill(prompt_ids)
        while len(tokens) < 8:
            seen = sorted(set(prompt_ids + tokens))
            logits = logits.copy()
            logits[seen] = np.where(logits[seen] < 0, logits[seen] * penalty, logits[seen] / penalty)
            if not tokens:
                logits[list(banned)] = -np.inf
            token = int(np.argmax(logits))
            if token in reference.stop_token_ids:
                break
            tokens.append(token)
            logits = reference._decode([token], every_row=False)[-1]
        assert draft.tokens == tokens and len(tokens) > 1
        if penalty == STRONG:
            assert draft.tokens != plain
