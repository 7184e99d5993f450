"""The keyword a transformers model takes its KV cache by: `cache` in releases that renamed it (5.24 warns that
`past_key_values` goes in 5.40), `past_key_values` in the ones before (vLLM's environment has 5.19)."""
from __future__ import annotations

import functools
import inspect

RENAMED = "cache"
LEGACY = "past_key_values"


def cache_keyword(model) -> str:
    """`cache` where `model`'s forward declares that parameter, else `past_key_values` (older releases, remote
    code). Read from the class's signature, so a compiled forward or an instance wrapper does not hide it."""
    return _keyword_of(type(model))


@functools.cache
def _keyword_of(model_class: type) -> str:
    """The keyword of a model class, read once per class: every decode step asks (inspecting costs about 20 us)."""
    forward = getattr(model_class, "forward", None)
    if forward is None:
        return LEGACY
    return RENAMED if RENAMED in inspect.signature(forward).parameters else LEGACY


def cache_kwargs(model, cache) -> dict:
    """{keyword: cache} for `model(...)` and `model.generate(...)`."""
    return {cache_keyword(model): cache}


def returned_cache(output):
    """The cache a forward returned: `output.cache` where the release names it so, else `output.past_key_values`."""
    fields = getattr(output, "__dataclass_fields__", {})
    return getattr(output, RENAMED) if RENAMED in fields else output.past_key_values
