"""Source/target word segmentation of a streaming translation example, from the tokenizer's character offsets.

The example is rendered once as [prompt ‖ source words ‖ source end ‖ header ‖ target words ‖ target end] and
tokenized once; each token gets the segment of the LAST character region it overlaps (it is complete only then).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

SENTINEL = "\u2063SOURCE\u2063"  # an invisible separator pair no chat template produces on its own


class SegmentationError(ValueError):
    """The tokenizer's tokens cannot be assigned to source units and target words."""


@dataclass(frozen=True)
class StreamingTemplate:
    """The four fixed strings around the source and target text, as the chat template renders them."""

    source_prefix: str  # system turn and user-turn header: source unit 0, always visible
    source_suffix: str  # end of the user turn: the end-of-source marker, unit n + 1
    target_prefix: str  # assistant header: target word 0
    target_suffix: str  # end of the assistant turn: the end-of-target token(s), word m + 1

    @classmethod
    def from_chat_template(cls, tokenizer, instruction: str) -> "StreamingTemplate":
        """Render the tokenizer's chat template around a sentinel source. The instruction is the system turn, or
        opens the user turn where the template rejects or drops system turns (Gemma-2); it always comes BEFORE the
        source, since everything after the source is only visible once the source has ended."""
        if not getattr(tokenizer, "chat_template", None):
            raise SegmentationError("the tokenizer has no chat template; GPE prompts need an instruction-tuned model "
                                    "(or a chat_template.jinja in the model directory)")
        try:
            return cls._render(tokenizer, [{"role": "system", "content": instruction},
                                           {"role": "user", "content": SENTINEL}], instruction)
        except Exception as system_error:  # noqa: BLE001 - a template's raise_exception() raises jinja's TemplateError
            last_error = system_error
        try:
            return cls._render(tokenizer, [{"role": "user", "content": f"{instruction}\n\n{SENTINEL}"}], instruction)
        except SegmentationError:
            raise
        except Exception as error:  # noqa: BLE001
            raise SegmentationError(f"the chat template cannot render a [system?, user, assistant] conversation: "
                                    f"{error} (with a system turn: {last_error})") from None

    @classmethod
    def _render(cls, tokenizer, messages: list[dict], instruction: str) -> "StreamingTemplate":
        with_header = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        without_header = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=False)
        answered = tokenizer.apply_chat_template(
            [*messages, {"role": "assistant", "content": SENTINEL}], tokenize=False)
        if with_header.count(SENTINEL) != 1 or not with_header.startswith(without_header):
            raise SegmentationError("the chat template does not render the user message verbatim followed by a "
                                    "generation prompt; GPE needs a plain [system, user, assistant] template")
        prefix, after = with_header.split(SENTINEL)
        if instruction not in prefix:
            raise SegmentationError("the chat template drops the system turn")
        header = with_header[len(without_header):]
        suffix = after[: len(after) - len(header)]
        target_suffix = answered.split(SENTINEL)[-1].rstrip()
        if not answered.startswith(prefix) or not target_suffix:
            raise SegmentationError("the chat template renders an assistant answer unlike its generation prompt")
        return cls(prefix, suffix, header, target_suffix)


@dataclass(frozen=True)
class SegmentedExample:
    """One tokenized example. Per token: `source_unit` (0 prompt, 1..n words, n + 1 end; -1 on target tokens) and
    `target_word` (0 header, 1..m words, m + 1 end; -1 on source tokens)."""

    token_ids: np.ndarray
    source_unit: np.ndarray
    target_word: np.ndarray
    source_words: int
    target_words: int

    @property
    def source_length(self) -> int:
        return int((self.source_unit >= 0).sum())


def split_words(text: str) -> list[str]:
    words = text.split()
    if not words:
        raise SegmentationError(f"empty text {text!r}: a streaming example needs at least one word on each side")
    return words


def region_bounds(pieces: Sequence[str]) -> np.ndarray:
    """End offsets of consecutive text pieces: region r covers [bounds[r-1], bounds[r])."""
    return np.cumsum([len(piece) for piece in pieces])


def assign_regions(offsets: Sequence[tuple[int, int]], pieces: Sequence[str]) -> np.ndarray:
    """Region index of every token: the last region its [start, end) span overlaps; a zero-width token (special
    tokens of some tokenizers) takes the region its start falls in. Raises if a region gets no token."""
    ends = region_bounds(pieces)
    starts = np.concatenate([[0], ends[:-1]])
    regions = []
    for start, end in offsets:
        probe = max(end - 1, start)
        region = int(np.searchsorted(ends, probe, side="right"))
        regions.append(min(region, len(pieces) - 1))
    regions = np.asarray(regions, dtype=np.int64)
    empty = [i for i in range(len(pieces)) if len(pieces[i]) and not np.any(regions == i)]
    if empty or np.any(np.diff(regions) < 0):
        raise SegmentationError(f"the tokenizer's offsets do not cover the text pieces {[pieces[i] for i in empty]!r} "
                                f"(starts {starts.tolist()}); use a fast tokenizer whose merges stop at spaces")
    return regions


def segment_example(tokenizer, template: StreamingTemplate, source: str | Sequence[str],
                    target: str | Sequence[str] | None = None, *,
                    space_before_first_word: bool = False) -> SegmentedExample:
    """Tokenize [prompt ‖ source ‖ end ‖ header ‖ target ‖ end] once, with offsets, and segment every token.

    Without `target` only the source block (up to and including its end marker) is segmented. Words are
    whitespace words; the space before a word belongs to that word (so a leading-space token starts its word).
    `space_before_first_word`: the first source and target words get a space too (plain prompts such as
    "...French:{ source}\nAssistant:{ target}" whose prefixes end without one, so each word is one " word" piece).
    """
    first = " " if space_before_first_word else ""
    source_words = split_words(source) if isinstance(source, str) else list(source)
    pieces = [template.source_prefix]
    for index, word in enumerate(source_words):
        pieces.append((first if index == 0 else " ") + word)
    pieces.append(template.source_suffix)
    source_regions = len(pieces)
    target_words: list[str] = []
    if target is not None:
        target_words = split_words(target) if isinstance(target, str) else list(target)
        pieces.append(template.target_prefix)
        for index, word in enumerate(target_words):
            pieces.append((first if index == 0 else " ") + word)
        pieces.append(template.target_suffix)
    encoding = tokenizer("".join(pieces), add_special_tokens=False, return_offsets_mapping=True)
    regions = assign_regions(encoding["offset_mapping"], pieces)
    is_source = regions < source_regions
    return SegmentedExample(
        token_ids=np.asarray(encoding["input_ids"], dtype=np.int64),
        source_unit=np.where(is_source, regions, -1),
        target_word=np.where(is_source, -1, regions - source_regions),
        source_words=len(source_words),
        target_words=len(target_words),
    )
