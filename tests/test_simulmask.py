"""SimulMask: the modified ALiBi math against hand computations and transformers, the mask for wait-k (paper
Figure 3, multi-token words, the prompt boundary), the shared training/inference prompt, and the consistency of the
spliced-cache decoder (stock ALiBi) with one full forward under SimulMask and modified ALiBi, in float32."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from transformers import BloomConfig, BloomForCausalLM, FalconConfig, FalconForCausalLM
from transformers.models.falcon.modeling_falcon import build_alibi_tensor

from backends.simulmask.alibi import alibi_slopes, modified_alibi_bias, visible_key_rank
from backends.simulmask.attention import NotAnAlibiModelError, modified_alibi_attention
from backends.simulmask.decoder import RecomputingDecoder, SimulMaskDecoder
from backends.simulmask.loading import load_simulmask_lm
from backends.simulmask.mask import collate_simulmask, simulmask_forward, waitk_simulmask
from backends.simulmask.prompt import segment_pair, simulmask_template, source_text
from backends.streaming_masks.decoder import StreamingLM
from backends.streaming_masks.hf_inputs import IGNORE_INDEX
from backends.streaming_masks.schedule import waitk_schedule, waitk_units_read
from backends.streaming_masks.segments import SegmentedExample
from backends.streaming_masks.visibility import visibility_matrix
from tiny_checkpoints import build_tiny_tokenizer

# ----- modified ALiBi ---------------------------------------------------------------------------------------------


def test_rank_and_bias_by_hand_paper_figure_4():
    # 5 x 5 causal mask; q4 cannot see k2, k3 and q5 cannot see k2, k3 (paper Figure 4)
    visible = torch.tril(torch.ones(5, 5, dtype=torch.bool))
    visible[3:, 1:3] = False
    expected_rank = [[0, 0, 0, 0, 0], [0, 1, 0, 0, 0], [0, 1, 2, 0, 0], [0, 0, 0, 1, 0], [0, 0, 0, 1, 2]]
    assert visible_key_rank(visible).tolist() == expected_rank
    bias = modified_alibi_bias(visible, num_heads=8, bfloat16_products=False)  # [8, 5, 5], slopes 2^-1 .. 2^-8
    slope = 0.5
    # relative to its own key, row 4 sees k1 at distance 1 (not 3) and row 5 sees k1 at 2, k4 at 1: no gap
    assert bias[0, 3, 0] - bias[0, 3, 3] == -1 * slope
    assert bias[0, 4, 0] - bias[0, 4, 4] == -2 * slope and bias[0, 4, 3] - bias[0, 4, 4] == -1 * slope
    assert bias[0, 2, 0] - bias[0, 2, 2] == -2 * slope  # unmasked rows: stock ALiBi distances


@pytest.mark.parametrize("heads", [1, 4, 6, 12, 32, 71])
def test_slopes_and_fully_visible_bias_equal_transformers_falcon(heads):
    expected = build_alibi_tensor(torch.ones(1, 9, dtype=torch.long), heads, torch.float32)  # [H, 1, 9]
    ours = modified_alibi_bias(torch.ones(1, 9, dtype=torch.bool), heads)  # the last causal row: [H, 1, 9]
    assert torch.equal(ours, expected)
    powers = [-8 * h / 4 for h in range(1, 5)] if heads == 4 else None
    if powers:
        assert torch.allclose(alibi_slopes(4), torch.tensor([2.0 ** p for p in powers]))


# ----- the mask ---------------------------------------------------------------------------------------------------


def example_of(source_tokens: list[int], target_tokens: list[int]) -> SegmentedExample:
    """A segmented example from tokens per unit: source_tokens[u] tokens of source unit u (0 = p1), target_tokens[j]
    of target word j (0 = p2, last = EOS)."""
    source_unit = np.repeat(np.arange(len(source_tokens)), source_tokens)
    target_word = np.repeat(np.arange(len(target_tokens)), target_tokens)
    length = len(source_unit) + len(target_word)
    return SegmentedExample(
        token_ids=np.arange(length), source_unit=np.concatenate([source_unit, -np.ones(len(target_word), int)]),
        target_word=np.concatenate([-np.ones(len(source_unit), int), target_word]),
        source_words=len(source_tokens) - 1, target_words=len(target_tokens) - 2)


def test_wait1_simulmask_is_paper_figure_3():
    # p1, s1..s4, p2, t1..t4, EOS, one token each (Figure 3 plus the EOS row)
    example = example_of([1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1])
    visible = waitk_simulmask(example, k=1)
    names = ["p1", "s1", "s2", "s3", "s4", "p2", "t1", "t2", "t3", "t4", "eos"]
    seen = {names[i]: [names[j] for j in np.flatnonzero(visible[i])] for i in range(len(names))}
    assert seen["s2"] == ["p1", "s1", "s2"]  # source rows: causal over the source
    assert seen["p2"] == ["p1", "s1", "p2"]  # predicts t1 after the first read
    assert seen["t1"] == ["p1", "s1", "s2", "p2", "t1"]
    assert seen["t2"] == ["p1", "s1", "s2", "s3", "p2", "t1", "t2"]
    assert seen["t3"] == names[:9] and seen["t4"] == names[:10]  # whole source once read


def test_multi_token_words_and_prompt_boundary():
    # p1 (2 tokens), 4 source words, p2 (3 tokens), target words of 2, 1, 3 tokens, EOS; wait-2
    example = example_of([2, 1, 2, 1, 1], [3, 2, 1, 3, 1])
    visible = waitk_simulmask(example, k=2)
    source = example.source_unit[example.source_unit >= 0]
    words_seen = [int(source[visible[i, :len(source)]].max()) for i in range(len(source), len(visible))]
    # p2 rows: the first read (k = 2) incl. its last row, which predicts t1; inside t1: 2; t1's last token predicts
    # t2: 3; t2 (1 token) predicts t3: 4; inside t3: 4; t3's last token predicts EOS: all 4 words
    assert words_seen == [2, 2, 2, 2, 3, 4, 4, 4, 4, 4]
    assert visible[: len(source), : len(source)][np.tril_indices(len(source))].all()  # p1 and source causal
    reference = waitk_simulmask(example, k=2, alignment="reference")
    leaked = [int(source[reference[i, :len(source)]].max()) for i in range(len(source), len(visible))]
    assert leaked == [2, 2, 2, 3, 3, 4, 4, 4, 4, 4]  # Simul-LLM: t1's first row already sees word 3
    with pytest.raises(ValueError, match="alignment"):
        waitk_simulmask(example, k=2, alignment="query")


def test_collate_labels_target_only_and_pads(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    long = segment_pair(lm.tokenizer, lm.template, "The cat sat on the mat.", "Die Katze saß auf der Matte.")
    short = segment_pair(lm.tokenizer, lm.template, "Thank you.", "Danke.")
    batch = collate_simulmask([long, short], k=2, pad_token_id=0)
    size = len(short.token_ids)
    labels = batch.labels[1]
    assert (labels[:size] != IGNORE_INDEX).tolist() == (short.target_word >= 1).tolist()
    assert labels[-1] == IGNORE_INDEX if size < len(labels) else True
    assert batch.visible[1, size:].sum(dim=1).tolist() == [1] * (len(long.token_ids) - size)  # pads see themselves
    assert not batch.visible[1, :size, size:].any()
    assert lm.tokenizer.decode(long.token_ids[long.target_word == long.target_words + 1]) == lm.tokenizer.eos_token


# ----- one prompt for training and inference ----------------------------------------------------------------------


def test_training_and_decoding_tokenize_the_same_prompt(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    source, target = "Where is the train station?", "Wo ist der Bahnhof?"
    example = segment_pair(lm.tokenizer, lm.template, source, target)
    text = lm.tokenizer.decode(example.token_ids)
    assert text == f"Translate the following sentence from English to German: {source}\nAssistant: {target}" \
                   f"{lm.tokenizer.eos_token}"
    decoder = SimulMaskDecoder(lm)
    for word in source.split():
        decoder.read_word(word)
    decoder.read_end()
    assert decoder.source_ids == example.token_ids[: example.source_length].tolist()
    assert decoder.source_unit == example.source_unit[: example.source_length].tolist()
    header = example.token_ids[example.target_word == 0].tolist()
    assert lm.encode(lm.template.target_prefix) == header
    assert source_text(lm.template, source.split()) + lm.template.target_prefix + " " + target == text[: -len(
        lm.tokenizer.eos_token)]


# ----- the Falcon / Bloom attention path and the decoder ----------------------------------------------------------


def run_waitk(decoder: SimulMaskDecoder, words: list[str], k: int, max_words: int) -> None:
    """Drive the decoder by the wait-k schedule: before target word j, exactly g(j) units are read."""
    units = len(words) + 1
    for j in range(1, max_words + 1):
        while decoder.units_read < waitk_units_read(k, j, units):
            if len(decoder.source_words) < len(words):
                decoder.read_word(words[len(decoder.source_words)])
            else:
                decoder.read_end()
        if decoder.write_word() is None:
            break


def full_forward_logits(model, decoder: SimulMaskDecoder, k: int) -> torch.Tensor:
    """One forward over [p1 ‖ source ‖ p2 ‖ target] under the wait-k SimulMask and the modified ALiBi."""
    source_unit = np.array(decoder.source_unit + [-1] * len(decoder.target_ids))
    target_word = np.array([-1] * len(decoder.source_ids) + decoder.target_word)
    schedule = waitk_schedule(k, len(decoder.source_words) + 1, max(decoder.target_word))
    visible = visibility_matrix(source_unit, target_word, schedule)
    with torch.no_grad(), modified_alibi_attention(model, torch.from_numpy(visible)):
        output = model(input_ids=torch.tensor([decoder.source_ids + decoder.target_ids]), use_cache=False)
    return output.logits[0].float()


def tiny_alibi_lm(kind: str) -> StreamingLM:
    """In-memory tiny ALiBi variants beyond the saved falcon-rw-like checkpoint (random weights, float32)."""
    tokenizer = build_tiny_tokenizer("falcon")
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
           "pad_token_id": tokenizer.pad_token_id, "vocab_size": 512}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        if kind == "bloom":  # 6 heads: the extra (odd-power) slopes
            model = BloomForCausalLM(BloomConfig(hidden_size=96, n_layer=2, n_head=6, **ids))
            model.set_attn_implementation("eager")
        else:  # Falcon-40B layout (grouped KV, two layer norms, parallel attention) with ALiBi and 6 heads
            model = FalconForCausalLM(FalconConfig(hidden_size=96, num_attention_heads=6, num_kv_heads=2,
                                                   num_hidden_layers=2, alibi=True, new_decoder_architecture=True,
                                                   parallel_attn=True, bias=False, **ids))
            model.set_attn_implementation(kind)
    return StreamingLM.from_model(model.float().eval(), tokenizer, simulmask_template(tokenizer, "en", "de"))


def check_decoder_equals_full_forward(lm: StreamingLM, k: int, label: str) -> None:
    # a random model rarely ends words: with at most 3 tokens per word there are many word ends, drops and re-feeds
    decoder = SimulMaskDecoder(lm, max_word_tokens=3, record_logits=True)
    words = "I would like a cup of coffee .".split()
    run_waitk(decoder, words, k, max_words=12)
    assert decoder.words_written >= 3 and decoder.end_read
    assert decoder.unfed is None and len(decoder.target_ids) > len(set(decoder.target_word))  # multi-token words
    reference = full_forward_logits(lm.model, decoder, k)
    source_length = len(decoder.source_ids)
    assert len(decoder.row_logits) == source_length + len(decoder.target_ids)
    for (kind, index), logits in decoder.row_logits.items():
        row = index if kind == "s" else source_length + index
        torch.testing.assert_close(logits, reference[row], atol=1e-4, rtol=1e-4, msg=f"{label} {kind}{index}")
    # the check can fail: another visibility for the target rows changes the logits
    shifted = full_forward_logits(lm.model, decoder, k + 1)
    assert not torch.allclose(shifted[source_length:], reference[source_length:], atol=1e-4)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_cached_decoder_equals_one_full_forward_falcon_checkpoint(tiny_checkpoint, k):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    check_decoder_equals_full_forward(lm, k, f"falcon k={k}")


@pytest.mark.parametrize("kind", ["sdpa", "eager", "bloom"])
def test_cached_decoder_equals_one_full_forward_variants(kind):
    check_decoder_equals_full_forward(tiny_alibi_lm(kind), 2, kind)


def test_modified_alibi_with_the_causal_mask_is_stock_falcon(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    ids = torch.tensor([lm.encode("Translate the following sentence: The cat sat on the mat.")])
    with torch.no_grad():
        stock = lm.model(input_ids=ids).logits
        with modified_alibi_attention(lm.model, torch.tril(torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool))):
            hooked = lm.model(input_ids=ids).logits
        after = lm.model(input_ids=ids).logits  # the hooks are gone after the block
    torch.testing.assert_close(hooked, stock, atol=1e-5, rtol=1e-5)
    assert torch.equal(after, stock)


def test_training_loss_uses_the_mask(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    example = segment_pair(lm.tokenizer, lm.template, "The weather is nice today.", "Das Wetter ist heute schön.")
    masked = collate_simulmask([example], k=1, pad_token_id=0)
    causal = collate_simulmask([example], k=1, pad_token_id=0, simulmask=False)
    with torch.no_grad():
        loss_masked = simulmask_forward(lm.model, masked).loss
        loss_causal = simulmask_forward(lm.model, causal).loss
        stock = lm.model(input_ids=causal.input_ids, labels=causal.labels).loss
    assert math.isfinite(loss_masked.item()) and not torch.isclose(loss_masked, loss_causal)
    torch.testing.assert_close(loss_causal, stock, atol=1e-5, rtol=1e-5)


def test_recomputing_baseline_reencodes_the_prediction(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    words = "I would like a cup of coffee .".split()
    cached, recomputed = SimulMaskDecoder(lm, max_word_tokens=3), RecomputingDecoder(lm, max_word_tokens=3)
    for decoder in (cached, recomputed):
        run_waitk(decoder, words, 3, max_words=8)
    # the same first word (same view before any recomputation), then different KV for the old target rows
    assert cached.words_written >= 3 and recomputed.words_written >= 3
    assert cached.target_ids[: len(lm.encode(lm.template.target_prefix)) + 1] == \
        recomputed.target_ids[: len(lm.encode(lm.template.target_prefix)) + 1]


def test_not_an_alibi_model_is_refused(tiny_checkpoint):
    with pytest.raises(NotAnAlibiModelError, match="ALiBi model"):
        load_simulmask_lm(str(tiny_checkpoint("qwen2")), "en", "de")


def test_visibility_shape_mismatch_is_a_clear_error(tiny_checkpoint):
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    with pytest.raises(ValueError, match="visibility is"), modified_alibi_attention(
            lm.model, torch.ones(4, 4, dtype=torch.bool).tril()):
        lm.model(input_ids=torch.tensor([[5, 6, 7]]))


def test_stock_alibi_distances_in_training_would_not_match_the_cache(tiny_checkpoint, monkeypatch):
    """The paper's ablation: SimulMask with unmodified ALiBi (key index, gaps included) is not what the cache sees."""
    lm = load_simulmask_lm(str(tiny_checkpoint("falcon")), "en", "de")
    decoder = SimulMaskDecoder(lm, max_word_tokens=3, record_logits=True)
    run_waitk(decoder, "I would like a cup of coffee .".split(), 2, max_words=8)
    modified = full_forward_logits(lm.model, decoder, 2)
    monkeypatch.setattr("backends.simulmask.alibi.visible_key_rank",
                        lambda visible: torch.arange(visible.shape[-1]).expand(visible.shape) * visible)
    stock = full_forward_logits(lm.model, decoder, 2)
    source_length = len(decoder.source_ids)
    torch.testing.assert_close(stock[:source_length], modified[:source_length])  # no gaps in source rows
    assert not torch.allclose(stock[source_length:], modified[source_length:], atol=1e-4)
