"""Two directions of the embedded model through one weight cache on the real vLLM capture path: each gets an engine
built with its own calibrated heads (the load key holds them) and drafts with them; a stream of a direction already
served reuses its engine; the other direction's engine could not have served it."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from agents.systems.config import AlignAttConfig  # noqa: E402
from agents.systems.llm import AlignAttTranslator, resolve_heads  # noqa: E402
from backends.choice import lm_load  # noqa: E402
from common.stream import SourceWord  # noqa: E402
from common.weights import WeightCache  # noqa: E402

pytestmark = pytest.mark.real_model

SOURCE = "The committee approved the new budget after a long debate .".split()


def test_two_directions_get_engines_capturing_their_own_heads(embedded_model_path):
    cache = WeightCache()
    configs = {lang: AlignAttConfig(model="embedded", backend="vllm", target_lang=lang, border=-2)
               for lang in ("de", "zh")}
    heads = {lang: resolve_heads(config) for lang, config in configs.items()}
    assert heads["de"].heads != heads["zh"].heads  # the calibrated sets differ, so one engine cannot serve both

    def engine(lang):
        (lm,) = cache.get((lm_load("vllm", "embedded", capture_heads=heads[lang].heads),))
        return lm

    engines = {lang: engine(lang) for lang in configs}
    try:
        assert len(cache) == 2 and engines["de"] is not engines["zh"]
        assert engine("zh") is engines["zh"] and len(cache) == 2
        for lang, config in configs.items():
            assert engines[lang].capture_heads == frozenset(heads[lang].heads)
            translator = AlignAttTranslator(engines[lang], config, heads[lang])
            translator.feed([SourceWord(word) for word in SOURCE])
            translator.flush()
            assert translator.target_text.strip()
        with pytest.raises(ValueError, match="not captured by this vLLM engine"):
            AlignAttTranslator(engines["de"], configs["zh"], heads["zh"]).feed([SourceWord(w) for w in SOURCE])
    finally:
        for lm in engines.values():
            lm.close()
