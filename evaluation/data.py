"""Test sets for evaluation: text (source and reference lines) or long-form speech (a wav list, an audio-segments
YAML and one reference per segment), checked for the mistakes that would otherwise give silent garbage scores."""
from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from backends.sources import install_directory, staged_directory
from common import datasets
from common.audio import check_audio_file, wav_list_paths
from common.synthetic_speech import read_segments, synthesize_long_form


def latency_unit(target_lang: str) -> str:
    """Scoring unit of the target: characters for Chinese and Japanese, words otherwise."""
    return "char" if target_lang in ("zh", "ja") else "word"


@dataclass(frozen=True)
class EvalSet:
    """What runs and scorers need; `sources` may be empty for speech (then no offline row and no COMET)."""

    name: str
    source_lang: str
    target_lang: str
    references: tuple[str, ...]
    sources: tuple[str, ...] = ()
    wav_list: Path | None = None
    segments: Path | None = None
    segment_entries: tuple[dict, ...] = field(default=(), repr=False)

    @property
    def is_speech(self) -> bool:
        return self.wav_list is not None

    @property
    def latency_unit(self) -> str:
        return latency_unit(self.target_lang)

    @property
    def audio_seconds(self) -> float:
        """Total length of the talks as the segments describe them (end of each talk's last segment)."""
        ends: dict[str, float] = {}
        for segment in self.segment_entries:
            name = Path(str(segment["wav"])).stem
            ends[name] = max(ends.get(name, 0.0), float(segment["offset"]) + float(segment["duration"]))
        return sum(ends.values())

    @property
    def offline_references(self) -> tuple[str, ...]:
        """The references an offline row is scored against: as this set's streamed rows are. OmniSTEval's long-form
        scoring removes the spaces of character-level references ("Sara Papi" -> "SaraPapi"); SimulEval keeps them."""
        if self.is_speech and self.latency_unit == "char":
            return tuple(line.replace(" ", "") for line in self.references)
        return self.references

    def inputs_sha1(self) -> str:
        """A digest of what a run reads: the source lines and, for speech, every talk's audio in the wav list's
        order with the segment list. Two runs with the same digest heard and read the same input."""
        digest = hashlib.sha1(json.dumps(self.sources).encode())
        if self.is_speech:
            for path in [*wav_list_paths(self.wav_list), *([self.segments] if self.segments else [])]:
                digest.update(path.name.encode() + b"\0")
                with open(path, "rb") as stream:
                    for block in iter(lambda: stream.read(1 << 20), b""):
                        digest.update(block)
        return digest.hexdigest()

    def write_text_files(self, directory: Path, references: tuple[str, ...] | None = None) -> tuple[Path, Path | None]:
        """reference.txt (`references`, by default the set's) and source.txt when there are sources in `directory`,
        one line each, for the tools."""
        directory.mkdir(parents=True, exist_ok=True)
        reference = directory / "reference.txt"
        lines = self.references if references is None else references
        reference.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        if not self.sources:
            return reference, None
        source = directory / "source.txt"
        source.write_text("".join(line + "\n" for line in self.sources), encoding="utf-8")
        return reference, source


def read_lines(path: str | Path, what: str) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} file {path} does not exist")
    return [" ".join(line.split()) for line in path.read_text(encoding="utf-8").splitlines()]


def text_set(source: str | Path, reference: str | Path, source_lang: str, target_lang: str) -> EvalSet:
    """Source lines streamed word by word, one reference per line."""
    sources, references = read_lines(source, "source"), read_lines(reference, "reference")
    if len(sources) != len(references):
        raise ValueError(f"{source} has {len(sources)} lines but {reference} has {len(references)}: they must be "
                         "parallel, one reference per source line")
    if not sources:
        raise ValueError(f"{source} is empty")
    empty = [number for number, line in enumerate(sources, 1) if not line]
    if empty:
        raise ValueError(f"source lines {empty[:5]} of {source} are empty; SimulEval cannot stream an empty line")
    return EvalSet(Path(source).stem, source_lang, target_lang, tuple(references), tuple(sources))


