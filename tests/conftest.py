"""Shared pytest fixtures: tiny random checkpoints built once per session, the embedded real model, and the
shared data folder; each skips cleanly when what it needs is not installed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tiny_checkpoints import TINY_ARCHITECTURES, build_tiny_checkpoint

from backends.models import EmbeddedModelUnavailableError, resolve_model


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Factory: tiny_checkpoint("gemma4") -> a saved HF directory, built on first request and reused all session."""
    built: dict[str, Path] = {}

    def checkpoint(arch: str) -> Path:
        if arch not in TINY_ARCHITECTURES:
            raise ValueError(f"unknown tiny architecture {arch!r}; choose one of {', '.join(TINY_ARCHITECTURES)}")
        if arch not in built:
            built[arch] = build_tiny_checkpoint(arch, tmp_path_factory.mktemp(f"tiny-{arch}"))
        return built[arch]

    return checkpoint


@pytest.fixture(scope="session")
def star_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random STAR checkpoint (tiny_checkpoints.build_tiny_star_checkpoint), built once per session."""
    from tiny_checkpoints import build_tiny_star_checkpoint

    return build_tiny_star_checkpoint(tmp_path_factory.mktemp("star") / "ckpt")


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The embedded Qwen2.5-Coder-0.5B-Instruct as an HF directory (dequantised into the cache on first use)."""
    try:
        return resolve_model("embedded")
    except EmbeddedModelUnavailableError as err:
        pytest.skip(f"embedded model unavailable: {err}")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The project's shared data folder (../shared/data next to the repository)."""
    path = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not path.is_dir():
        pytest.skip(f"shared data folder not found at {path}")
    return path


@pytest.fixture(scope="session")
def toy_alignment_records() -> list[dict]:
    """Five hand-made en-de pairs in the word-alignment JSON format (punctuation split off as its own word, spans
    [start, end) into the word lists), drawn from the tiny tokenizer's corpus."""

    def record(pair_id: int, source: list[str], target: list[str], links: list[tuple], joined: tuple[str, str]):
        return {
            "pair_id": pair_id, "direction": "en-de", "source_text": joined[0], "target_text": joined[1],
            "source_words": source, "target_words": target,
            "alignments": [{"source_span": list(s), "target_span": list(t), "confidence": c} for s, t, c in links],
        }

    return [
        record(0, ["The", "cat", "sat", "on", "the", "mat", "."], ["Die", "Katze", "saß", "auf", "der", "Matte", "."],
               [((0, 1), (0, 1), 0.9), ((1, 2), (1, 2), 1.0), ((2, 3), (2, 3), 0.95), ((3, 4), (3, 4), 0.9),
                ((4, 5), (4, 5), 0.8), ((5, 6), (5, 6), 1.0)],
               ("The cat sat on the mat.", "Die Katze saß auf der Matte.")),
        record(1, ["I", "would", "like", "a", "cup", "of", "coffee", "."],
               ["Ich", "hätte", "gern", "eine", "Tasse", "Kaffee", "."],
               [((0, 1), (0, 1), 1.0), ((1, 3), (1, 3), 0.9), ((3, 4), (3, 4), 0.9), ((4, 5), (4, 5), 1.0),
                ((6, 7), (5, 6), 1.0), ((7, 8), (6, 7), 0.6)],
               ("I would like a cup of coffee.", "Ich hätte gern eine Tasse Kaffee.")),
        record(2, ["Where", "is", "the", "train", "station", "?"], ["Wo", "ist", "der", "Bahnhof", "?"],
               [((0, 1), (0, 1), 1.0), ((1, 2), (1, 2), 1.0), ((3, 5), (3, 4), 0.95), ((5, 6), (4, 5), 0.7)],
               ("Where is the train station?", "Wo ist der Bahnhof?")),
        record(3, ["Thank", "you", "very", "much", "for", "your", "help", "."],
               ["Vielen", "Dank", "für", "Ihre", "Hilfe", "."],
               [((0, 1), (1, 2), 1.0), ((2, 4), (0, 1), 0.85), ((4, 5), (2, 3), 0.9), ((5, 6), (3, 4), 0.9),
                ((6, 7), (4, 5), 1.0)],
               ("Thank you very much for your help.", "Vielen Dank für Ihre Hilfe.")),
        record(4, ["The", "meeting", "starts", "at", "nine", "o'clock", "."],
               ["Die", "Sitzung", "beginnt", "um", "neun", "Uhr", "."],
               [((1, 2), (1, 2), 1.0), ((2, 3), (2, 3), 0.95), ((3, 4), (3, 4), 0.9), ((4, 5), (4, 5), 1.0),
                ((5, 6), (5, 6), 0.9)],
               ("The meeting starts at nine o'clock.", "Die Sitzung beginnt um neun Uhr.")),
    ]
