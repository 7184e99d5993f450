"""Operating points as YAML; `path(name)` finds a shipped one."""
from pathlib import Path

DIRECTORY = Path(__file__).parent


def path(name: str) -> Path:
    """The shipped config `name` (with or without `.yaml`); raises FileNotFoundError listing what exists."""
    candidate = DIRECTORY / (name if name.endswith(".yaml") else f"{name}.yaml")
    if not candidate.is_file():
        shipped = sorted(p.stem for p in DIRECTORY.glob("*.yaml"))
        raise FileNotFoundError(f"no shipped config {name!r}; shipped configs: {', '.join(shipped)}")
    return candidate
