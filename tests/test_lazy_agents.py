"""agents/lazy.py: a system module builds its agents on first access, once, whatever the number of threads asking
(a class holds its server's shared weights), and names them where they are found."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from agents.lazy import lazy_agents

SYSTEM = '''
import time
calls = []

def harness_agents():
    calls.append(1)
    time.sleep(0.05)  # long enough for every thread to ask while the first builds

    class TextAgent:
        pass

    class OtherAgent:
        pass

    return {"TextAgent": TextAgent, "OtherAgent": OtherAgent}
'''


def system_module() -> dict:
    namespace = {"__name__": "fake_system"}
    exec(SYSTEM, namespace)
    return namespace


def test_threads_asking_at_once_get_one_class_built_once():
    namespace = system_module()
    getattr_, dir_ = lazy_agents("fake_system", {"TextAgent": namespace["harness_agents"],
                                                 "OtherAgent": namespace["harness_agents"]})
    with ThreadPoolExecutor(8) as pool:
        classes = set(pool.map(lambda i: getattr_("TextAgent" if i % 2 else "OtherAgent"), range(16)))
    assert len(namespace["calls"]) == 1 and len(classes) == 2
    assert {agent.__qualname__ for agent in classes} == {"TextAgent", "OtherAgent"}
    assert {"TextAgent", "OtherAgent"} <= set(dir_())


def test_an_unknown_agent_names_the_agents_there_are():
    namespace = system_module()
    getattr_, _ = lazy_agents("fake_system", {"TextAgent": namespace["harness_agents"]})
    try:
        getattr_("Agent")
    except AttributeError as error:
        assert "agents: TextAgent" in str(error)
    else:
        raise AssertionError("no AttributeError")
    assert namespace["calls"] == []  # nothing built for a name that is not an agent
