"""The translation prompt every runtime drafts from (paper Eq. 1, or the AlignAtt4LLM reference code's) and the map
from source words to prompt token positions, computed from the offsets of the exact token ids fed to the model.

Eq. 1: [system ‖ source span ‖ instruction ‖ accepted target prefix ‖ draft], rendered with the model's chat template
(or, with `instruction_position="before_source"`, the instruction ahead of the source).
"""
from __future__ import annotations

import string
from dataclasses import dataclass, field
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

# The AlignAtt4LLM reference code's prompt (QuentinFuxa/Alignatt4LLM 81f971a, translation_variants.py: the
# `alignatt_prefix` variant): its system prompt, the source after a header and no instruction after it, the committed
# target as the assistant's unfinished message; a live source's trailing .!? dropped (runtime.py).
REFERENCE_SYSTEM_TEMPLATE = """
Translate live incremental {source} ASR into fluent, idiomatic {target} suitable for speech translation.
Return only {target} text.
If the assistant message already contains an accepted {target} prefix, continue directly after it and preserve its wording.
Prefer natural {target} syntax over word-for-word calques.
If the ASR prefix contains minor punctuation noise or local disfluencies, translate the most plausible intended meaning without adding new facts.
Translate from the beginning of the current sentence.
Keep {source} personal names and technical acronyms verbatim in the output; render other proper nouns in their established {target} form.
Use established {target} terminology for domain concepts.
Let the runtime decide which drafted tokens are committed.
""".strip()
REFERENCE_SOURCE_HEADER = "[Current {source} ASR prefix]\n"
PROMPT_STYLES = ("simulagents", "alignatt4llm")


class PromptError(ValueError):
    """The prompt cannot be built or its source span cannot be mapped to tokens."""


def instruction_position_error(position: str) -> str | None:
    """Why `position` is not an instruction position (the message all its checks give), or None if it is one."""
    if position in INSTRUCTION_TEMPLATES:
        return None
    return f"instruction_position must be one of {', '.join(INSTRUCTION_POSITIONS)}, got {position!r}"


def prompt_style_error(style: str) -> str | None:
    """Why `style` is not a prompt style, or None if it is one."""
    return None if style in PROMPT_STYLES else f"prompt_style must be one of {', '.join(PROMPT_STYLES)}, got {style!r}"


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
    # [S] whether each source token is outside every word's letters (`punctuation_tokens`)
    source_token_punct: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))


