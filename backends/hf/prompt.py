"""The translation prompt of paper Eq. (1) and the map from source words to prompt token positions.

[system ‖ source span ‖ instruction ‖ accepted target prefix ‖ draft], rendered with the model's chat template
(or, with `instruction_position="before_source"`, the instruction ahead of the source); the map is computed from
the offsets of the exact token ids that are fed to the model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from common import languages

SYSTEM_TEMPLATE = (
    "You are a professional simultaneous interpreter. You translate {source} into fluent {target}. "
    "The {source} text may be an incomplete sentence that is still being spoken."
)
# Where the instruction stands in the user turn, and its wording there. "after_source" is the paper's Eq. (1).
# "before_source" leaves the tokens after the source to the chat template's closing and the target prefix: a step
# whose source grew re-computes the instruction's ~15 tokens no more (35% of a live step's prefill on the embedded
# model, docs/cpu_low_latency.md).
INSTRUCTION_TEMPLATES = {
    "after_source": "Translate the {source} text above into {target}. Output only the {target} translation.",
    "before_source": "Translate the following {source} text into {target}. Output only the {target} translation.",
}
INSTRUCTION_POSITIONS = tuple(INSTRUCTION_TEMPLATES)
USER_SEPARATOR = "\n\n"  # between the source and the instruction in the user turn


class PromptError(ValueError):
    """The prompt cannot be built or its source span cannot be mapped to tokens."""


def instruction_position_error(position: str) -> str | None:
    """Why `position` is not an instruction position (the message all its checks give), or None if it is one."""
    if position in INSTRUCTION_TEMPLATES:
        return None
    return f"instruction_position must be one of {', '.join(INSTRUCTION_POSITIONS)}, got {position!r}"


def language_name(language: str) -> str:
    """The English name the prompt uses for `language` (an ISO code or a name, any case); PromptError if unknown."""
    try:
        return languages.language_name(language)
    except languages.LanguageError as error:
        raise PromptError(str(error)) from None


@dataclass(frozen=True)
class TranslationPrompt:
    """Token ids fed to the model and where the source words sit among them."""

    token_ids: list[int]
    source_positions: np.ndarray  # [S] prompt positions of the source-span tokens, increasing
    source_token_word: np.ndarray  # [S] index of the source word each of those tokens belongs to
    word_count: int
    text: str


class PromptBuilder:
    """Renders Eq. (1) with a chat template and maps source words to token positions."""

    def __init__(self, tokenizer, source_lang: str, target_lang: str, instruction_position: str = "after_source",
                 system_template: str = SYSTEM_TEMPLATE):
        if getattr(tokenizer, "chat_template", None) is None:
            raise PromptError("the tokenizer has no chat template; AlignAtt prompts need one (Eq. 1)")
        if not getattr(tokenizer, "is_fast", False):
            raise PromptError(
                f"{type(tokenizer).__name__} is not a fast tokenizer: it gives no character offsets, so source words "
                f"cannot be mapped to prompt tokens; load the tokenizer with use_fast=True"
            )
        if error := instruction_position_error(instruction_position):
            raise PromptError(error)
        names = {"source": language_name(source_lang), "target": language_name(target_lang)}
        self.tokenizer = tokenizer
        self.system = system_template.format(**names)
        self.instruction_position = instruction_position
        self.instruction = INSTRUCTION_TEMPLATES[instruction_position].format(**names)

    def user_content(self, source: str) -> str:
        """The user turn: the source and the instruction, in the order `instruction_position` says."""
        if self.instruction_position == "before_source":
            return f"{self.instruction}{USER_SEPARATOR}{source}"
        return f"{source}{USER_SEPARATOR}{self.instruction}"

    def source_offset(self) -> int:
        """Where the source starts inside `user_content`."""
        return len(self.instruction) + len(USER_SEPARATOR) if self.instruction_position == "before_source" else 0

    def messages(self, source: str) -> list[dict]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user_content(source)},
        ]

    def render(self, source: str, target_prefix: str) -> str:
        """The generation prompt followed by the committed `target_prefix`: the text the model would have seen had
        it written the prefix itself. (An unfinished assistant message rendered by the template is not that text:
        Gemma-4's template puts its empty thought block only in the generation prompt, so a continued turn would
        lose it after the first step.)"""
        # enable_thinking=False: reasoning chat templates (Qwen3, Gemma-4) close the thought block before the answer
        # begins; others ignore the flag.
        generation_prompt = self.tokenizer.apply_chat_template(
            self.messages(source), tokenize=False, add_generation_prompt=True, enable_thinking=False)
        return generation_prompt + target_prefix

    def build(self, source_words: Sequence[str], target_prefix: str = "", map_source: bool = True
              ) -> TranslationPrompt:
        """The prompt for `source_words` and the committed `target_prefix`; without `map_source` the source map is
        left empty (a final draft needs no attention), so no PromptError can come from mapping."""
        words = [word.strip() for word in source_words]
        if not words or any(not w or any(c.isspace() for c in w) for w in words):
            raise PromptError(f"source words must be non-empty and contain no whitespace, got {list(source_words)!r}")
        source = " ".join(words)
        text = self.render(source, target_prefix)
        user_start = text.rfind(self.user_content(source))
        if user_start < 0:
            raise PromptError("the chat template altered the user message, so the source span cannot be located")
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if map_source:
            positions, token_word = map_source_tokens(encoding["offset_mapping"], words,
                                                      user_start + self.source_offset())
        else:
            positions, token_word = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return TranslationPrompt(
            token_ids=list(encoding["input_ids"]),
            source_positions=positions,
            source_token_word=token_word,
            word_count=len(words),
            text=text,
        )


def word_spans(words: Sequence[str], start: int) -> list[tuple[int, int]]:
    """Character spans of `words` joined by single spaces, starting at `start`."""
    spans, cursor = [], start
    for word in words:
        spans.append((cursor, cursor + len(word)))
        cursor += len(word) + 1
    return spans


def map_source_tokens(offsets, words: Sequence[str], source_start: int) -> tuple[np.ndarray, np.ndarray]:
    """Source tokens are those whose character span overlaps the source; each belongs to the LAST word it
    overlaps (it is complete only once that word is), a whitespace-only token to the word that follows it.
    Raises PromptError when the offsets cannot cover every word."""
    spans = word_spans(words, source_start)
    source_end = spans[-1][1]
    positions, token_word = [], []
    for position, (start, end) in enumerate(offsets):
        if end <= source_start or start >= source_end or end <= start:
            continue
        overlapping = [i for i, (ws, we) in enumerate(spans) if start < we and end > ws]
        if overlapping:
            word = overlapping[-1]
        else:  # only the space between two words
            word = next(i for i, (ws, _) in enumerate(spans) if ws >= end)
        positions.append(position)
        token_word.append(word)
    token_word_array = np.asarray(token_word, dtype=np.int64)
    covered = set(token_word)
    if len(covered) != len(words) or np.any(np.diff(token_word_array) < 0):
        missing = [words[i] for i in range(len(words)) if i not in covered]
        raise PromptError(
            f"the tokenizer's offsets cannot map the source span (words without tokens: {missing}); "
            f"use a fast tokenizer whose offsets refer to the prompt text"
        )
    return np.asarray(positions, dtype=np.int64), token_word_array
