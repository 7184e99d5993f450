"""Two directions of the embedded model through one weight cache on the real vLLM capture path: the engine is built
capturing the heads of every direction the model has (what the speech agent asks for), so one engine serves en-de
and en-zh, each drafting with its own calibrated heads; an engine built with en-de's heads alone could not."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from agents.systems.config import AlignAttConfig  # noqa: E402
from agents.systems.llm import AlignAttTranslator, resolve_heads  # noqa: E402
from backends.choice import lm_weights  # noqa: E402
from backends.heads import every_direction_heads  # noqa: E402
from common.stream import SourceWord  # noqa: E402
from common.weights import WeightCache  # noqa: E402

pytestmark = pytest.mark.real_model

SOURCE = "The committee approved the new budget after a long debate .".split()


def test_one_engine_capturing_every_direction_serves_each_with_its_own_heads(embedded_model_path):
    configs = {lang: AlignAttConfig(model="embedded", backend="vllm", target_lang=lang, border=-2)
               for lang in ("de", "zh")}
    heads = {lang: resolve_heads(config) for lang, config in configs.items()}
    assert heads["de"].heads != heads["zh"].heads  # the calibrated sets differ
    every = every_direction_heads("embedded", 8)
    assert all(set(head_set.heads) <= set(every) for head_set in heads.values())

    cache = WeightCache()
    (engine,) = cache.get((lm_weights("vllm", "embedded", capture_heads=every),))
    (again,) = cache.get((lm_weights("vllm", "embedded", capture_heads=every),))
    (de_only,) = cache.get((lm_weights("vllm", "embedded", capture_heads=heads["de"].heads),))
    try:
        assert again is engine and de_only is not engine and len(cache) == 2
        for lang, config in configs.items():
            translator = AlignAttTranslator(engine, config, heads[lang])
            translator.feed([SourceWord(word) for word in SOURCE])
            translator.flush()
            assert translator.target_text.strip()
        with pytest.raises(ValueError, match="not captured by this vLLM engine"):
            AlignAttTranslator(de_only, configs["zh"], heads["zh"]).feed([SourceWord(w) for w in SOURCE])
    finally:
        engine.close()
        de_only.close()
