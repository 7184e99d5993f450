"""Head calibration by translation score: the pure scoring math on hand-made rows, end to end on tiny checkpoints
against eager attention, and the MCIF talk-level calibration/evaluation split."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from common.datasets import (
    CALIBRATION_TALKS, AlignedPair, WordAlignment, aligned_pairs_from_records, load_alignments, load_mcif,
    mcif_split, mcif_talks_by_full_index, pairs_in_split,
)
from backends.heads import load_heads
from backends.hf.calibrate import (
    aligned_target_tokens, calibrate, head_hits, locate_words, rank_heads, score_prompt_layout, translation_scores,
)
from backends.hf.lm import CausalLM
from backends.prompt import PromptBuilder, PromptError
from backends.hf.reference import eager_source_attention
from backends.models import load_causal_lm

# -- pure scoring --------------------------------------------------------------------------------------------------

# A fake prompt: "solution?" is one whitespace source word of three tokens; "Lösung" and "unsere" are two tokens
# each; the aligner split "?" off as its own word on both sides.
PROMPT_TOKENS = ["<s>user\n", "So", " what", " is", " our", " sol", "ution", "?", "\nassistant\n",
                 "Was", " ist", " also", " uns", "ere", " Lö", "sung", "?"]
SOURCE_TOKEN_WORD = np.array([0, 1, 2, 3, 4, 4, 4])  # prompt positions 1..7
FIRST_TOKEN_OF_WORD = {0: 0, 1: 1, 2: 2, 3: 3, 4: 5}  # "solution?" is hit on its middle token
TOY_PAIR = AlignedPair(
    pair_id=7, source_text="So what is our solution?", target_text="Was ist also unsere Lösung?",
    source_words=("So", "what", "is", "our", "solution", "?"),
    target_words=("Was", "ist", "also", "unsere", "Lösung", "?"),
    alignments=(WordAlignment((1, 2), (0, 1), 1.0), WordAlignment((2, 3), (1, 2), 1.0),
                WordAlignment((0, 1), (2, 3), 0.3), WordAlignment((3, 4), (3, 4), 1.0),
                WordAlignment((4, 5), (4, 5), 1.0), WordAlignment((5, 6), (5, 6), 0.9)),
)


def toy_offsets() -> tuple[list[tuple[int, int]], int]:
    offsets, cursor = [], 0
    for token in PROMPT_TOKENS:
        offsets.append((cursor, cursor + len(token)))
        cursor += len(token)
    return offsets, "".join(PROMPT_TOKENS).rfind(TOY_PAIR.target_text)


def peaked_rows(peaks: list[list[int]], source_tokens: int) -> np.ndarray:
    """[T, H, S] rows with small noise and a clear maximum at peaks[t][h]."""
    rows = np.random.default_rng(0).uniform(0.0, 0.05, size=(len(peaks), len(peaks[0]), source_tokens))
    for t, per_head in enumerate(peaks):
        for h, column in enumerate(per_head):
            rows[t, h, column] = 0.5
    return rows


def test_target_tokens_of_multi_token_and_punctuation_split_words():
    offsets, target_start = toy_offsets()
    tokens = aligned_target_tokens(TOY_PAIR, offsets, target_start, min_confidence=0.5)
    assert tokens.positions.tolist() == [9, 10, 12, 13, 14, 15, 16]  # " also" is aligned only at confidence 0.3
    assert tokens.gold_words == tuple(frozenset({w}) for w in (1, 2, 3, 3, 4, 4, 4))  # "?" -> "solution?"
    with_low = aligned_target_tokens(TOY_PAIR, offsets, target_start, min_confidence=0.0)
    assert with_low.positions.tolist() == [9, 10, 11, 12, 13, 14, 15, 16]
    assert with_low.gold_words[2] == frozenset({0})


def test_head_that_always_hits_scores_one_and_head_that_never_does_zero():
    offsets, target_start = toy_offsets()
    tokens = aligned_target_tokens(TOY_PAIR, offsets, target_start, min_confidence=0.5)
    gold = [next(iter(words)) for words in tokens.gold_words]
    # head A: on the gold word (the middle token of a multi-token word); B: always on "So", never gold here;
    # C: right only on the first target token.
    peaks = [[FIRST_TOKEN_OF_WORD[w], 0, FIRST_TOKEN_OF_WORD[w] if t == 0 else 0] for t, w in enumerate(gold)]
    rows = peaked_rows(peaks, len(SOURCE_TOKEN_WORD))
    assert head_hits(rows, SOURCE_TOKEN_WORD, tokens.gold_words).tolist() == [7, 0, 1]
    # Two pairs of 7 and 1 aligned tokens: TS averages per-pair fractions (C: (1/7 + 1) / 2), it does not pool.
    scores = translation_scores([rows, rows[:1]], [SOURCE_TOKEN_WORD] * 2, [tokens.gold_words, tokens.gold_words[:1]])
    assert scores == pytest.approx([1.0, 0.0, (1 / 7 + 1) / 2])
    # A pair without aligned tokens does not count.
    empty = np.zeros((0, 3, len(SOURCE_TOKEN_WORD)))
    assert translation_scores([rows, empty], [SOURCE_TOKEN_WORD] * 2, [tokens.gold_words, ()]) == pytest.approx(
        [1.0, 0.0, 1 / 7])


def test_scoring_rejects_mismatched_shapes_and_no_aligned_tokens():
    with pytest.raises(ValueError, match="rows must be"):
        head_hits(np.zeros((2, 3, 5)), SOURCE_TOKEN_WORD, [frozenset({1})] * 2)
    with pytest.raises(ValueError, match="no pair has an aligned target token"):
        translation_scores([np.zeros((0, 3, 7))], [SOURCE_TOKEN_WORD], [()])


def test_locate_words_searches_in_order_and_tolerates_aligner_artefacts():
    text = 'Our "solution" is, in short, ours.'
    spans = locate_words(text, ['"Our', "solution", "missing", "is", ",", "ours", "."])
    assert [text[s:e] if s is not None else None for s, e in (span or (None, None) for span in spans)] == [
        "Our", "solution", None, "is", ",", "ours", "."]
    assert spans[4] == (text.index(","), text.index(",") + 1)  # after "is": not the quote's neighbours


def test_rank_heads_sorts_by_score_then_position():
    heads, scores = rank_heads(np.array([[0.2, 0.5], [0.5, 0.1]]))
    assert heads == ((0, 1), (1, 0), (0, 0), (1, 1))
    assert scores == (0.5, 0.5, 0.2, 0.1)


# -- end to end on tiny checkpoints --------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["gemma4", "qwen3"])
def tiny_lm(request, tiny_checkpoint):
    model, tokenizer = load_causal_lm(str(tiny_checkpoint(request.param)))
    return request.param, CausalLM(model, tokenizer)


def eager_translation_scores(lm, pairs, heads) -> np.ndarray:
    """[H] TS recomputed independently: eager attention of the full prompt, argmax word, gold check, per pair."""
    builder = PromptBuilder(lm.tokenizer, "en", "de")
    fractions = []
    for pair in pairs:
        prompt, tokens = score_prompt_layout(builder, pair, 0.0)
        rows = eager_source_attention(lm.model, prompt.token_ids, heads, tokens.positions.tolist(),
                                      prompt.source_positions).numpy()
        hits = [[int(prompt.source_token_word[int(np.argmax(rows[t, h]))]) in gold for h in range(len(heads))]
                for t, gold in enumerate(tokens.gold_words)]
        fractions.append(np.mean(hits, axis=0))
    return np.mean(fractions, axis=0)


def test_calibration_end_to_end_matches_eager_attention(tiny_lm, toy_alignment_records):
    arch, lm = tiny_lm
    pairs = aligned_pairs_from_records(toy_alignment_records)
    prompt = PromptBuilder(lm.tokenizer, "en", "de").build(pairs[0].source_text.split(), pairs[0].target_text)
    assert len(prompt.token_ids) > 2 * lm.model.config.sliding_window, "prompts must cross the sliding window"
    result = calibrate(lm, pairs, "en", "de", f"tiny-{arch}", calibration_split="hand-made")
    config = lm.model.config
    assert result.ts_matrix.shape == (config.num_hidden_layers, config.num_attention_heads)
    assert np.all((result.ts_matrix >= 0) & (result.ts_matrix <= 1))
    head_set = result.head_set
    assert len(head_set.heads) == result.ts_matrix.size == len(set(head_set.heads))
    assert list(head_set.scores) == sorted(head_set.scores, reverse=True)
    assert all(result.ts_matrix[head] == score for head, score in zip(head_set.heads, head_set.scores))
    assert head_set.metadata["used_pairs"] == 5 and result.skipped == ()
    assert head_set.metadata["used_target_tokens"] == sum(count for _, count in result.pair_tokens) > 5
    # Replay (q/k capture, SDPA, sliding windows, Gemma-4 KV sharing) must give eager attention's argmaxes: the top
    # head's TS, and in fact every head's.
    eager = eager_translation_scores(lm, pairs, head_set.heads)
    assert abs(eager[0] - head_set.scores[0]) < 1e-6, arch
    assert np.abs(eager - np.array(head_set.scores)).max() < 1e-6, arch


def test_unusable_pairs_are_skipped_and_counted(tiny_lm, toy_alignment_records):
    _, lm = tiny_lm
    pairs = aligned_pairs_from_records(toy_alignment_records[:2])
    out_of_range = replace(pairs[0], pair_id=90, alignments=(WordAlignment((0, 99), (0, 1), 1.0),))
    unaligned = replace(pairs[1], pair_id=91, alignments=(WordAlignment((0, 1), (0, 1), 0.2),))
    result = calibrate(lm, [pairs[0], out_of_range, unaligned], "en", "de", "tiny", min_confidence=0.5)
    assert [s.pair_id for s in result.skipped] == [90, 91]
    assert "out of range" in result.skipped[0].reason and "no aligned target tokens" in result.skipped[1].reason
    assert result.head_set.metadata["used_pairs"] == 1 and result.head_set.metadata["skipped_pairs"] == 2
    with pytest.raises(ValueError, match="none of the 2 pairs"):
        calibrate(lm, [out_of_range, unaligned], "en", "de", "tiny", min_confidence=0.5)
    with pytest.raises(ValueError, match="no aligned pairs"):
        calibrate(lm, [], "en", "de", "tiny")


def test_calibration_needs_a_chat_template():
    lm = SimpleNamespace(tokenizer=SimpleNamespace(chat_template=None))
    with pytest.raises(PromptError, match="chat template"):
        calibrate(lm, [TOY_PAIR], "en", "de", "no-template")


def test_calibration_result_saves_a_loadable_head_file(tiny_lm, toy_alignment_records, tmp_path):
    _, lm = tiny_lm
    result = calibrate(lm, aligned_pairs_from_records(toy_alignment_records), "en", "de", "tiny")
    result.save(tmp_path / "heads.json", split="all")
    loaded = load_heads(tmp_path / "heads.json", top_k=4)
    assert loaded.heads == result.head_set.heads[:4]
    assert loaded.scores == pytest.approx(result.head_set.scores[:4], abs=1e-6)
    assert loaded.metadata["score_name"] == "translation_score_argmax" and loaded.metadata["split"] == "all"


# -- the MCIF split ------------------------------------------------------------------------------------------------

def test_mcif_talk_split_is_disjoint_and_has_the_documented_sizes(shared_data):
    lines = load_mcif(shared_data, "de")
    calibration, evaluation = mcif_split(lines, "calibration"), mcif_split(lines, "evaluation")
    assert (len(lines), len(calibration), len(evaluation)) == (606, 174, 432)
    assert {line.talk for line in calibration} == set(CALIBRATION_TALKS)
    assert not {line.talk for line in calibration} & {line.talk for line in evaluation}
    assert len({line.talk for line in evaluation}) == 10
    assert mcif_split(lines, "all") == lines
    with pytest.raises(ValueError, match="unknown split"):
        mcif_split(lines, "test")


def test_calibration_pairs_belong_to_calibration_talks(shared_data):
    pairs = load_alignments(shared_data / "word_alignments" / "word_alignments_en-de.json")
    talks = mcif_talks_by_full_index(shared_data)
    calibration = pairs_in_split(pairs, talks, "calibration")
    evaluation = pairs_in_split(pairs, talks, "evaluation")
    assert len(calibration) + len(evaluation) == len(pairs) and calibration
    assert all(talks[p.pair_id] in CALIBRATION_TALKS for p in calibration)
    assert not {p.pair_id for p in calibration} & {p.pair_id for p in evaluation}
    lines = {line.full_index: line for line in load_mcif(shared_data, "de")}
    assert all(lines[p.pair_id].talk in CALIBRATION_TALKS for p in calibration)
