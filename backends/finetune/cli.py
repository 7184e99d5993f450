"""The command line of a fine-tuning command: every knob of its config as a --flag (or from --config FILE)."""
from __future__ import annotations

import argparse
from typing import Callable

from common.config import ConfigError, add_config_args, config_from_namespace


def run_cli(argv: list[str] | None, prog: str, description: str, config_class: type,
            finetune: Callable[..., object]) -> int:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_config_args(parser, config_class)
    args = parser.parse_args(argv)
    try:
        config = config_from_namespace(config_class, args)
    except ConfigError as error:
        parser.error(str(error))
    finetune(config, log=lambda message: print(message, flush=True))
    return 0
