"""From word pieces to words: a word is complete when the next piece starts a new word (or decoding ends), and it
inherits the delay of the token that completed it (when it could first be shown)."""
from __future__ import annotations

from backends.star.streaming import Token
from backends.star.text import WORD_START, TargetVocabulary


class WordAssembler:
    def __init__(self, vocabulary: TargetVocabulary):
        self.vocabulary = vocabulary
        self.pieces: list[str] = []

    def reset(self) -> None:
        self.pieces = []

    def push(self, token: Token) -> list[tuple[str, float]]:
        """The (word, delay ms) pairs that `token` completes; the end-of-sentence token completes the last word."""
        if token.id == self.vocabulary.eos_id:
            return self.finish(token.delay_ms)
        piece = self.vocabulary.piece(token.id)
        done = self._complete(token.delay_ms) if piece.startswith(WORD_START) else []
        if token.id not in (self.vocabulary.bos_id, self.vocabulary.pad_id):
            self.pieces.append(piece)
        return done

    def finish(self, delay_ms: float) -> list[tuple[str, float]]:
        return self._complete(delay_ms)

    def _complete(self, delay_ms: float) -> list[tuple[str, float]]:
        word = "".join(self.pieces).replace(WORD_START, "").strip()
        self.pieces = []
        return [(word, delay_ms)] if word else []
