"""Head sets: which (layer, query head) pairs carry the translation-alignment signal, ranked by translation score.

Read and written in the JSON format the AlignAtt4LLM authors publish (`token_alignment_heads: [{layer, head, ts}]`);
defaults per model and direction are resolved by `default_heads`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

DIRECTORY = Path(__file__).parent

# Top-8 heads published by the AlignAtt4LLM authors for google/gemma-4-E4B-it (their calibration on MCIF dev word
# alignments; the paper's official runs use these). Only the ranking is kept here; the full files with scores are
# `translation_heads_google_gemma-4-E4B-it_<direction>.json` in their repository.
PUBLISHED_HEADS: dict[tuple[str, str], tuple[tuple[int, int], ...]] = {
    ("google/gemma-4-E4B-it", "en-de"): ((11, 3), (6, 5), (17, 3), (20, 0), (5, 0), (11, 2), (10, 0), (10, 4)),
    ("google/gemma-4-E4B-it", "en-it"): ((11, 3), (6, 5), (17, 3), (20, 0), (5, 0), (11, 2), (10, 4), (10, 0)),
    ("google/gemma-4-E4B-it", "en-zh"): ((11, 3), (6, 5), (17, 3), (5, 0), (20, 0), (11, 2), (2, 2), (10, 0)),
    ("google/gemma-4-E4B-it", "en-cs"): ((11, 3), (17, 3), (6, 5), (29, 2), (7, 2), (17, 0), (17, 4), (22, 4)),
    ("google/gemma-4-E4B-it", "cs-en"): ((11, 3), (17, 3), (20, 0), (6, 5), (11, 2), (22, 4), (7, 2), (10, 0)),
    ("Qwen/Qwen3-1.7B", "en-de"): ((11, 13), (14, 15), (6, 12), (13, 6), (11, 10), (13, 7), (11, 11), (9, 12)),
}

# Head files this project calibrated and ships (backends/heads/*.json), by model name and direction.
SHIPPED_HEAD_FILES: dict[tuple[str, str], str] = {
    ("embedded:qwen2.5-coder-0.5b-instruct", "en-de"): "qwen2.5-coder-0.5b-instruct_en-de.json",
    ("embedded:qwen2.5-coder-0.5b-instruct", "en-it"): "qwen2.5-coder-0.5b-instruct_en-it.json",
    ("embedded:qwen2.5-coder-0.5b-instruct", "en-zh"): "qwen2.5-coder-0.5b-instruct_en-zh.json",
    ("embedded:qwen2.5-coder-0.5b-instruct", "cs-en"): "qwen2.5-coder-0.5b-instruct_cs-en.json",
    ("embedded:qwen2.5-coder-1.5b-instruct", "en-de"): "qwen2.5-coder-1.5b-instruct_en-de.json",
    ("embedded:qwen2.5-coder-1.5b-instruct", "en-it"): "qwen2.5-coder-1.5b-instruct_en-it.json",
    ("embedded:qwen2.5-coder-1.5b-instruct", "en-zh"): "qwen2.5-coder-1.5b-instruct_en-zh.json",
}


class HeadFileError(ValueError):
    """A head file is missing or malformed, or no default exists for a model and direction."""


@dataclass(frozen=True)
class HeadSet:
    """Ranked (layer, head) pairs, best first, with their translation scores when known."""

    heads: tuple[tuple[int, int], ...]
    scores: tuple[float, ...] = ()
    model: str = ""
    direction: str = ""
    metadata: dict = field(default_factory=dict, compare=False)

    def top(self, k: int) -> "HeadSet":
        if k < 1:
            raise HeadFileError(f"top_k must be >= 1, got {k}")
        return HeadSet(self.heads[:k], self.scores[:k], self.model, self.direction, self.metadata)


def load_heads(path: str | Path, top_k: int | None = None) -> HeadSet:
    path = Path(path)
    if not path.is_file():
        raise HeadFileError(
            f"head file {str(path)!r} does not exist; pass a heads JSON written by `simulagents calibrate-heads` "
            f"(or published by the AlignAtt4LLM authors), or leave `heads` unset to use the model's default"
        )
    try:
        data = json.loads(path.read_text())
        entries = data["token_alignment_heads"]
        heads = tuple((int(e["layer"]), int(e["head"])) for e in entries)
        scores = tuple(float(e.get("ts", float("nan"))) for e in entries)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as error:
        raise HeadFileError(
            f"{path} is not a heads file: expected JSON with token_alignment_heads: [{{layer, head, ts}}] ({error})"
        ) from None
    if not heads:
        raise HeadFileError(f"{path} lists no heads")
    head_set = HeadSet(heads, scores, str(data.get("model", "")), str(data.get("direction", "")),
                       {k: v for k, v in data.items() if k not in ("token_alignment_heads", "ts_matrix")})
    return head_set.top(top_k) if top_k else head_set


def save_heads(head_set: HeadSet, path: str | Path, **extra) -> None:
    """Write `head_set` (plus `extra` top-level fields such as ts_matrix) in the published format."""
    entries = [
        {"layer": layer, "head": head, "ts": round(score, 6)} if head_set.scores else {"layer": layer, "head": head}
        for (layer, head), score in zip(head_set.heads, head_set.scores or [0.0] * len(head_set.heads))
    ]
    data = {"model": head_set.model, "direction": head_set.direction, **head_set.metadata, **extra,
            "token_alignment_heads": entries}
    Path(path).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def default_heads(model: str, source_lang: str, target_lang: str, top_k: int | None = None) -> HeadSet:
    """The default head set for `model` and direction: shipped calibrations first, then the published rankings.

    `model` is matched as given, then by its last path component (a local copy of `google/gemma-4-E4B-it` in
    `/models/gemma-4-E4B-it` gets that model's heads).
    """
    direction = f"{source_lang}-{target_lang}"
    model = _known_model_name(model, direction)
    if (model, direction) in SHIPPED_HEAD_FILES:
        return load_heads(DIRECTORY / SHIPPED_HEAD_FILES[(model, direction)], top_k)
    if (model, direction) in PUBLISHED_HEADS:
        head_set = HeadSet(PUBLISHED_HEADS[(model, direction)], model=model, direction=direction)
        return head_set.top(top_k) if top_k else head_set
    known = sorted(f"{m} {d}" for m, d in (*SHIPPED_HEAD_FILES, *PUBLISHED_HEADS))
    raise HeadFileError(
        f"no default head set for model {model!r} and direction {direction}; calibrate one with "
        f"`simulagents calibrate-heads` and pass it as `heads:`. Defaults exist for: {'; '.join(known)}"
    )


def every_direction_heads(model: str, top_k: int | None = None) -> tuple[tuple[int, int], ...]:
    """The union of the default head sets of every direction `model` has one for (each cut to `top_k`), sorted:
    what one engine that captures at load time (vLLM) must capture to serve any of those directions."""
    heads: set[tuple[int, int]] = set()
    for known_model, direction in (*SHIPPED_HEAD_FILES, *PUBLISHED_HEADS):
        if _known_model_name(model, direction) == known_model:
            source, target = direction.split("-")
            heads.update(default_heads(model, source, target, top_k).heads)
    return tuple(sorted(heads))


def _known_model_name(model: str, direction: str) -> str:
    if model == "embedded":
        return "embedded:qwen2.5-coder-0.5b-instruct"
    known = {m for m, _ in (*SHIPPED_HEAD_FILES, *PUBLISHED_HEADS)}
    if model in known:
        return model
    basename = Path(model.rstrip("/")).name.lower()
    matches = [m for m in known if m.split("/")[-1].lower() == basename]
    return matches[0] if len(matches) == 1 else model
