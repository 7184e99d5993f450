"""Targets for STAR: transcript normalisation (lower case, letters, digits and apostrophes) and a small
word-piece (BPE) vocabulary trained on the training text only, saved as tokenizer.json beside the weights."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
WORD_START = "▁"


def normalize_transcript(text: str) -> str:
    """'It's 5 p.m., OK?' -> "it's 5 p m ok" (what the model writes and WER is scored on)."""
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower().replace("’", "'"))
    return " ".join(word.strip("'") for word in text.split() if word.strip("'"))


class TargetVocabulary:
    """BPE pieces with a word-start marker; ids 0-3 are <pad>, <s>, </s>, <unk>."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = (tokenizer.token_to_id(t) for t in SPECIALS)

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int = 500) -> "TargetVocabulary":
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        tokenizer = Tokenizer(models.BPE(unk_token=UNK))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        tokenizer.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False)
        tokenizer.train_from_iterator((normalize_transcript(text) for text in texts), trainer)
        return cls(tokenizer)

    @classmethod
    def load(cls, path: str | Path) -> "TargetVocabulary":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        self.tokenizer.save(str(path))

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size()

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(normalize_transcript(text)).ids

    def piece(self, token_id: int) -> str:
        return self.tokenizer.id_to_token(token_id)

    def starts_word(self, token_id: int) -> bool:
        return self.piece(token_id).startswith(WORD_START)

    def decode(self, ids: Iterable[int]) -> str:
        pieces = [self.piece(i) for i in ids if i not in (self.pad_id, self.bos_id, self.eos_id)]
        return "".join(pieces).replace(WORD_START, " ").strip()
