"""How a system module (`agents.alignatt4llm`, ...) holds its agents for every harness yet imports a harness only when
one of its agents is asked for (PEP 562), so neither SimulEval nor simulstream is needed to use the other's agents."""
from __future__ import annotations

import importlib
import threading
from pathlib import Path
from typing import Callable

# `simuleval --agent FILE.py` executes FILE as a module of this name (simuleval.utils.agent.import_file).
SIMULEVAL_FILE_MODULE = "agents"

AgentBuilder = Callable[[], dict[str, type]]


def lazy_agents(module_name: str, builders: dict[str, AgentBuilder],
                simuleval_agent: str | None = None) -> tuple[Callable, Callable]:
    """`__getattr__` and `__dir__` for the system module `module_name`: agent name -> the function of that module
    that defines it (with the other agents of its harness, once, the first time one of them is asked for).

    `simuleval_agent` names the agent `simuleval --agent agents/<system>.py` evaluates when that command runs the
    file (`--agent-class agents.<system>.OtherAgent` picks another SimulEval agent of the same file).
    """
    namespace = next(iter(builders.values())).__globals__  # the system module's own globals

    building = threading.Lock()  # two threads asking at once get one class (its shared weights live on it)

    def __getattr__(name: str):
        if name not in builders:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}; agents: {', '.join(builders)}")
        with building:
            if name not in namespace:
                for agent_name, agent in builders[name]().items():
                    agent.__qualname__ = agent_name  # defined inside its builder; this module is where it is found
                    namespace[agent_name] = agent
        return namespace[name]

    def __dir__() -> list[str]:
        return sorted([*namespace, *builders])

    if module_name == SIMULEVAL_FILE_MODULE and simuleval_agent is not None:
        # The file run as a module of its own: evaluate the class of the package module it is (one class, one
        # identity, whichever way SimulEval is pointed at it).
        system = importlib.import_module(f"agents.{Path(namespace['__file__']).stem}")
        mark_simuleval_entrypoint(lambda name: getattr(system, name), builders, simuleval_agent)
    return __getattr__, __dir__


def mark_simuleval_entrypoint(agent: Callable[[str], type], names, default: str) -> None:
    """Apply SimulEval's `@entrypoint` to the agent SimulEval's own arguments ask for: the class named by
    `--agent-class` when this file exports it, else `default`."""
    from simuleval.utils import entrypoint
    from simuleval.utils.arguments import check_argument

    wanted = (check_argument("agent_class") or "").rpartition(".")[2]
    entrypoint(agent(wanted if wanted in names else default))
