"""Public agent modules (`agents.alignatt4llm`, ...) that import a harness only when one of its agents is asked
for (PEP 562), so neither SimulEval nor simulstream is needed to use the other's agents."""
from __future__ import annotations

import importlib
import sys
from typing import Callable


def lazy_agents(module_name: str, agent_modules: dict[str, str]) -> tuple[Callable, Callable]:
    """`__getattr__` and `__dir__` for the module `module_name`, which exports {agent class: defining module}."""

    def __getattr__(name: str):
        if name not in agent_modules:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}; agents: {', '.join(agent_modules)}")
        return getattr(importlib.import_module(agent_modules[name]), name)

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[module_name]), *agent_modules])

    return __getattr__, __dir__