def speech_set(wav_list: str | Path, segments: str | Path, reference: str | Path, source_lang: str,
               target_lang: str, source: str | Path | None = None) -> EvalSet:
    """Long-form talks: every talk in the wav list has segments, every segment's talk is in the list, and there is
    one reference (and source, if given) per segment, in the segments' order."""
    paths = wav_list_paths(wav_list)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"wav list {wav_list} names missing files: {', '.join(missing[:5])}")
    for path in paths:  # any container with an audio track (WAV, FLAC, MP3, MP4...); AudioError names the file
        check_audio_file(path)
    stems = [p.stem for p in paths]
    if len(set(stems)) != len(stems):
        raise ValueError(f"wav list {wav_list} has two files with one name; the scorers match talks by file name")
    entries = read_segments(segments)
    segment_stems = {Path(str(s["wav"])).stem for s in entries}
    unsegmented = [stem for stem in stems if stem not in segment_stems]
    if unsegmented:
        raise ValueError(f"{', '.join(unsegmented[:5])} in {wav_list} has no segment in {segments}: every talk "
                         "needs its {wav, offset, duration} lines there (its output could not be scored)")
    unknown = sorted(segment_stems - set(stems))
    if unknown:
        raise ValueError(f"{segments} has segments of {', '.join(unknown[:5])}, which {wav_list} does not list: "
                         "add the wav or drop its segments and their reference lines")
    references = read_lines(reference, "reference")
    if len(references) != len(entries):
        raise ValueError(f"{reference} has {len(references)} lines but {segments} has {len(entries)} segments: "
                         "one reference line per segment, in the same order")
    sources = read_lines(source, "source") if source is not None else []
    if source is not None and len(sources) != len(entries):
        raise ValueError(f"{source} has {len(sources)} lines but {segments} has {len(entries)} segments")
    return EvalSet(Path(segments).parent.name or "speech", source_lang, target_lang, tuple(references),
                   tuple(sources), Path(wav_list).resolve(), Path(segments).resolve(), tuple(entries))


def mcif_lines(target_lang: str, split: datasets.Split, max_talks: int | None, data_dir: Path | None = None,
               skip_talks: int = 0) -> list[datasets.MCIFLine]:
    """MCIF dev lines of `split`: its talks in file order, the first `skip_talks` left out, then at most `max_talks`
    (so `skip_talks=4, max_talks=4` is talks 5 to 8: the next talks after a `max_talks=4` run)."""
    lines = datasets.mcif_split(datasets.load_mcif(data_dir or datasets.shared_data_dir(), target_lang), split)
    talks = list(dict.fromkeys(line.talk for line in lines))
    if max_talks is not None and max_talks < 1:
        raise ValueError(f"--max-talks must be >= 1, got {max_talks}")
    if not 0 <= skip_talks < len(talks):
        raise ValueError(f"--skip-talks must be from 0 to {len(talks) - 1}: the {split} split has {len(talks)} talks, "
                         f"got {skip_talks}")
    talks = talks[skip_talks:]
    if max_talks is not None:
        talks = talks[:max_talks]
    return [line for line in lines if line.talk in talks]


def mcif_text_set(target_lang: str, split: datasets.Split, max_talks: int | None = None,
                  data_dir: Path | None = None, skip_talks: int = 0) -> EvalSet:
    lines = mcif_lines(target_lang, split, max_talks, data_dir, skip_talks)
    return EvalSet(f"mcif-{split}", "en", target_lang, tuple(" ".join(l.reference.split()) for l in lines),
                   tuple(" ".join(l.source.split()) for l in lines))


def mcif_speech_set(target_lang: str, split: datasets.Split, cache: Path, max_talks: int | None = None,
                    data_dir: Path | None = None, progress=None, skip_talks: int = 0,
                    announce: Callable[[str], None] | None = None) -> EvalSet:
    """MCIF dev as synthetic long-form speech: the talks rebuilt with espeak-ng on their original timeline (made
    once into `cache`, reused while the lines are the same). `announce` is told when the talks must be made, once
    the lines are known to exist (an unknown target language fails before it)."""
    lines = mcif_lines(target_lang, split, max_talks, data_dir, skip_talks)
    segments = [{"wav": f"{l.talk}.wav", "offset": l.offset, "duration": l.duration} for l in lines]
    sources = [" ".join(l.source.split()) for l in lines]
    stamp = hashlib.sha256(json.dumps([sources, segments]).encode()).hexdigest()[:16]
    directory = cache / f"mcif-{split}-{len({l.talk for l in lines})}talks-{stamp}"

    def is_built(built: Path) -> bool:  # the segment list is written last
        return (built / "audio-segments.yaml").is_file()

    if not is_built(directory):
        if announce is not None:
            announce(f"preparing the synthetic MCIF talks of {directory.name} (espeak-ng; made once, then reused) ...")
        # Built in a staging folder of its own: two evaluations started at once both build the set, the first to
        # finish moves it into place, the other's identical copy is dropped.
        with staged_directory(directory) as staging:
            synthesize_long_form(sources, segments, staging, progress=progress)
            install_directory(staging, directory, is_built)
    references = tuple(" ".join(l.reference.split()) for l in lines)
    return EvalSet(f"mcif-{split}", "en", target_lang, references, tuple(sources), directory / "wavs.txt",
                   directory / "audio-segments.yaml", tuple(read_segments(directory / "audio-segments.yaml")))

