"""Evaluation and calibration data: the MCIF dev lines, its talk-level calibration/evaluation split, and the
word-aligned pairs used to score attention heads; read from the shared data directory, never copied."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Sequence

import yaml

DATA_DIR_VARIABLE = "SIMULAGENTS_DATA"
REPO_ROOT = Path(__file__).resolve().parents[1]

# The talk-level split of the 14 MCIF dev talks (606 lines). These 4 talks (174 lines) are used ONLY to calibrate
# alignment heads; the other 10 talks (432 lines) are the evaluation split. Whole talks are held out so that no
# evaluated sentence, nor its talk's terminology, was seen during calibration. Fixed, not random: it never changes.
CALIBRATION_TALKS = ("ERmKpJPPDc", "EqmWoxNDIr", "myfXyntFYL", "krJSAnVcGR")

Split = Literal["calibration", "evaluation", "all"]
SPLITS: tuple[str, ...] = ("calibration", "evaluation", "all")


def shared_data_dir() -> Path:
    """`$SIMULAGENTS_DATA`, else `<repo root>/../shared/data`; FileNotFoundError when it is not a directory."""
    configured = os.environ.get(DATA_DIR_VARIABLE)
    path = Path(configured) if configured else REPO_ROOT.parent / "shared" / "data"
    if not path.is_dir():
        origin = f"${DATA_DIR_VARIABLE}={configured!r}" if configured else f"the default location {path}"
        raise FileNotFoundError(
            f"shared data directory not found ({origin}); it should hold mcif_dev/ and word_alignments/. "
            f"Set {DATA_DIR_VARIABLE} to its path, or pass the paths explicitly (e.g. --data-dir)"
        )
    return path


# -- MCIF dev ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MCIFLine:
    """One sentence-aligned line of MCIF dev; `full_index` is its index in the full 919-line set (= pair_id)."""

    index: int
    full_index: int
    talk: str
    offset: float
    duration: float
    source: str
    reference: str


def mcif_dir(data_dir: str | Path) -> Path:
    """`data_dir` itself when it holds the MCIF files, else `data_dir/mcif_dev`."""
    data_dir = Path(data_dir)
    path = data_dir if (data_dir / "line_ids.txt").is_file() else data_dir / "mcif_dev"
    if not (path / "line_ids.txt").is_file():
        raise FileNotFoundError(
            f"no MCIF dev data in {data_dir} (looked for line_ids.txt, audio-segments.yaml, en.txt there and in "
            f"mcif_dev/); point to the shared data directory with ${DATA_DIR_VARIABLE} or --data-dir"
        )
    return path


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"missing MCIF file {path}")
    return path.read_text(encoding="utf-8").splitlines()


def _talk_segments(directory: Path) -> list[dict]:
    segments = yaml.safe_load((directory / "audio-segments.yaml").read_text(encoding="utf-8"))
    if not isinstance(segments, list) or not all(isinstance(s, dict) and "wav" in s for s in segments):
        raise ValueError(f"{directory / 'audio-segments.yaml'} is not a list of {{wav, offset, duration}} entries")
    return segments


def load_mcif(data_dir: str | Path, target_lang: str) -> list[MCIFLine]:
    """All 606 MCIF dev lines with their talk, timing, English source and `target_lang` reference."""
    directory = mcif_dir(data_dir)
    full_indices = [int(x) for x in _read_lines(directory / "line_ids.txt")]
    segments = _talk_segments(directory)
    sources = _read_lines(directory / "en.txt")
    reference_file = directory / f"{target_lang}.txt"
    if not reference_file.is_file():
        targets = sorted(p.stem for p in directory.glob("*.txt") if p.stem not in ("en", "line_ids"))
        raise FileNotFoundError(f"MCIF dev has no {target_lang!r} references ({reference_file} is missing); its target "
                                f"languages are {', '.join(targets) or 'none'}")
    references = _read_lines(reference_file)
    counts = {len(full_indices), len(segments), len(sources), len(references)}
    if len(counts) != 1:
        raise ValueError(
            f"MCIF files in {directory} disagree on the line count: line_ids {len(full_indices)}, audio-segments "
            f"{len(segments)}, en {len(sources)}, {target_lang} {len(references)}"
        )
    return [
        MCIFLine(index=i, full_index=full, talk=Path(segment["wav"]).stem, offset=float(segment["offset"]),
                 duration=float(segment["duration"]), source=source, reference=reference)
        for i, (full, segment, source, reference) in enumerate(zip(full_indices, segments, sources, references))
    ]


def mcif_talks_by_full_index(data_dir: str | Path) -> dict[int, str]:
    """Talk (wav stem) of every MCIF dev line, keyed by its index in the full set (the alignments' pair_id)."""
    directory = mcif_dir(data_dir)
    full_indices = [int(x) for x in _read_lines(directory / "line_ids.txt")]
    segments = _talk_segments(directory)
    if len(full_indices) != len(segments):
        raise ValueError(f"{directory}: line_ids.txt has {len(full_indices)} lines, audio-segments {len(segments)}")
    return {full: Path(segment["wav"]).stem for full, segment in zip(full_indices, segments)}


def talk_split(talk: str) -> str:
    return "calibration" if talk in CALIBRATION_TALKS else "evaluation"


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose one of {', '.join(SPLITS)}")


def mcif_split(lines: Iterable[MCIFLine], split: Split) -> list[MCIFLine]:
    """The lines of `split`: "calibration" (CALIBRATION_TALKS), "evaluation" (the other talks) or "all"."""
    _check_split(split)
    return [line for line in lines if split == "all" or talk_split(line.talk) == split]


def describe_split(split: Split) -> str:
    """One line saying what `split` is, for head files and logs."""
    _check_split(split)
    if split == "all":
        return "all pairs (no held-out split)"
    talks = ", ".join(CALIBRATION_TALKS)
    if split == "calibration":
        return f"MCIF dev calibration split: lines of the talks {talks}"
    return f"MCIF dev evaluation split: lines of all talks except {talks}"


# -- word alignments -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WordAlignment:
    """Source words [start, end) aligned to target words [start, end), indices into the pair's word lists."""

    source_span: tuple[int, int]
    target_span: tuple[int, int]
    confidence: float


@dataclass(frozen=True)
class AlignedPair:
    """A sentence pair with word alignments. Its word lists split punctuation off (they are NOT whitespace words)."""

    pair_id: int
    source_text: str
    target_text: str
    source_words: tuple[str, ...]
    target_words: tuple[str, ...]
    alignments: tuple[WordAlignment, ...]
    direction: str = ""


def load_alignments(path: str | Path) -> list[AlignedPair]:
    """Pairs of a word-alignment JSON (a list of {pair_id, source_text, target_text, source_words, target_words,
    alignments: [{source_span, target_span, confidence}]})."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word-alignment file {path} does not exist")
    return aligned_pairs_from_records(json.loads(path.read_text(encoding="utf-8")), origin=str(path))


def aligned_pairs_from_records(records: object, origin: str = "alignment records") -> list[AlignedPair]:
    """AlignedPairs from already parsed JSON records (see `load_alignments`); ValueError naming a bad entry."""
    if not isinstance(records, list):
        raise ValueError(f"{origin}: expected a JSON list of aligned pairs, got {type(records).__name__}")
    pairs = []
    for number, item in enumerate(records):
        try:
            pairs.append(AlignedPair(
                pair_id=int(item["pair_id"]),
                source_text=str(item["source_text"]),
                target_text=str(item["target_text"]),
                source_words=tuple(str(w) for w in item["source_words"]),
                target_words=tuple(str(w) for w in item["target_words"]),
                alignments=tuple(
                    WordAlignment(
                        source_span=(int(a["source_span"][0]), int(a["source_span"][1])),
                        target_span=(int(a["target_span"][0]), int(a["target_span"][1])),
                        confidence=float(a.get("confidence", 1.0)),
                    )
                    for a in item["alignments"]
                ),
                direction=str(item.get("direction", "")),
            ))
        except (KeyError, TypeError, IndexError, ValueError) as error:
            raise ValueError(
                f"{origin}: entry {number} is not an aligned pair (needs pair_id, source_text, target_text, "
                f"source_words, target_words, alignments[{{source_span, target_span, confidence}}]): {error!r}"
            ) from None
    return pairs


def pairs_in_split(pairs: Sequence[AlignedPair], talks_by_full_index: dict[int, str], split: Split) -> list[AlignedPair]:
    """The pairs whose pair_id is an MCIF dev line of a talk in `split` ("all" keeps every pair, unchecked).

    Raises ValueError for a pair_id that is no MCIF dev line: the split is defined only for MCIF alignments."""
    _check_split(split)
    if split == "all":
        return list(pairs)
    unknown = [p.pair_id for p in pairs if p.pair_id not in talks_by_full_index]
    if unknown:
        raise ValueError(
            f"{len(unknown)} pair_ids are not MCIF dev lines (first: {unknown[:5]}); the {split} split applies only "
            f"to the MCIF en-X alignments; use split 'all' for other data"
        )
    return [p for p in pairs if talk_split(talks_by_full_index[p.pair_id]) == split]


def evenly_spaced(items: Sequence, count: int | None) -> list:
    """`count` items spread evenly over `items` in their order (all of them when count is None or >= len), so a
    capped calibration still samples every talk rather than only the first one."""
    if count is None or count >= len(items):
        return list(items)
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    return [items[i * len(items) // count] for i in range(count)]


# -- SimulEval files -----------------------------------------------------------------------------------------------

def write_simuleval_files(lines: Sequence[MCIFLine], out_dir: str | Path) -> tuple[Path, Path]:
    """Write out_dir/source.txt (one whitespace-tokenised source sentence per line) and out_dir/target.txt (one
    reference per line), as SimulEval's --source and --target expect."""
    if not lines:
        raise ValueError("no lines to write")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source_path, target_path = out_dir / "source.txt", out_dir / "target.txt"
    sources = [" ".join(line.source.split()) for line in lines]
    references = [" ".join(line.reference.split()) for line in lines]
    empty = [line.index for line, text in zip(lines, sources) if not text]
    if empty:
        raise ValueError(f"MCIF lines {empty[:5]} have an empty source; SimulEval cannot stream them")
    source_path.write_text("\n".join(sources) + "\n", encoding="utf-8")
    target_path.write_text("\n".join(references) + "\n", encoding="utf-8")
    return source_path, target_path
