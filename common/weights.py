"""Read-only weights that the streams of one server share. A load is a call of a loader with the knobs that affect
loading as its arguments; that call (loader and arguments) is the key, so no list of knobs is ever written by hand."""
from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WeightLoad:
    """`loader(*args, **kwargs)` not yet called. Two loads with equal keys would load the same weights."""

    loader: Callable[..., Any]
    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, loader: Callable[..., Any], *args, **kwargs) -> "WeightLoad":
        return cls(loader, args, kwargs)

    @classmethod
    def taking(cls, loader: Callable[..., Any], *args, **options) -> "WeightLoad":
        """The load with only the `options` that `loader` takes: a registry's loaders each take the options that
        change what they load, and the others stay out of the key."""
        taken = inspect.signature(loader).parameters
        return cls(loader, args, {name: value for name, value in options.items() if name in taken})

    @property
    def key(self) -> tuple:
        """The loader itself (a function is one object wherever it is named) and its arguments, made hashable
        (sequences as tuples, mappings sorted)."""
        return (self.loader, hashable(self.args), hashable(self.kwargs))

    def load(self) -> Any:
        return self.loader(*self.args, **self.kwargs)


def hashable(value: Any) -> Any:
    """`value` as a hashable key. A whole config is refused: a loader takes the knobs that affect loading, or every
    other knob (a border, a language) would split the cache."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        raise TypeError(f"a weight loader takes the knobs that affect loading, not a whole {type(value).__name__}")
    if isinstance(value, Mapping):
        return tuple(sorted((key, hashable(item)) for key, item in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(hashable(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(hashable(item) for item in value)
    hash(value)  # anything else must be hashable as it is (TypeError otherwise)
    return value


class WeightCache:
    """Loaded weights by key, for the streams of one agent class; safe to use from several threads."""

    def __init__(self):
        self._loaded: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    def get(self, loads: tuple[WeightLoad, ...]) -> tuple:
        """The weights of every load, each loaded once and then shared (a recogniser is shared by two language
        pairs whose LLM loads differ)."""
        with self._lock:
            for load in loads:
                if load.key not in self._loaded:
                    self._loaded[load.key] = load.load()
            return tuple(self._loaded[load.key] for load in loads)

    def __len__(self) -> int:
        return len(self._loaded)
