"""`backend: vllm` in a config is all it takes: the same AlignAtt and wait-k translators, built by `from_config`
as the SimulEval and simulstream agents build them, emit exactly what they emit on the transformers backend."""
import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

from agents.systems.config import AlignAttConfig, WaitkConfig  # noqa: E402
from agents.systems.llm import AlignAttTranslator, WaitkTranslator  # noqa: E402
from backends.heads import HeadSet, save_heads  # noqa: E402
from backends.vllm.lm import VLLMCausalLM, refuse_capture_under_cuda_graphs  # noqa: E402
from common.config import ConfigError  # noqa: E402
from common.stream import SourceWord  # noqa: E402
from observed import observe

WORDS = "the committee approved the new budget for schools and hospitals after a long debate".split()


def stream(translator) -> list:
    translator.reset()
    # Word i ends at i seconds and is fed at i + 0.5: the newest word is not yet accessible (hold-back 1 s).
    emissions = [translator.feed([SourceWord(word, float(i))], now=i + 0.5, hold_back=1.0)
                 for i, word in enumerate(WORDS)]
    return emissions + [translator.flush()]


def test_backend_knob_selects_vllm_and_decisions_match_transformers(tiny_vllm_checkpoint, tmp_path):
    path = str(tiny_vllm_checkpoint("gemma3"))
    heads_file = tmp_path / "heads.json"
    save_heads(HeadSet(((1, 0), (3, 2), (5, 1)), (0.5, 0.4, 0.3), "tiny-gemma3", "en-de"), heads_file)
    knobs = dict(model=path, heads=str(heads_file), top_k_heads=3, border=0, median_width=3, max_new_tokens=6,
                 final_max_new_tokens=12)
    on_hf = AlignAttTranslator.from_config(AlignAttConfig(**knobs, backend="hf"))
    on_vllm = AlignAttTranslator.from_config(AlignAttConfig(**knobs, backend="vllm"))
    seen = {on_vllm: observe(on_vllm), on_hf: observe(on_hf)}
    try:
        assert isinstance(on_vllm.lm, VLLMCausalLM)
        assert on_vllm.lm.capture_heads == {(1, 0), (3, 2), (5, 1)}
        assert stream(on_vllm) == stream(on_hf)
        scans = [[(step.scan.accepted_tokens, [d.source_word for d in step.scan.decisions])
                  for step in seen[translator].steps if step.scan] for translator in (on_vllm, on_hf)]
        assert scans[0] == scans[1] and len(scans[0]) == len(WORDS) - 1
        assert {accepted for accepted, _ in scans[0]} - {0, 6}, "some drafts are cut inside, not all or nothing"
        waitk_knobs = dict(model=path, k=2, max_new_tokens=6, final_max_new_tokens=12)
        waitk = WaitkTranslator(on_vllm.lm, WaitkConfig(**waitk_knobs, backend="vllm"))  # no capture needed
        assert stream(waitk) == stream(WaitkTranslator.from_config(WaitkConfig(**waitk_knobs, backend="hf")))
    finally:
        on_vllm.lm.close()


def test_unknown_backend_and_int8_on_vllm_are_config_errors():
    with pytest.raises(ConfigError, match="backend must be one of hf, vllm"):
        AlignAttConfig(backend="vlm").validate()
    with pytest.raises(ConfigError, match="with backend vllm use float32"):
        WaitkConfig(backend="vllm", model_dtype="int8").validate()


def test_capture_under_cuda_graphs_is_refused_clearly_until_it_is_verified():
    with pytest.raises(ValueError, match="capture under CUDA graphs is not supported yet.*enforce_eager=True.*"
                                         "capture_with_cuda_graphs=True"):
        refuse_capture_under_cuda_graphs(((1, 0),), enforce_eager=False, cuda=True)
    refuse_capture_under_cuda_graphs(((1, 0),), enforce_eager=False, cuda=True, opted_in=True)  # make gpu-check
    refuse_capture_under_cuda_graphs(((1, 0),), enforce_eager=True, cuda=True)  # eager CUDA engine: captures
    refuse_capture_under_cuda_graphs(((1, 0),), enforce_eager=False, cuda=False)  # compiled on CPU: no graphs
    refuse_capture_under_cuda_graphs(None, enforce_eager=False, cuda=True)  # a plain engine may use graphs
