"""One place for every knob: dataclass fields with defaults and help, filled from YAML, argparse or a namespace.

Precedence: field default < YAML file (`config:`) < explicit command-line flag. simulstream and its SimulEval
wrapper pass a plain namespace (the YAML itself), which is read the same way.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any, Type, TypeVar

import yaml

from common.languages import LanguageError, language_code

T = TypeVar("T")

# Keys that belong to the harnesses, not to our systems: allowed in our YAML files and ignored here.
HARNESS_KEYS = frozenset({
    "type", "speech_chunk_size", "detokenizer_type", "latency_unit", "simuleval_agent", "agent_class",
    "source_segment_size", "device", "dtype", "fp16", "config",
})


class ConfigError(ValueError):
    """A configuration value or file is invalid."""


def knob(default: Any, help: str, **kwargs) -> Any:
    """A config field with its help text (shown by `--help`)."""
    return dataclasses.field(default=default, metadata={"help": help, **kwargs})


def with_default(owner: Type, name: str, value: Any) -> Any:
    """The knob `name` as `owner` declares it (help, parsing), with another default: for a system whose sensible
    value differs, so that every knob is still declared once."""
    return dataclasses.field(default=value, metadata=owner.__dataclass_fields__[name].metadata)


def same_knob(owner: Type, name: str) -> Any:
    """The knob `name` as `owner` declares it, default included: a config that holds another's knobs (the AlignAtt
    config, the gate's) declares none of them again."""
    return with_default(owner, name, owner.__dataclass_fields__[name].default)


def language_knob(default: str, help: str) -> str:
    """A language field: given as an ISO code or a name in any case (YAML, flags, namespaces), held as its ISO code."""
    return knob(default, f"{help}: an ISO code or English name, e.g. de or German", parse=language_code)


def language_arg(text: str) -> str:
    """argparse `type=` for a language flag: its ISO code, or the error naming the supported languages."""
    try:
        return language_code(text)
    except LanguageError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _parse_bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def _field_type(field: dataclasses.Field):
    annotation = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    for name, parser in (("bool", _parse_bool), ("int", int), ("float", float)):
        if annotation.startswith(name):
            return parser
    return str


def add_config_args(parser: argparse.ArgumentParser, config_class: Type) -> None:
    """Add `--config FILE` and one flag per field (absent unless given, so YAML values are not overridden)."""
    existing = set(parser._option_string_actions)  # noqa: SLF001 (argparse has no public accessor)
    if "--config" not in existing:
        parser.add_argument("--config", default=argparse.SUPPRESS, help="YAML operating point (eval_configs/*.yaml)")
    for field in dataclasses.fields(config_class):
        flag = _flag(field.name)
        if flag in existing:
            continue
        parser.add_argument(
            flag, dest=field.name, type=_field_type(field), default=argparse.SUPPRESS,
            help=f"{field.metadata.get('help', '')} (default: {field.default!r})",
        )


EXTENDS = "extends"  # a preset's key naming the preset it derives from (its own keys win)


def read_yaml(path: str | Path) -> dict:
    """A YAML preset's knobs, over those of the preset it `extends` (resolved by `with_extends`)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; shipped operating points are in eval_configs/")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a YAML mapping of knob: value")
    return with_extends(data, path.parent, (path.resolve(),))


def with_extends(values: dict, folder: Path | None = None, seen: tuple[Path, ...] = ()) -> dict:
    """`values` over the preset their `extends` key names: a YAML file relative to `folder` (the extending file's),
    else a shipped preset by name (`eval_configs/NAME.yaml`), which is how a harness that read the YAML itself
    (simulstream's processor config) finds it."""
    values = dict(values)
    parent = values.pop(EXTENDS, None)
    if parent is None:
        return values
    import eval_configs

    candidate = Path(folder or ".") / str(parent)
    try:
        base = candidate if candidate.is_file() else eval_configs.path(str(parent))
    except FileNotFoundError as error:
        raise ConfigError(f"{EXTENDS}: {parent!r} is neither a file next to the preset nor {error}") from None
    if base.resolve() in seen:
        raise ConfigError(f"{EXTENDS}: {parent!r} comes back to a preset it started from")
    data = yaml.safe_load(base.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{base} must hold a YAML mapping of knob: value")
    return {**with_extends(data, base.parent, (*seen, base.resolve())), **values}


def build_config(config_class: Type[T], values: dict) -> T:
    """Validate keys and types and build the config; unknown keys are errors (typos must not pass silently)."""
    names = {field.name: field for field in dataclasses.fields(config_class)}
    unknown = sorted(set(values) - set(names) - HARNESS_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} for {config_class.__name__}; known: {', '.join(sorted(names))}"
        )
    kwargs = {}
    for key, value in values.items():
        if key not in names or value is None:
            continue
        parse = names[key].metadata.get("parse")
        if parse is not None:
            try:
                kwargs[key] = parse(value)
            except ValueError as error:
                raise ConfigError(f"{key}: {error}") from None
            continue
        parser = _field_type(names[key])
        try:
            kwargs[key] = _parse_bool(str(value)) if parser is _parse_bool else parser(value)
        except (TypeError, ValueError, argparse.ArgumentTypeError):
            raise ConfigError(f"{key}: expected {parser.__name__.lstrip('_')}, got {value!r}") from None
    config = config_class(**kwargs)
    validate = getattr(config, "validate", None)
    if validate is not None:
        validate()
    return config


def config_from_namespace(config_class: Type[T], namespace: Any, default_config: str | Path | None = None) -> T:
    """From argparse args or simulstream's SimpleNamespace: YAML named by `config` (else `default_config`) first,
    then attributes."""
    values: dict = {}
    config_path = getattr(namespace, "config", None) or default_config
    if config_path:
        values.update(read_yaml(config_path))
    names = {field.name for field in dataclasses.fields(config_class)}
    for name in names:
        if hasattr(namespace, name) and getattr(namespace, name) is not None:
            values[name] = getattr(namespace, name)
    return build_config(config_class, values)


def config_from_yaml(config_class: Type[T], path: str | Path, **overrides) -> T:
    return build_config(config_class, {**read_yaml(path), **overrides})
