"""Streaming masks: the wait-k schedule, the visibility matrix, offset segmentation, and the consistency of the
streaming decoder (one KV cache in arrival order) with one full forward over the same sequence, positions and mask."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from backends.streaming_masks.decoder import GroupPositionDecoder
from backends.streaming_masks.hf_inputs import (
    IGNORE_INDEX,
    additive_mask,
    collate_streaming,
    group_position_ids,
)
from backends.streaming_masks.loading import load_streaming_lm
from backends.streaming_masks.schedule import waitk_schedule, waitk_units_read
from backends.streaming_masks.segments import SegmentationError, StreamingTemplate, segment_example
from backends.streaming_masks.visibility import visibility_matrix


def test_waitk_schedule_counts_end_marker_as_last_unit():
    # n = 3 words -> N = 4 units; header and word 1 after k units, one more per word, capped at N
    assert waitk_schedule(2, 4, 4).tolist() == [2, 2, 3, 4, 4, 4]
    assert waitk_units_read(9, 1, 4) == 4
    with pytest.raises(ValueError, match="k must be >= 1"):
        waitk_units_read(0, 1, 4)


def brute_force_visibility(source_unit, target_word, units_read, alignment):
    """Row by row from the definition, with Python loops (independent of the vectorised version)."""
    length = len(source_unit)
    vis = np.zeros((length, length), dtype=bool)
    for i in range(length):
        for j in range(i + 1):
            if source_unit[i] >= 0:
                vis[i, j] = source_unit[j] >= 0
            elif source_unit[j] < 0:
                vis[i, j] = True
            else:
                word = target_word[i + 1] if alignment == "predicted" and i + 1 < length else target_word[i]
                vis[i, j] = source_unit[j] <= units_read[word]
    return vis


@pytest.mark.parametrize("alignment", ["predicted", "query"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_visibility_matches_its_definition(alignment, k):
    rng = np.random.default_rng(k)
    source_unit = np.repeat(np.arange(6), rng.integers(1, 4, size=6))  # prompt, 4 words, end marker
    target_word = np.repeat(np.arange(7), rng.integers(1, 4, size=7))  # header, 5 words, end
    su = np.concatenate([source_unit, -np.ones(len(target_word), dtype=int)])
    tw = np.concatenate([-np.ones(len(source_unit), dtype=int), target_word])
    schedule = waitk_schedule(k, 5, 5)
    got = visibility_matrix(su, tw, schedule, alignment)
    assert np.array_equal(got, brute_force_visibility(su, tw, schedule, alignment))
    # source rows never see a target token; every row sees itself
    assert not got[: len(source_unit), len(source_unit):].any()
    assert got.diagonal().all()


def test_visibility_rejects_interleaved_layout():
    with pytest.raises(ValueError, match="all source tokens followed by all target tokens"):
        visibility_matrix(np.array([0, -1, 1]), np.array([-1, 0, -1]), np.array([1, 1]))


def test_group_positions_and_phi():
    su = np.array([0, 0, 1, 2, -1, -1, -1])
    assert group_position_ids(su, 0).tolist() == [0, 1, 2, 3, 0, 1, 2]
    assert group_position_ids(su, 5).tolist() == [0, 1, 2, 3, 5, 6, 7]
    with pytest.raises(ValueError, match="integer"):
        group_position_ids(su, 2.5)


@pytest.mark.parametrize("arch", ["qwen2", "gemma2", "llama"])
def test_segmentation_from_offsets(tiny_checkpoint, arch):
    lm = load_streaming_lm(str(tiny_checkpoint(arch)), "en", "de")
    source, target = "The cat sat on the mat.", "Die Katze saß auf der Matte."
    example = segment_example(lm.tokenizer, lm.template, source, target)
    tokens = lm.tokenizer.convert_ids_to_tokens(example.token_ids.tolist())
    # each word's tokens decode back to exactly that word (the leading space belongs to the word)
    for unit, word in enumerate(source.split(), start=1):
        ids = example.token_ids[example.source_unit == unit].tolist()
        assert lm.tokenizer.decode(ids).strip() == word
    for index, word in enumerate(target.split(), start=1):
        ids = example.token_ids[example.target_word == index].tolist()
        assert lm.tokenizer.decode(ids).strip() == word
        if index > 1:  # a new target word starts with a word-start token: the decoder's word rule
            assert lm.word_start[ids[0]], tokens
    # the streaming reads tokenize the source block the same way
    decoder = GroupPositionDecoder(lm)
    for word in source.split():
        decoder.read_word(word)
    decoder.read_end()
    assert decoder.source_ids == example.token_ids[: example.source_length].tolist()
    assert decoder.source_unit == example.source_unit[: example.source_length].tolist()


def test_template_puts_everything_after_the_source_into_the_end_marker(tiny_checkpoint):
    lm = load_streaming_lm(str(tiny_checkpoint("qwen2")), "en", "de")
    assert lm.template.source_prefix.endswith("<|im_start|>user\n")
    assert lm.template.source_suffix == "<|im_end|>\n"
    assert lm.template.target_prefix == "<|im_start|>assistant\n"
    assert lm.template.target_suffix == "<|im_end|>"


def test_template_needs_a_chat_template():
    class NoTemplate:
        chat_template = None

    with pytest.raises(SegmentationError, match="no chat template"):
        StreamingTemplate.from_chat_template(NoTemplate(), "system")


def test_template_without_system_turns_puts_the_instruction_before_the_source(tiny_checkpoint):
    """Gemma-2's template raises on a system turn: the instruction then opens the user turn."""
    lm = load_streaming_lm(str(tiny_checkpoint("gemma2")), "en", "de")
    tokenizer = lm.tokenizer
    tokenizer.chat_template = (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}"
        "{{ raise_exception('System role not supported') }}{% endif %}"
        "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\\n' + m['content'] "
        "+ '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}")
    template = StreamingTemplate.from_chat_template(tokenizer, "Translate English into German.")
    assert template.source_prefix == "<bos><start_of_turn>user\nTranslate English into German.\n\n"
    assert template.source_suffix == "<end_of_turn>\n"
    assert template.target_prefix == "<start_of_turn>model\n"


