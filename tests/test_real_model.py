"""Parity and harness runs on the embedded real model (Qwen2.5-Coder-0.5B-Instruct, dequantised from PyPI GGUF):
replayed attention against eager attention on 50 prompts, capture invisibility, and SimulEval CLI runs."""
import pytest
import torch

from agents.systems.config import AlignAttConfig
from agents.systems.llm import resolve_heads
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder
from backends.hf.reference import eager_source_attention
from backends.models import load_causal_lm
from policies.alignatt import AlignAttParams, scan_draft
from observed import observe

pytestmark = pytest.mark.real_model

SENTENCES = [
    "What is simultaneous speech translation and why does it matter for international conferences?",
    "The committee approved the new budget for schools and hospitals after a long debate last week.",
    "We evaluate our model on three language pairs and report both translation quality and latency.",
    "In this talk I will briefly introduce our work on attention heads in large language models.",
    "The results show that a small set of heads tracks word alignments across many languages.",
    "Our method needs no additional training and works with any decoder-only model off the shelf.",
    "Hello, world, how are you? I'm fine, thanks: 3.5 million people (roughly) agree.",
    "Finally, we release the code, the models and the data under an open license for everyone.",
    "She said that the weather in Berlin was cold, but the people were warm and welcoming.",
    "Large language models can translate, but deciding when to speak is the hard part.",
]
TARGET_PREFIXES = ["", "Die", "Wir haben", "In diesem Vortrag", "Hallo"]


@pytest.fixture(scope="module")
def real_lm(embedded_model_path):
    return CausalLM(*load_causal_lm(str(embedded_model_path)))


def parity_prompts(builder, count=50):
    prompts = []
    for index in range(count):
        words = SENTENCES[index % len(SENTENCES)].split()
        cut = 2 + (index * 7) % (len(words) - 1)
        prompts.append(builder.build(words[:cut], TARGET_PREFIXES[index % len(TARGET_PREFIXES)]))
    return prompts


def test_replay_equals_eager_on_50_prompts_and_every_decision_agrees(real_lm):
    config = AlignAttConfig()
    top_heads = resolve_heads(config).heads
    every_head = [(l, h) for l in range(real_lm.model.config.num_hidden_layers)
                  for h in range(real_lm.model.config.num_attention_heads)]
    builder = PromptBuilder(real_lm.tokenizer, "en", "de")
    session = real_lm.session(every_head)
    worst, decisions = 0.0, 0
    for prompt in parity_prompts(builder):
        draft = session.draft(prompt.token_ids, 6)
        if not draft.tokens:
            continue
        replayed = draft.source_attention(prompt.source_positions)
        reference = eager_source_attention(real_lm.model, prompt.token_ids + draft.tokens, every_head,
                                           list(draft.positions), prompt.source_positions)
        worst = max(worst, (replayed - reference).abs().max().item())
        selected = [every_head.index(h) for h in top_heads]
        for border in (-2, -1, 1):
            for accessible in (max(1, prompt.word_count - 2), prompt.word_count):
                params = AlignAttParams(border=border)
                ours = scan_draft(replayed[:, selected].numpy(), prompt.source_token_word, accessible, params)
                theirs = scan_draft(reference[:, selected].numpy(), prompt.source_token_word, accessible, params)
                assert ours.accepted_tokens == theirs.accepted_tokens
                assert [d.source_word for d in ours.decisions] == [d.source_word for d in theirs.decisions]
                decisions += len(ours.decisions)
    assert worst < 1e-4, f"max |replay - eager| = {worst}"
    assert decisions > 200


def test_capture_is_invisible_on_the_real_model(real_lm):
    builder = PromptBuilder(real_lm.tokenizer, "en", "de")
    prompt = builder.build(SENTENCES[1].split(), "Der Ausschuss")
    heads = resolve_heads(AlignAttConfig()).heads
    with torch.inference_mode():
        captured = real_lm.model(torch.tensor([prompt.token_ids])).logits
        real_lm.model.set_attn_implementation("sdpa")
        stock = real_lm.model(torch.tensor([prompt.token_ids])).logits
        real_lm.model.set_attn_implementation("alignatt_sdpa")
    assert torch.equal(captured, stock)
    assert real_lm.session(heads).draft(prompt.token_ids, 12).tokens == \
        real_lm.session(None).draft(prompt.token_ids, 12, capture=False).tokens


@pytest.mark.harness
@pytest.mark.parametrize("agent,config", [("TextAgent", "alignatt4llm_text_cpu"), ("WaitkTextAgent", "waitk_text_cpu")])
def test_simuleval_cli_runs_the_agents_on_real_sentences(tmp_path, agent, config, embedded_model_path):
    import eval_configs
    from agents.harness.simuleval import run_simuleval_cli

    sources = ["What is simultaneous speech translation?", "We evaluate our model on three language pairs."]
    targets = ["Was ist simultane Sprachübersetzung?", "Wir evaluieren unser Modell an drei Sprachpaaren."]
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n")
    (tmp_path / "tgt.txt").write_text("\n".join(targets) + "\n")
    instances = run_simuleval_cli([
        "--agent-class", f"agents.alignatt4llm.{agent}", "--config", str(eval_configs.path(config)),
        "--source", str(tmp_path / "src.txt"), "--target", str(tmp_path / "tgt.txt"),
        "--output", str(tmp_path / "out"), "--no-progress-bar", "--latency-metrics", "LAAL", "AL"])
    assert len(instances) == 2
    for instance, source in zip(instances, sources):
        assert instance["prediction"].strip(), "a translation was produced"
        delays = instance["delays"]
        assert delays == sorted(delays) and max(delays) <= len(source.split())
        assert len(delays) == len(instance["prediction"].split())
    scores = (tmp_path / "out" / "scores.tsv").read_text()
    assert "BLEU" in scores and "LAAL" in scores


def test_early_stopped_drafts_decide_exactly_like_full_drafts(real_lm):
    from agents.systems.llm import AlignAttTranslator
    from common.stream import SourceWord

    config = AlignAttConfig()
    outputs, decode_steps = [], []
    for early in (True, False):
        translator = AlignAttTranslator(real_lm, config, resolve_heads(config), stop_at_first_failure=early)
        seen = observe(translator)
        emissions = [translator.feed([SourceWord(w)]).new_units for w in SENTENCES[2].split()[:9]]
        outputs.append((emissions, [step.scan for step in seen.steps]))
        decode_steps.append(sum(len(step.draft.tokens) for step in seen.steps))
    assert outputs[0] == outputs[1]
    assert decode_steps[0] <= decode_steps[1]
