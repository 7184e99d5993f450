"""Head calibration by Translation Score (TS, paper §4.2): per aligned pair, the fraction of aligned target tokens
whose attention argmax over the source (query at the token's own position, exact Eq. 1 prompt) hits an aligned word.

The target text is teacher-forced as the assistant prefix, so target tokens sit exactly where draft tokens sit at
inference; one capturing forward records q/k of every head, and `replay_attention` gives the full-softmax rows.
TS(head) is the mean over pairs with at least one aligned target token. The scoring functions are pure (numpy).
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from backends.heads import HeadSet, save_heads
from backends.hf.capture import RECORDER_KWARG
from backends.prompt import PromptBuilder, PromptError, TranslationPrompt
from backends.recorder import QKRecorder
from backends.replay import replay_attention

if TYPE_CHECKING:  # only for annotations: calibration reads the pairs' fields, it does not load data
    from backends.hf.lm import CausalLM
    from common.datasets import AlignedPair

SCORE_NAME = "translation_score_argmax"
# Quote marks the aligner sometimes attaches to a word that the text renders differently (or CSV-doubles).
_STRIPPABLE = " \t\n\"'“”‘’„«»"


class PairSkipped(ValueError):
    """This aligned pair cannot be scored (spans out of range, target not locatable in the prompt, ...)."""


@dataclass(frozen=True)
class AlignedTokens:
    """The aligned target tokens of one prompt: their positions and, per token, the gold source words
    (indices of the prompt's whitespace source words)."""

    positions: np.ndarray  # [T] prompt positions, increasing
    gold_words: tuple[frozenset[int], ...]  # [T]


# -- pure: words -> characters -> whitespace words / tokens ------------------------------------------------------

def whitespace_word_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the whitespace-separated words of `text` (the prompt's source words)."""
    return [(match.start(), match.end()) for match in re.finditer(r"\S+", text)]


def locate_words(text: str, words: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character span of each word by sequential search in `text` (None for a word that cannot be found; the
    search then resumes where the previous word ended). A word is tried as given, then without quote marks."""
    spans: list[tuple[int, int] | None] = []
    cursor = 0
    for word in words:
        span = None
        for candidate in dict.fromkeys((word.strip(), word.strip(_STRIPPABLE))):
            if candidate and (start := text.find(candidate, cursor)) >= 0:
                span = (start, start + len(candidate))
                break
        spans.append(span)
        if span is not None:
            cursor = span[1]
    return spans


def overlapping(span: tuple[int, int], spans: Sequence[tuple[int, int] | None]) -> set[int]:
    """Indices of the spans that share at least one character with `span`."""
    start, end = span
    return {i for i, other in enumerate(spans) if other is not None and other[0] < end and other[1] > start}


def gold_source_words(pair: "AlignedPair", min_confidence: float) -> dict[int, set[int]]:
    """For each aligned target word (index into pair.target_words), the whitespace source words it is aligned to.

    Alignments below `min_confidence`, and words that cannot be located in the texts, are left out. Raises
    PairSkipped when an alignment span is out of range of the pair's word lists."""
    for alignment in pair.alignments:
        for (start, end), words, side in ((alignment.source_span, pair.source_words, "source"),
                                          (alignment.target_span, pair.target_words, "target")):
            if not 0 <= start < end <= len(words):
                raise PairSkipped(f"{side} span [{start}, {end}) out of range of its {len(words)} words")
    source_spans = locate_words(pair.source_text, pair.source_words)
    whitespace_spans = whitespace_word_spans(pair.source_text)
    gold: dict[int, set[int]] = {}
    for alignment in pair.alignments:
        if alignment.confidence < min_confidence:
            continue
        sources: set[int] = set()
        for index in range(*alignment.source_span):
            if source_spans[index] is not None:
                sources |= overlapping(source_spans[index], whitespace_spans)
        if sources:
            for target in range(*alignment.target_span):
                gold.setdefault(target, set()).update(sources)
    return gold


def aligned_target_tokens(
    pair: "AlignedPair", token_offsets: Sequence[tuple[int, int]], target_start: int, min_confidence: float = 0.0,
) -> AlignedTokens:
    """Map the alignment's target words onto prompt tokens.

    `token_offsets` are the character spans of the prompt tokens in the prompt text, in which the pair's target
    text (stripped) starts at `target_start`. A token belongs to every target word it overlaps; it is aligned when
    one of them is, and its gold words are the union of theirs."""
    target_text = pair.target_text.strip()
    gold = gold_source_words(pair, min_confidence)
    target_spans = locate_words(target_text, pair.target_words)
    aligned_spans: list[tuple[int, int] | None] = [None] * len(target_spans)
    for index, span in enumerate(target_spans):
        if span is not None and index in gold:
            aligned_spans[index] = (span[0] + target_start, span[1] + target_start)
    positions, gold_words = [], []
    for position, (start, end) in enumerate(token_offsets):
        if end <= start or end <= target_start:
            continue
        words = overlapping((start, end), aligned_spans)
        if words:
            positions.append(position)
            gold_words.append(frozenset().union(*(gold[w] for w in words)))
    return AlignedTokens(np.asarray(positions, dtype=np.int64), tuple(gold_words))


# -- pure: attention rows -> translation scores ------------------------------------------------------------------

def head_hits(rows: np.ndarray, source_token_word: np.ndarray, gold_words: Sequence[frozenset[int]]) -> np.ndarray:
    """[H] number of aligned target tokens whose argmax over the source tokens (rows: [T, H, S]) falls on a token
    of one of that target token's gold source words (first maximum on ties)."""
    rows = np.asarray(rows)
    if rows.ndim != 3 or rows.shape[0] != len(gold_words) or rows.shape[2] != len(source_token_word):
        raise ValueError(
            f"rows must be [T={len(gold_words)}, H, S={len(source_token_word)}] attention rows, got {rows.shape}"
        )
    word_count = int(np.max(source_token_word)) + 1
    gold = np.zeros((len(gold_words), word_count), dtype=bool)
    for token, words in enumerate(gold_words):
        gold[token, [w for w in words if w < word_count]] = True
    argmax_word = np.asarray(source_token_word)[rows.argmax(axis=2)]  # [T, H]
    return np.take_along_axis(gold, argmax_word, axis=1).sum(axis=0)


def translation_scores(
    rows_per_pair: Sequence[np.ndarray],
    source_token_word_per_pair: Sequence[np.ndarray],
    gold_words_per_pair: Sequence[Sequence[frozenset[int]]],
) -> np.ndarray:
    """[H] TS per head: mean over pairs (with >= 1 aligned target token) of hits / aligned target tokens."""
    per_pair = [
        head_hits(rows, token_word, gold) / len(gold)
        for rows, token_word, gold in zip(rows_per_pair, source_token_word_per_pair, gold_words_per_pair, strict=True)
        if len(gold)
    ]
    if not per_pair:
        raise ValueError("no pair has an aligned target token; translation scores are undefined")
    return np.mean(per_pair, axis=0)


def rank_heads(ts_matrix: np.ndarray) -> tuple[tuple[tuple[int, int], ...], tuple[float, ...]]:
    """All (layer, head) pairs by decreasing TS (ties: lower layer, then lower head first)."""
    order = sorted(np.ndindex(*ts_matrix.shape), key=lambda lh: (-ts_matrix[lh], lh))
    return tuple((int(l), int(h)) for l, h in order), tuple(float(ts_matrix[lh]) for lh in order)


# -- the model: one capturing forward per pair -------------------------------------------------------------------

@dataclass(frozen=True)
class SkippedPair:
    pair_id: int
    reason: str


@dataclass(frozen=True)
class CalibrationResult:
    """Ranked heads (all of them), the [layers, heads] TS matrix, per-pair aligned-token counts and skipped pairs."""

    head_set: HeadSet
    ts_matrix: np.ndarray  # [layers, heads]
    pair_tokens: tuple[tuple[int, int], ...]  # (pair_id, aligned target tokens) of every used pair
    skipped: tuple[SkippedPair, ...]

    def save(self, path, **extra) -> None:
        save_heads(self.head_set, path, ts_matrix=np.round(self.ts_matrix, 6).tolist(), **extra)


def model_geometry(model) -> tuple[int, int]:
    """(layers, query heads per layer) of a decoder-only model (the text config of a multimodal one)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    return int(config.num_hidden_layers), int(config.num_attention_heads)


def teacher_forced_prompt(builder: PromptBuilder, source_words: Sequence[str], target: str,
                          ) -> tuple[TranslationPrompt, list[tuple[int, int]], int]:
    """The prompt of `source_words` with `target` as the assistant's text, the character offsets of its tokens and
    where `target` starts in its text; PairSkipped when it cannot be built or the offsets do not fit its tokens."""
    try:
        prompt = builder.build(source_words, target)
    except PromptError as error:
        raise PairSkipped(f"prompt: {error}") from None
    target_start = prompt.text.rfind(target)
    if target_start < 0 or prompt.text[target_start + len(target):].strip():
        raise PairSkipped("the chat template does not render the target text at the end of the prompt")
    encoding = builder.tokenizer(prompt.text, add_special_tokens=False, return_offsets_mapping=True)
    if list(encoding["input_ids"]) != prompt.token_ids:
        raise PairSkipped("re-tokenising the prompt text does not give the prompt's token ids")
    return prompt, list(encoding["offset_mapping"]), target_start


def score_prompt_layout(builder: PromptBuilder, pair: "AlignedPair", min_confidence: float,
                        ) -> tuple[TranslationPrompt, AlignedTokens]:
    """The teacher-forced prompt of `pair` and its aligned target tokens; PairSkipped when it cannot be built."""
    target = pair.target_text.strip()
    if not target or not pair.source_text.split():
        raise PairSkipped("empty source or target text")
    prompt, token_offsets, target_start = teacher_forced_prompt(builder, pair.source_text.split(), target)
    tokens = aligned_target_tokens(pair, token_offsets, target_start, min_confidence)
    if len(tokens.positions) and tokens.positions[0] <= prompt.source_positions[-1]:
        raise PairSkipped("aligned target tokens overlap the source span")
    return prompt, tokens


@torch.inference_mode()
def source_attention_rows(lm: "CausalLM", prompt: TranslationPrompt, positions: np.ndarray,
                          heads: Sequence[tuple[int, int]]) -> np.ndarray:
    """[T, H, S] full-softmax attention of the rows at `positions` to the source tokens, from one capturing forward
    of the whole prompt (no cache) and the qk replay."""
    recorder = QKRecorder(heads)
    ids = prompt.token_ids
    recorder.begin(0, len(ids), record_queries=True)
    input_ids = torch.tensor([ids], dtype=torch.long, device=lm.device)
    # A tensor logits_to_keep projects only the last row onto the vocabulary, and (unlike an int) keeps Gemma-4
    # from slicing the query rows of its KV-shared layers to the kept logits: every query row is recorded.
    lm.model(input_ids=input_ids, use_cache=False, logits_to_keep=torch.tensor([len(ids) - 1], device=lm.device),
             **{RECORDER_KWARG: recorder})
    recorder.check_complete()
    first, last = int(positions[0]), int(positions[-1])
    rows = replay_attention(recorder, range(first, last + 1), prompt.source_positions, heads)
    return rows[torch.as_tensor(positions - first)].numpy()


def calibrate(
    lm: "CausalLM", pairs: Sequence["AlignedPair"], source_lang: str, target_lang: str, model_name: str, *,
    min_confidence: float = 0.0, calibration_split: str = "unspecified", instruction_position: str = "after_source",
    progress: Callable[[int, int], None] | None = None,
) -> CalibrationResult:
    """Score every head of `lm` by TS on `pairs` under the exact prompt layout (`instruction_position` as the
    translators' knob); `progress(done, total)` per pair."""
    if not pairs:
        raise ValueError("no aligned pairs to calibrate on")
    # raises PromptError without a chat template
    builder = PromptBuilder(lm.tokenizer, source_lang, target_lang, instruction_position)
    num_layers, num_heads = model_geometry(lm.model)
    heads = [(layer, head) for layer in range(num_layers) for head in range(num_heads)]
    scores, pair_tokens, skipped = [], [], []
    for done, pair in enumerate(pairs, start=1):
        try:
            prompt, tokens = score_prompt_layout(builder, pair, min_confidence)
            if not len(tokens.positions):
                raise PairSkipped(f"no aligned target tokens (min_confidence {min_confidence})")
        except PairSkipped as reason:
            skipped.append(SkippedPair(pair.pair_id, str(reason)))
        else:
            rows = source_attention_rows(lm, prompt, tokens.positions, heads)
            scores.append(head_hits(rows, prompt.source_token_word, tokens.gold_words) / len(tokens.positions))
            pair_tokens.append((pair.pair_id, len(tokens.positions)))
        if progress is not None:
            progress(done, len(pairs))
    if not scores:
        reasons = Counter(s.reason for s in skipped).most_common(3)
        raise ValueError(f"none of the {len(pairs)} pairs could be scored; most common reasons: {reasons}")
    ts_matrix = np.mean(scores, axis=0).reshape(num_layers, num_heads)
    ranked, ranked_scores = rank_heads(ts_matrix)
    metadata = {
        "source_lang": source_lang,
        "target_lang": target_lang,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "score_name": SCORE_NAME,
        "calibration_split": calibration_split,
        "min_confidence": min_confidence,
        "instruction_position": instruction_position,
        "used_pairs": len(pair_tokens),
        "used_target_tokens": int(sum(count for _, count in pair_tokens)),
        "skipped_pairs": len(skipped),
        "skipped_reasons": dict(Counter(s.reason for s in skipped)),
        "mean_ts_all_heads": round(float(ts_matrix.mean()), 6),
        "used_pair_ids": [pair_id for pair_id, _ in pair_tokens],
    }
    head_set = HeadSet(ranked, ranked_scores, model_name, f"{source_lang}-{target_lang}", metadata)
    return CalibrationResult(head_set, ts_matrix, tuple(pair_tokens), tuple(skipped))


def calibrate_heads(lm: "CausalLM", pairs: Sequence["AlignedPair"], source_lang: str, target_lang: str,
                    model_name: str, **options) -> HeadSet:
    """The ranked HeadSet of `calibrate` (all heads, best first, with TS and calibration metadata)."""
    return calibrate(lm, pairs, source_lang, target_lang, model_name, **options).head_set