def test_collate_labels_target_only_and_pads(tiny_checkpoint):
    lm = load_streaming_lm(str(tiny_checkpoint("qwen2")), "en", "de")
    short = segment_example(lm.tokenizer, lm.template, "The cat.", "Die Katze.")
    long = segment_example(lm.tokenizer, lm.template, "The cat sat on the mat.", "Die Katze saß auf der Matte.")
    batch = collate_streaming([short, long], k=2, phi=0, pad_token_id=0)
    size = len(short.token_ids)
    labelled = batch.labels[0] != IGNORE_INDEX
    assert labelled.tolist()[:size] == (short.target_word >= 1).tolist()
    assert not labelled[size:].any()
    pad_rows = batch.attention_mask[0, 0, size:]
    assert (pad_rows == 0).sum(dim=1).tolist() == [1] * (len(long.token_ids) - size)  # only themselves


def run_waitk(decoder: GroupPositionDecoder, words: list[str], k: int, max_words: int) -> None:
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


def end_of_sequence_stop_only(lm):
    """The same weights with only end-of-sequence as a stop: a random model writes the chat template's control
    tokens (which end a real draft) early and often, and this parity run needs words written until the end is read."""
    stops = frozenset(lm.stop_token_ids) & {lm.tokenizer.eos_token_id}
    word_or_stop = lm.word_start.clone()
    word_or_stop[list(stops)] = True
    return dataclasses.replace(lm, stop_token_ids=stops, word_or_stop=word_or_stop.to(lm.word_or_stop.device))


def full_forward_logits(lm, decoder: GroupPositionDecoder, k: int, phi: int) -> torch.Tensor:
    """One forward over [source ‖ target] with group positions and the wait-k visibility of the schedule."""
    source_unit = np.array(decoder.source_unit + [-1] * len(decoder.target_ids))
    target_word = np.array([-1] * len(decoder.source_ids) + decoder.target_word)
    schedule = waitk_schedule(k, len(decoder.source_words) + 1, max(decoder.target_word))
    visible = visibility_matrix(source_unit, target_word, schedule)
    with torch.no_grad():
        output = lm.model(
            input_ids=torch.tensor([decoder.source_ids + decoder.target_ids]),
            position_ids=torch.from_numpy(group_position_ids(source_unit, phi))[None],
            attention_mask=additive_mask(visible[None, None], lm.dtype),
        )
    return output.logits[0].float()


@pytest.mark.parametrize("arch,phi,k", [("llama", 0, 2), ("qwen2", 0, 3), ("qwen2", 7, 1), ("gemma2", 0, 2),
                                        ("gemma3", 3, 2), ("phi3", 0, 2)])
def test_streaming_decoder_equals_one_full_forward(tiny_checkpoint, arch, phi, k):
    lm = end_of_sequence_stop_only(load_streaming_lm(str(tiny_checkpoint(arch)), "en", "de"))
    # a random model rarely ends words: with at most 3 tokens per word there are many word ends, crops and re-feeds
    decoder = GroupPositionDecoder(lm, phi=phi, max_word_tokens=3, record_logits=True)
    words = "I would like a cup of coffee .".split()
    run_waitk(decoder, words, k, max_words=12)
    assert decoder.words_written >= 3 and decoder.end_read
    reference = full_forward_logits(lm, decoder, k, phi)
    source_length = len(decoder.source_ids)
    assert len(decoder.row_logits) == source_length + len(decoder.target_ids)
    for (kind, index), logits in decoder.row_logits.items():
        row = index if kind == "s" else source_length + index
        torch.testing.assert_close(logits, reference[row], atol=1e-4, rtol=1e-4, msg=f"{arch} {kind}{index}")
    # the check can fail: a different visibility for the target rows changes the logits
    shifted = full_forward_logits(lm, decoder, k + 1, phi)
    assert not torch.allclose(shifted[source_length:], reference[source_length:], atol=1e-4)
