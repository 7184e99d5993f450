"""A synthetic speech corpus for training STAR on CPU: English text chunks (read from the shared data at build time)
spoken by espeak-ng with several voices and speeds. Writes wavs/ and train/dev/test TSV files (wav path, transcript);
the test chunks come from source lines no training chunk comes from.

    python -m backends.star.corpus --out runs/star_corpus [--train 3000 --dev 150 --test 200]
"""
from __future__ import annotations

import argparse
import random
from collections import Counter
from pathlib import Path

from backends.star.text import normalize_transcript
from common.datasets import shared_data_dir
from common.synthetic_speech import SAMPLE_RATE, speak

VOICES = ("en-us", "en-gb", "en-gb-scotland", "en-029", "en-gb-x-rp")
VARIANTS = ("", "+m1", "+m3", "+f2", "+f3")
WORDS_PER_MINUTE = (140, 190)


def source_lines(data_dir: Path | None = None) -> list[str]:
    """English lines: the Europarl en side, then MCIF dev en (normalised, non-empty)."""
    data_dir = Path(data_dir) if data_dir else shared_data_dir()
    files = [data_dir / "europarl_cs_en_small" / "en.txt", data_dir / "mcif_dev" / "en.txt"]
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        raise FileNotFoundError(f"English source text not found: {', '.join(missing)} (pass --data-dir)")
    lines = [normalize_transcript(line) for path in files for line in path.read_text(encoding="utf-8").splitlines()]
    return [line for line in lines if line]


def chunks(lines: list[str], vocabulary: set[str], rng: random.Random, min_words: int, max_words: int) -> list[str]:
    """Word windows of min..max words, cut left to right from each line, kept when all words are in `vocabulary`."""
    pieces = []
    for line in lines:
        words, start = line.split(), 0
        while start + min_words <= len(words):
            length = rng.randint(min_words, max_words)
            window = words[start:start + length]
            if len(window) >= min_words and all(word in vocabulary for word in window):
                pieces.append(" ".join(window))
            start += length
    return pieces


def build_corpus(out_dir: Path, train: int, dev: int, test: int, vocabulary_size: int, min_words: int = 3,
                 max_words: int = 9, seed: int = 0, data_dir: Path | None = None, log=print) -> dict[str, Path]:
    import soundfile

    rng = random.Random(seed)
    lines = source_lines(data_dir)
    held_out = max(1, len(lines) // 10)
    train_lines, test_lines = lines[:-held_out], lines[-held_out:]
    counts = Counter(word for line in train_lines for word in line.split())
    vocabulary = {word for word, _ in counts.most_common(vocabulary_size)}
    train_pool = chunks(train_lines, vocabulary, rng, min_words, max_words)
    test_pool = chunks(test_lines, vocabulary, rng, min_words, max_words)
    rng.shuffle(train_pool)
    rng.shuffle(test_pool)
    if len(train_pool) < train + dev or len(test_pool) < test:
        raise ValueError(f"only {len(train_pool)} training and {len(test_pool)} test chunks within the top "
                         f"{vocabulary_size} words; raise --vocabulary or lower the counts")
    splits = {"train": train_pool[:train], "dev": train_pool[train:train + dev], "test": test_pool[:test]}
    wav_dir = out_dir / "wavs"
    wav_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, texts in splits.items():
        rows = []
        for number, text in enumerate(texts):
            voice = rng.choice(VOICES) + rng.choice(VARIANTS)
            audio = speak(text, voice, rng.randint(*WORDS_PER_MINUTE))
            path = wav_dir / f"{split}_{number:05d}.wav"
            soundfile.write(str(path), audio, SAMPLE_RATE, subtype="PCM_16")
            rows.append(f"{path.resolve()}\t{text}\n")
            if number % 500 == 0:
                log(f"{split}: {number}/{len(texts)}")
        written[split] = out_dir / f"{split}.tsv"
        written[split].write_text("".join(rows), encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.star.corpus", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory (wavs/, train.tsv, dev.tsv, test.tsv)")
    parser.add_argument("--train", type=int, default=3000, help="training utterances")
    parser.add_argument("--dev", type=int, default=150, help="development utterances (same lines as training)")
    parser.add_argument("--test", type=int, default=200, help="test utterances (from held-out source lines)")
    parser.add_argument("--vocabulary", type=int, default=1500, help="keep chunks made of the N most frequent words")
    parser.add_argument("--min-words", type=int, default=3)
    parser.add_argument("--max-words", type=int, default=9)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", default=None, help="the shared data folder (default: ../shared/data)")
    args = parser.parse_args(argv)
    written = build_corpus(Path(args.out), args.train, args.dev, args.test, args.vocabulary, args.min_words,
                           args.max_words, args.seed, args.data_dir)
    print("\n".join(f"{split}: {path}" for split, path in written.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
