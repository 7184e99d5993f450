"""`python -m backends.finetune_simulmask --source-file ... --target-file ... [--config FILE] [knobs]`."""
from __future__ import annotations

import argparse
import sys

from agents.harness.config import ConfigError, add_config_args, config_from_namespace
from backends.finetune_simulmask.config import FinetuneConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m backends.finetune_simulmask",
                                     description="Fine-tune an ALiBi LLM (Falcon, Bloom) with SimulMask for wait-k.")
    add_config_args(parser, FinetuneConfig)
    args = parser.parse_args(argv)
    try:
        config = config_from_namespace(FinetuneConfig, args)
    except ConfigError as error:
        parser.error(str(error))
    from backends.finetune_simulmask.train import finetune

    finetune(config, log=lambda message: print(message, flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
