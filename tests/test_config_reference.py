"""The configuration reference (docs/configuration.md) is the code's: regenerated from the knob declarations it is
the committed page, and it has a row for every knob of every config class."""
from __future__ import annotations

import dataclasses

from agents.config_reference import (
    REFERENCE_PAGE,
    REGENERATE,
    config_classes,
    knobs,
    reference_page,
    render,
    system_agents,
)
from common.config import knob, with_default


def test_the_committed_page_is_the_generated_one():
    assert REFERENCE_PAGE.read_text(encoding="utf-8") == reference_page(), \
        f"docs/configuration.md differs from the knob declarations: run `{REGENERATE}` and commit the page"


def test_every_knob_has_a_row():
    rows = {line.split("`")[1] for line in REFERENCE_PAGE.read_text(encoding="utf-8").splitlines()
            if line.startswith("| `")}
    declared = {field.name for config in config_classes() for field in knobs(config)}
    assert len(declared) > 50 and declared <= rows


def test_every_agent_of_every_system_is_found():
    agents = system_agents()
    for system in ("alignatt4llm", "waitk_gpe", "ssbd", "star", "simulmask"):
        assert any(name.startswith(f"agents.{system}:") for name in agents)
    assert "agents.alignatt4llm:WaitkTextAgent" in agents


def test_a_row_lists_each_default_with_the_agents_that_have_it():
    @dataclasses.dataclass(frozen=True)
    class Lagged:
        k: int = knob(5, "wait-k lag")
        note: str = knob("", "a | in its help")

    @dataclasses.dataclass(frozen=True)
    class Quicker(Lagged):
        k: int = with_default(Lagged, "k", 3)

    @dataclasses.dataclass(frozen=True)
    class Training:
        steps: int = knob(10, "optimizer steps")

    page = render([Lagged, Quicker, Training], {"agents.x:Slow": Lagged, "agents.x:Fast": Quicker,
                                                "agents.y:Slow": Lagged})
    assert "| `k` | int | `5` (x: Slow; y: Slow); `3` (x: Fast) | wait-k lag | x: Fast, Slow; y: Slow |" in page
    assert "a \\| in its help" in page
    training = page.split("## Training and tool knobs")[1]
    assert "| `steps` | int | `10` | optimizer steps |" in training and "`k`" not in training


def test_a_preset_extends_another_and_states_only_what_differs(tmp_path):
    """`extends:` names a preset file next to it or a shipped preset; its own keys win; a loop is an error."""
    import pytest

    import eval_configs
    from common.config import ConfigError, read_yaml, with_extends

    (tmp_path / "base.yaml").write_text("model: embedded\nborder: 1\nmax_new_tokens: 16\n")
    (tmp_path / "child.yaml").write_text("extends: base.yaml\nborder: 0\n")
    assert read_yaml(tmp_path / "child.yaml") == {"model": "embedded", "border": 0, "max_new_tokens": 16}
    shipped = read_yaml(eval_configs.path("alignatt4llm_low"))
    (tmp_path / "named.yaml").write_text("extends: alignatt4llm_low\nspeech_chunk_size: 1.5\n")
    assert read_yaml(tmp_path / "named.yaml") == {**shipped, "speech_chunk_size": 1.5}
    # a harness that read the YAML itself (simulstream's processor config) finds a shipped preset by name
    assert with_extends({"extends": "alignatt4llm_low", "border": 3}) == {**shipped, "border": 3}
    (tmp_path / "loop.yaml").write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="comes back to a preset it started from"):
        read_yaml(tmp_path / "loop.yaml")
    (tmp_path / "lost.yaml").write_text("extends: nowhere.yaml\n")
    with pytest.raises(ConfigError, match="'nowhere.yaml' is neither a file next to the preset nor"):
        read_yaml(tmp_path / "lost.yaml")
