"""The configuration reference (docs/configuration.md), rendered from the knob declarations themselves: every knob of
every config class in the package, with its type, default, help and the agents that read it, so that the page cannot
drift from the code (tests/test_config_reference.py regenerates it).

    simulagents config-reference            # writes docs/configuration.md
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import inspect
import pkgutil
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_PAGE = REPO / "docs" / "configuration.md"
REGENERATE = "simulagents config-reference"
SYSTEM_MODULES = ("alignatt4llm", "waitk_gpe", "ssbd", "star", "simulmask")  # agents/<system>.py: what users name


def config_classes() -> Iterator[type]:
    """Every dataclass defined in `agents`, `backends` and `common` (a module whose optional runtime is absent, vLLM,
    is skipped)."""
    for package in ("agents", "backends", "common"):
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(root.__path__, f"{package}."):
            try:
                module = importlib.import_module(info.name)
            except ImportError:  # an optional runtime (vLLM) absent from this environment
                continue
            for value in vars(module).values():
                if inspect.isclass(value) and dataclasses.is_dataclass(value) and value.__module__ == module.__name__:
                    yield value


def knobs(config: type) -> list[dataclasses.Field]:
    """The fields of `config` declared with `common.config.knob` (they carry a help text)."""
    return [field for field in dataclasses.fields(config) if "help" in field.metadata]


def system_agents() -> dict[str, type]:
    """`module:Agent` -> its config class, for every agent of every system module."""
    found = {}
    for system in SYSTEM_MODULES:
        module = importlib.import_module(f"agents.{system}")
        for name in dir(module):
            value = getattr(module, name)
            if inspect.isclass(value) and dataclasses.is_dataclass(getattr(value, "config_class", None)):
                found[f"agents.{system}:{name}"] = value.config_class
    return found


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        return repr(field.default)
    if field.default_factory is not dataclasses.MISSING:
        return repr(field.default_factory())
    return "required"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _agents(names: Iterable[str]) -> str:
    """`agents.alignatt4llm:Agent`, `agents.alignatt4llm:WaitkAgent` -> alignatt4llm: Agent, WaitkAgent."""
    by_system: dict[str, list[str]] = defaultdict(list)
    for name in sorted(set(names)):
        system, _, agent = name.removeprefix("agents.").partition(":")
        by_system[system].append(agent)
    return "; ".join(f"{system}: {', '.join(agents)}" for system, agents in by_system.items())


def render(classes: Iterable[type], agents: dict[str, type]) -> str:
    """The page: one row per knob name (a knob a system declares with another default lists each default with the
    agents or configs that have it)."""
    fields: dict[str, dict[str, dataclasses.Field]] = defaultdict(dict)  # name -> config qualname -> field
    for config in classes:
        for field in knobs(config):
            fields[field.name][f"{config.__module__}.{config.__qualname__}"] = field
    readers: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))  # name -> default -> agents
    for agent, config in sorted(agents.items()):
        for field in knobs(config):
            readers[field.name][_default(field)].append(agent)
    agent_rows, other_rows = [], []
    for name in sorted(fields):
        declared = fields[name]
        first = next(iter(declared.values()))
        helps = sorted({field.metadata["help"] for field in declared.values()})
        kind = first.type if isinstance(first.type, str) else getattr(first.type, "__name__", str(first.type))
        if name in readers:
            by_default = readers[name]
            default = "; ".join(f"`{value}`" + (f" ({_agents(names)})" if len(by_default) > 1 else "")
                                for value, names in sorted(by_default.items(), key=lambda item: -len(item[1])))
            read_by = _agents(agent for names in by_default.values() for agent in names)
            agent_rows.append((name, kind, default, " / ".join(helps), read_by))
        else:
            defaults = sorted({_default(field) for field in declared.values()})
            other_rows.append((name, kind, "; ".join(f"`{value}`" for value in defaults), " / ".join(helps),
                               ", ".join(f"`{config}`" for config in sorted(declared))))
    lines = [
        "# Configuration reference",
        "",
        f"Generated from the knob declarations by `{REGENERATE}`; do not edit by hand "
        "(`tests/test_config_reference.py` fails when this page differs from the code).",
        "",
        "Every knob is a field of a config dataclass (`common.config.knob`): set it in a preset YAML "
        "(`eval_configs/`), with `--set KEY=VALUE` (simulstream, `simulagents eval`) or as a flag `--key-name VALUE` "
        "(SimulEval, `--help` lists them). Precedence: default < YAML < flag.",
        "",
        f"## Agent knobs ({len(agent_rows)})",
        "",
        "Read by the agents users name, `agents.<system>:<Agent>` (read by: system: its agents). A knob whose default differs between agents "
        "lists each default with its agents.",
        "",
        "| knob | type | default | help | read by |",
        "|---|---|---|---|---|",
        *(f"| `{name}` | {_cell(kind)} | {_cell(default)} | {_cell(help_text)} | {read_by} |"
          for name, kind, default, help_text, read_by in agent_rows),
        "",
        f"## Training and tool knobs ({len(other_rows)})",
        "",
        "Read by training commands and tools (no agent reads them), listed with the config classes that hold them.",
        "",
        "| knob | type | default | help | config |",
        "|---|---|---|---|---|",
        *(f"| `{name}` | {_cell(kind)} | {_cell(default)} | {_cell(help_text)} | {configs} |"
          for name, kind, default, help_text, configs in other_rows),
        "",
    ]
    return "\n".join(lines)


def reference_page() -> str:
    return render(config_classes(), system_agents())


def add_config_reference_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=REFERENCE_PAGE, help="where to write the page")


def config_reference_command(args: argparse.Namespace) -> int:
    page = reference_page()
    args.out.write_text(page, encoding="utf-8")
    print(f"{page.count(chr(10) + '| `')} knobs written to {args.out}")
    return 0
