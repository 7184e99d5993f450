"""The one SimulMask prompt, used by fine-tuning and decoding alike (the reference code added a space before
"\nAssistant:" at inference only): "Translate the following sentence from English to French:{ w1 ... wn}
\nAssistant:{ t1 ... tm}<eos>" (paper §5.1: p1 ‖ source ‖ p2 ‖ target); every word carries its leading space."""
from __future__ import annotations

from typing import Sequence

from backends.streaming_masks.segments import SegmentedExample, StreamingTemplate, segment_example

INSTRUCTION = "Translate the following sentence from {source} to {target}:"
ASSISTANT = "\nAssistant:"


def simulmask_template(tokenizer, source_lang: str, target_lang: str) -> StreamingTemplate:
    """p1 = the instruction, no source end marker, p2 = "\\nAssistant:", the tokenizer's EOS ends the target."""
    from backends.prompt import language_name

    if not tokenizer.eos_token:
        raise ValueError("the tokenizer has no eos_token; SimulMask ends every training target with it")
    instruction = INSTRUCTION.format(source=language_name(source_lang), target=language_name(target_lang))
    return StreamingTemplate(source_prefix=instruction, source_suffix="", target_prefix=ASSISTANT,
                             target_suffix=tokenizer.eos_token)


def source_text(template: StreamingTemplate, words: Sequence[str]) -> str:
    """p1 and the source words read so far: the text of the prompt cache."""
    return template.source_prefix + "".join(" " + word for word in words) + template.source_suffix


def segment_pair(tokenizer, template: StreamingTemplate, source: str | Sequence[str],
                 target: str | Sequence[str] | None = None) -> SegmentedExample:
    """One training example (or, without `target`, the source block), tokenized once and segmented into prompt /
    source words / header / target words / end, exactly as `source_text` and the decoder spell it."""
    return segment_example(tokenizer, template, source, target, space_before_first_word=True)
