"""The KV cache goes to a transformers model by the keyword its release declares (`cache`, or `past_key_values`
before the rename), and the cache the model hands back is the one it was given and filled."""
from __future__ import annotations

import inspect
import warnings

import pytest
import torch
from transformers.cache_utils import DynamicCache

from backends.hf.cache_keyword import LEGACY, RENAMED, cache_keyword, cache_kwargs, returned_cache
from tests.tiny_checkpoints import TINY_ARCHITECTURES, build_tiny_model


class FakeLegacyModel(torch.nn.Module):
    """A stand-in for a model of a release before the rename (or remote code): its forward takes past_key_values."""

    def forward(self, input_ids, past_key_values=None, use_cache=None):
        return input_ids


@pytest.mark.parametrize("arch", TINY_ARCHITECTURES)
def test_the_keyword_is_the_one_the_models_forward_declares(arch):
    model, _ = build_tiny_model(arch)
    declared = inspect.signature(type(model).forward).parameters
    assert cache_keyword(model) == (RENAMED if RENAMED in declared else LEGACY)
    assert cache_keyword(FakeLegacyModel()) == LEGACY


@pytest.mark.parametrize("arch", ["qwen2", "gemma4"])
def test_a_forward_given_the_cache_by_keyword_fills_it_and_hands_it_back_without_a_deprecation_warning(arch):
    model, _ = build_tiny_model(arch)
    ids = torch.tensor([[5, 6, 7, 8]])
    cache = DynamicCache(config=model.config)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        with torch.inference_mode():
            first = model(input_ids=ids[:, :3], **cache_kwargs(model, cache), use_cache=True)
            assert returned_cache(first) is cache and cache.get_seq_length() == 3
            step = model(input_ids=ids[:, 3:], **cache_kwargs(model, cache), use_cache=True)
            whole = model(input_ids=ids, use_cache=False)
    assert cache.get_seq_length() == 4
    # The cached step reads the three cached positions: its logits are the full forward's last row.
    torch.testing.assert_close(step.logits[0, -1], whole.logits[0, -1], rtol=1e-4, atol=1e-4)