class PromptBuilder:
    """Renders Eq. (1) with a chat template and maps source words to token positions."""

    def __init__(self, tokenizer, source_lang: str, target_lang: str, instruction_position: str = "after_source",
                 system_template: str | None = None, style: str = "simulagents"):
        if getattr(tokenizer, "chat_template", None) is None:
            raise PromptError("the tokenizer has no chat template; AlignAtt prompts need one (Eq. 1)")
        if not getattr(tokenizer, "is_fast", False):
            raise PromptError(
                f"{type(tokenizer).__name__} is not a fast tokenizer: it gives no character offsets, so source words "
                f"cannot be mapped to prompt tokens; load the tokenizer with use_fast=True"
            )
        if error := instruction_position_error(instruction_position) or prompt_style_error(style):
            raise PromptError(error)
        names = {"source": language_name(source_lang), "target": language_name(target_lang)}
        self.tokenizer = tokenizer
        self.style = style
        reference = style == "alignatt4llm"
        self.system = (system_template or (REFERENCE_SYSTEM_TEMPLATE if reference else SYSTEM_TEMPLATE)).format(**names)
        self.instruction_position = instruction_position
        self.instruction = "" if reference else INSTRUCTION_TEMPLATES[instruction_position].format(**names)
        self.source_header = REFERENCE_SOURCE_HEADER.format(**names) if reference else ""

    def user_content(self, source: str) -> str:
        """The user turn: the source and the instruction, in the order `instruction_position` says (the reference
        style: the header, then the source)."""
        if self.source_header:
            return f"{self.source_header}{source}"
        if self.instruction_position == "before_source":
            return f"{self.instruction}{USER_SEPARATOR}{source}"
        return f"{source}{USER_SEPARATOR}{self.instruction}"

    def source_offset(self) -> int:
        """Where the source starts inside `user_content`."""
        if self.source_header:
            return len(self.source_header)
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
        if self.source_header and target_prefix.strip():  # the reference code continues the assistant's message
            return self.tokenizer.apply_chat_template(
                [*self.messages(source), {"role": "assistant", "content": target_prefix}], tokenize=False,
                continue_final_message=True, enable_thinking=False)
        generation_prompt = self.tokenizer.apply_chat_template(
            self.messages(source), tokenize=False, add_generation_prompt=True, enable_thinking=False)
        return generation_prompt + target_prefix

    def build(self, source_words: Sequence[str], target_prefix: str = "", map_source: bool = True,
              live: bool = False) -> TranslationPrompt:
        """The prompt for `source_words` and the committed `target_prefix`; without `map_source` the source map is
        left empty (a final draft needs no attention), so no PromptError can come from mapping. The reference style
        drops a `live` source's trailing .!? (and a last word that is only that): `word_count` says what is left."""
        words = [word.strip() for word in source_words]
        if live and self.source_header:
            while words and words[-1].rstrip(".!?") != words[-1]:
                words[-1] = words[-1].rstrip(".!?").rstrip()
                words = words if words[-1] else words[:-1]
        if not words or any(not w or any(c.isspace() for c in w) for w in words):
            raise PromptError(f"source words must be non-empty and contain no whitespace, got {list(source_words)!r}")
        source = " ".join(words)
        text = self.render(source, target_prefix)
        user_start = text.rfind(self.user_content(source))
        if user_start < 0:
            raise PromptError("the chat template altered the user message, so the source span cannot be located")
        encoding = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if map_source:
            offsets, source_start = encoding["offset_mapping"], user_start + self.source_offset()
            positions, token_word = map_source_tokens(offsets, words, source_start)
            punct = punctuation_tokens([offsets[p] for p in positions], words, source_start)
        else:
            positions, token_word = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
            punct = np.zeros(0, dtype=bool)
        return TranslationPrompt(
            token_ids=list(encoding["input_ids"]),
            source_positions=positions,
            source_token_word=token_word,
            word_count=len(words),
            text=text,
            source_token_punct=punct,
        )


def word_spans(words: Sequence[str], start: int) -> list[tuple[int, int]]:
    """Character spans of `words` joined by single spaces, starting at `start`."""
    spans, cursor = [], start
    for word in words:
        spans.append((cursor, cursor + len(word)))
        cursor += len(word) + 1
    return spans


LEADING_PUNCTUATION = "\"'`“”‘’([{"  # what the reference code trims off a word's start
TRAILING_PUNCTUATION = string.punctuation + "”’)]}"  # and off its end


def punctuation_tokens(offsets, words: Sequence[str], source_start: int) -> np.ndarray:
    """For each source token (its character span in `offsets`), whether it overlaps no word once the word's leading
    and trailing punctuation is trimmed (the AlignAtt4LLM reference code's source units): "," of "Hello," is,
    "'" of "don't" is not. A word of punctuation alone ("-") keeps no span, so its tokens are punctuation."""
    trimmed = []
    for start, end in word_spans(words, source_start):
        word = words[len(trimmed)]
        head = len(word) - len(word.lstrip(LEADING_PUNCTUATION))
        tail = len(word) - len(word.rstrip(TRAILING_PUNCTUATION))
        trimmed.append((start + head, end - tail) if head + tail < len(word) else (start, start))
    return np.asarray([not any(s < we and e > ws for ws, we in trimmed if we > ws) for s, e in offsets], dtype=bool)


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
