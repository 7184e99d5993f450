"""`python -m backends.finetune_simulmask --source-file ... --target-file ... [--config FILE] [knobs]`."""
from __future__ import annotations

import sys

from backends.finetune.cli import run_cli
from backends.finetune_simulmask.config import SimulMaskFinetuneConfig


def main(argv: list[str] | None = None) -> int:
    from backends.finetune_simulmask.train import finetune

    return run_cli(argv, "python -m backends.finetune_simulmask",
                   "Fine-tune an ALiBi LLM (Falcon, Bloom) with SimulMask for wait-k.", SimulMaskFinetuneConfig,
                   finetune)


if __name__ == "__main__":
    sys.exit(main())
