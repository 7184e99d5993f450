"""A parallel corpus as two line-aligned text files, split into disjoint training and held-out lines (every
fine-tuning command reads its training data this way)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ParallelCorpus:
    sources: list[str]
    targets: list[str]

    def __len__(self) -> int:
        return len(self.sources)

    @classmethod
    def read(cls, source_file: str | Path, target_file: str | Path) -> "ParallelCorpus":
        sources = Path(source_file).read_text(encoding="utf-8").splitlines()
        targets = Path(target_file).read_text(encoding="utf-8").splitlines()
        if len(sources) != len(targets):
            raise ValueError(f"{source_file} has {len(sources)} lines but {target_file} has {len(targets)}: a "
                             f"parallel corpus needs one target line per source line")
        pairs = [(s.strip(), t.strip()) for s, t in zip(sources, targets) if s.strip() and t.strip()]
        return cls([s for s, _ in pairs], [t for _, t in pairs])

    def select(self, indices) -> "ParallelCorpus":
        return ParallelCorpus([self.sources[i] for i in indices], [self.targets[i] for i in indices])

    def split(self, held_out: int, max_words: int = 0) -> tuple["ParallelCorpus", "ParallelCorpus"]:
        """(train, test): the last `held_out` pairs are the test set; training keeps the other pairs whose source
        and target lines both differ from every test line (disjoint by content, not only by index), and with
        `max_words` > 0 only pairs of at most that many words per side."""
        if not 0 < held_out < len(self):
            raise ValueError(f"held_out must be between 1 and {len(self) - 1}, got {held_out}")
        test = self.select(range(len(self) - held_out, len(self)))
        seen = set(test.sources) | set(test.targets)
        keep = [i for i in range(len(self) - held_out)
                if self.sources[i] not in seen and self.targets[i] not in seen
                and (max_words <= 0 or max(len(self.sources[i].split()), len(self.targets[i].split())) <= max_words)]
        return self.select(keep), test
