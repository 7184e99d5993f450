"""Public agent modules (`agents.alignatt4llm`, ...) that import a harness only when one of its agents is asked
for (PEP 562), so neither SimulEval nor simulstream is needed to use the other's agents; run as a file by
`simuleval --agent agents/<system>.py`, the module marks its SimulEval agent with SimulEval's `@entrypoint`."""
from __future__ import annotations

import importlib
import sys
from typing import Callable


# `simuleval --agent FILE.py` executes FILE as a module of this name (simuleval.utils.agent.import_file).
SIMULEVAL_FILE_MODULE = "agents"


def lazy_agents(module_name: str, agent_modules: dict[str, str],
                simuleval_agent: str | None = None) -> tuple[Callable, Callable]:
    """`__getattr__` and `__dir__` for the module `module_name`, which exports {agent class: defining module}.

    `simuleval_agent` names the agent `simuleval --agent agents/<system>.py` evaluates when that command runs the
    file (`--agent-class agents.<system>.OtherAgent` picks another SimulEval agent of the same file).
    """
    if module_name == SIMULEVAL_FILE_MODULE and simuleval_agent is not None:
        mark_simuleval_entrypoint(agent_modules, simuleval_agent)

    def __getattr__(name: str):
        if name not in agent_modules:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}; agents: {', '.join(agent_modules)}")
        return getattr(importlib.import_module(agent_modules[name]), name)

    def __dir__() -> list[str]:
        return sorted([*vars(sys.modules[module_name]), *agent_modules])

    return __getattr__, __dir__


def mark_simuleval_entrypoint(agent_modules: dict[str, str], default: str) -> None:
    """Apply SimulEval's `@entrypoint` to the agent SimulEval's own arguments ask for: the class named by
    `--agent-class` when this file exports it, else `default`."""
    from simuleval.utils import entrypoint
    from simuleval.utils.arguments import check_argument

    wanted = (check_argument("agent_class") or "").rpartition(".")[2]
    name = wanted if wanted in agent_modules else default
    entrypoint(getattr(importlib.import_module(agent_modules[name]), name))
