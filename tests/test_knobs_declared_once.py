"""Every knob has one declaration (../shared/DESIGN.md): a name means one thing, with one help text, in every
config of the package; a system that wants another default takes the knob with `common.config.with_default`."""
from __future__ import annotations

import dataclasses
from collections import defaultdict

from agents.config_reference import config_classes
from common.config import knob, with_default

# One name, two things, both in STAR's training command: `heads` is the model's attention-head count there (a head
# set file in AlignAtt) and `wait_k` the training mask's lag (the decoder's read-ahead in the agent). Renaming them
# would change STAR's training flags and the metadata of every STAR checkpoint written so far.
DIFFERENT_THINGS_ONE_NAME = {"heads", "wait_k"}


def declarations(classes) -> dict[str, dict[str, str]]:
    """knob name -> {help text: the first class declaring it with that text}."""
    found: dict[str, dict[str, str]] = defaultdict(dict)
    for config in classes:
        for field in dataclasses.fields(config):
            if "help" in field.metadata:
                found[field.name].setdefault(field.metadata["help"], config.__qualname__)
    return found


def test_every_knob_is_declared_once():
    classes = list(config_classes())
    assert len(classes) > 20  # the walk found the package's configs
    twice = {name: sorted(helps.values()) for name, helps in declarations(classes).items()
             if len(helps) > 1 and name not in DIFFERENT_THINGS_ONE_NAME}
    assert twice == {}


def test_a_second_declaration_is_caught_and_with_default_is_not():
    @dataclasses.dataclass(frozen=True)
    class Base:
        k: int = knob(5, "wait-k lag")

    @dataclasses.dataclass(frozen=True)
    class Redeclared(Base):
        k: int = knob(3, "wait-k lag in words")

    @dataclasses.dataclass(frozen=True)
    class Redefaulted(Base):
        k: int = with_default(Base, "k", 3)

    assert len(declarations([Base, Redeclared])["k"]) == 2
    assert len(declarations([Base, Redefaulted])["k"]) == 1
    assert Redefaulted().k == 3 and Base().k == 5
