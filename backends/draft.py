"""A draft (a greedy continuation of a prompt, with the captured q/k its attention is replayed from) and what every
runtime's `draft` shares: the ids that end a draft, the argument checks. Needs no torch."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from numbers import Real
from typing import Any, Callable, Iterable, Sequence

from backends.recorder import QKRecorder
from backends.replay import replay_attention


@dataclass
class Draft:
    """A greedy continuation of a prompt. `finished` means it ended with a stop token (not included in `tokens`).

    Its captured q/k live in the session's recorder: `source_attention` is valid until the session drafts again.
    """

    prompt_length: int
    tokens: list[int] = field(default_factory=list)
    finished: bool = False
    recorder: QKRecorder | None = None
    generation: int = 0  # the recorder's draft count when this draft was made

    @property
    def positions(self) -> range:
        """Absolute positions of the draft tokens (and of their captured query rows)."""
        return range(self.prompt_length, self.prompt_length + len(self.tokens))

    def source_attention(self, source_positions, first: int = 0, stop: int | None = None) -> Any:
        """Replayed float32 [T, H, S] attention (on the CPU, the runtime's array type) of draft rows first..stop-1 (default all) to `source_positions`."""
        if self.recorder is None:
            raise RuntimeError("this draft was decoded without q/k capture")
        if self.recorder.generation != self.generation:
            raise RuntimeError("this draft's captured q/k were overwritten: the session has drafted again since")
        stop = len(self.tokens) if stop is None else stop
        return replay_attention(
            self.recorder, range(self.prompt_length + first, self.prompt_length + stop), source_positions
        )


# An added token shaped like markup ("<think>", "<|channel>", "<tool_call>", "[multimodal]") is control vocabulary:
# a one-line translation never contains one.
CONTROL_TOKEN = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")


def stop_token_ids(model, tokenizer) -> set[int]:
    """Ids that end a draft: end-of-sequence from the generation config, the model config and the chat template's
    end-of-turn, and every other special or control token (a thought marker such as Qwen3's `<think>` or Gemma-4's
    `<|channel>` must end the translation, not be dropped by decoding and followed by its thought prose)."""
    ids: set[int] = set()
    for source in (getattr(model, "generation_config", None), model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    for token in ("<|im_end|>", "<end_of_turn>", "<|eot_id|>", "<|endoftext|>", "<turn|>"):
        token_id = tokenizer.convert_tokens_to_ids(token)
        if isinstance(token_id, int) and token_id != tokenizer.unk_token_id and token_id >= 0:
            ids.add(token_id)
    ids.update(int(i) for i in getattr(tokenizer, "all_special_ids", ()) or ())
    for token_id, added in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
        if getattr(added, "special", False) or CONTROL_TOKEN.fullmatch(str(added)):
            ids.add(int(token_id))
    # The beginning of a sequence is never generated; a pad or unknown token that is, ends the draft too.
    return ids


def check_draft_request(prompt_ids: Sequence[int], max_new_tokens: int, capture: bool, has_heads: bool,
                        repetition_penalty: float = 1.0) -> None:
    """The argument checks of every backend's `draft`."""
    if not prompt_ids:
        raise ValueError("empty prompt")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if capture and not has_heads:
        raise ValueError("capture requested but the session was opened without heads")
    if (isinstance(repetition_penalty, bool) or not isinstance(repetition_penalty, Real)
            or not math.isfinite(repetition_penalty) or repetition_penalty < 1.0):
        raise ValueError(f"repetition_penalty must be a finite number >= 1.0, got {repetition_penalty!r}: pass 1.0 "
                         f"for no penalty, or a value above it (AlignAtt4LLM drafts with 1.05); a value below 1.0 "
                         f"would reward repetition and is not supported")


# The repetition penalty of HF transformers' `RepetitionPenaltyLogitsProcessor` (transformers 5.25,
# generation/logits_process.py: `torch.where(score < 0, score * penalty, score / penalty)` on the float32 row, for the
# ids gathered from every prompt and generated token) and of vLLM's sampler (vLLM 0.32,
# model_executor/layers/utils.py `apply_penalties` -> `_custom_ops.apply_repetition_penalties`: ids in the prompt's or
# the output's bin mask, logits > 0 scaled by 1/penalty, others by penalty, in float32, before greedy sampling).
# vLLM multiplies by the reciprocal where transformers divides (at most one rounding apart; PyTorch's CUDA division by a
# Python scalar is itself a multiplication by the reciprocal); this follows transformers, op for op.
def penalise_repetitions(logits, seen_ids: Iterable[int], penalty: float):
    """One row of float32 logits (a torch tensor or a numpy array, changed in place and returned) with the logit of
    every distinct id of `seen_ids` divided by `penalty` where it is > 0 and multiplied by it where it is < 0."""
    ids = sorted(set(seen_ids))
    picked = logits[ids]  # a copy
    negative = picked < 0
    picked[negative] *= penalty
    picked[~negative] /= penalty
    logits[ids] = picked
    return logits


def greedy_picker(draft: Draft, prompt_ids: Sequence[int], penalty: float,
                  as_float32: Callable[[Any], Any] = lambda row: row) -> Callable[[Any], int]:
    """`pick(logits) -> token id`: the greedy choice (argmax, ties to the lower id) of one row of logits (the caller's
    to change); with a `penalty` other than 1.0, of the row made float32 by `as_float32` and penalised
    (`penalise_repetitions`) for every id of the prompt and of `draft.tokens` at the time of the pick. A penalty of
    1.0 is a plain argmax: no other operation on the logits."""
    if penalty == 1.0:
        return lambda logits: int(logits.argmax())
    prompt = frozenset(prompt_ids)
    return lambda logits: int(penalise_repetitions(as_float32(logits), prompt.union(draft.tokens), penalty).argmax())
