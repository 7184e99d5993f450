"""Imports run one way (../shared/DESIGN.md): evaluation (the tooling that runs and reads evaluations, above the
agents) → agents → policies and backends; backends → policies; policies imports neither; `common` (the neutral
vocabulary) imports nothing of the package. Every import counts: inside functions, under TYPE_CHECKING, relative
ones."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("evaluation", "agents", "policies", "backends", "common")
# What each layer may not import.
FORBIDDEN = {
    "common": {"evaluation", "agents", "policies", "backends"},
    "policies": {"evaluation", "agents", "backends"},
    "backends": {"evaluation", "agents"},
    "agents": {"evaluation"},
    "evaluation": set(),
}


def imported_packages(source: str, module: str) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in `source`, the text of module `module` (e.g. "policies.units")."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolved against this module's package
                base = module.split(".")[: -node.level]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return [(line, name.split(".")[0]) for line, name in found]


def violations(source: str, module: str) -> list[str]:
    layer = module.split(".")[0]
    return [f"{module}:{line} imports {package}" for line, package in imported_packages(source, module)
            if package in FORBIDDEN[layer]]


def package_modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def test_every_module_imports_in_one_direction():
    modules = list(package_modules())
    assert {name.split(".")[0] for name, _ in modules} == set(PACKAGES)
    found = [v for name, path in modules for v in violations(path.read_text(), name)]
    assert found == []


@pytest.mark.parametrize("module, source", [
    ("policies.alignatt", "from agents.core import SourceWord\n"),
    ("policies.alignatt", "def f():\n    import backends.hf.lm\n"),
    ("backends.prompt", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agents import languages\n"),
    ("common.stream", "from policies.units import join_units\n"),
    ("policies.units", "from ..backends import tiny\n"),
    ("agents.systems.llm", "from evaluation.policy_stats import PolicyCounter\n"),  # counting is the evaluation's
])
def test_a_violating_import_is_caught(module, source):
    assert len(violations(source, module)) == 1


def test_imports_that_follow_the_direction_pass():
    assert violations("from policies.units import join_units\nfrom common.stream import Emission\n",
                      "backends.hf.lm") == []
    assert violations("from . import frontier\nfrom .units import Unit\n", "policies.alignatt") == []
    assert violations("from agents.systems.events import Step\n", "evaluation.policy_stats") == []
