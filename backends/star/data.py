"""Training data for STAR: a TSV of (wav path, transcript) read into log-mel features once, batched by length."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from backends.star.features import log_mel
from backends.star.model import Batch
from backends.star.text import TargetVocabulary
from common.audio import decode_audio_16k


@dataclass(frozen=True)
class Utterance:
    mel: torch.Tensor  # [frames, 80] float16
    tokens: tuple[int, ...]
    text: str
    path: str


def read_tsv(path: str | Path) -> list[tuple[str, str]]:
    """(wav path, transcript) rows; relative wav paths are relative to the TSV's folder."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"utterance list {path} does not exist (build one with `python -m backends.star.corpus`)")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[1].strip():
            raise ValueError(f"{path}:{number}: expected 'wav path<TAB>transcript', got {line[:80]!r}")
        wav = Path(parts[0]) if Path(parts[0]).is_absolute() else path.parent / parts[0]
        rows.append((str(wav), parts[1].strip()))
    return rows


def load_utterances(rows: list[tuple[str, str]], vocabulary: TargetVocabulary) -> list[Utterance]:
    return [Utterance(log_mel(torch.from_numpy(decode_audio_16k(wav))).half(), tuple(vocabulary.encode(text)), text, wav)
            for wav, text in rows]


def collate(utterances: list[Utterance], vocabulary: TargetVocabulary) -> Batch:
    mel = torch.nn.utils.rnn.pad_sequence([u.mel.float() for u in utterances], batch_first=True)
    longest = max(len(u.tokens) for u in utterances) + 1
    inputs = torch.full((len(utterances), longest), vocabulary.pad_id)
    targets = torch.full((len(utterances), longest), -100)
    for row, utterance in enumerate(utterances):
        tokens = list(utterance.tokens)
        inputs[row, :len(tokens) + 1] = torch.tensor([vocabulary.bos_id] + tokens)
        targets[row, :len(tokens) + 1] = torch.tensor(tokens + [vocabulary.eos_id])
    return Batch(mel, torch.tensor([u.mel.shape[0] for u in utterances]), inputs, targets,
                 torch.tensor([len(u.tokens) + 1 for u in utterances]))


def length_batches(utterances: list[Utterance], batch_size: int, rng: random.Random) -> list[list[Utterance]]:
    """Batches of similar length (little padding), in random order."""
    ordered = sorted(utterances, key=lambda u: (u.mel.shape[0], rng.random()))
    batches = [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]
    rng.shuffle(batches)
    return batches
