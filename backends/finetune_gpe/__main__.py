"""`python -m backends.finetune_gpe --source-file ... --target-file ... [--config FILE] [knobs]`."""
from __future__ import annotations

import sys

from backends.finetune.cli import run_cli
from backends.finetune_gpe.config import GPEFinetuneConfig


def main(argv: list[str] | None = None) -> int:
    from backends.finetune_gpe.train import finetune

    return run_cli(argv, "python -m backends.finetune_gpe",
                   "Fine-tune an LLM for group-position-encoding wait-k translation.", GPEFinetuneConfig, finetune)


if __name__ == "__main__":
    sys.exit(main())
