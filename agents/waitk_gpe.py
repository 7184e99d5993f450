"""Group-position-encoding wait-k agents for every harness, each harness imported only when its agent is asked for:

    simuleval --agent-class agents.waitk_gpe.TextAgent --config eval_configs/waitk_gpe_text_cpu.yaml ...
    simulstream --agent agents.waitk_gpe:Agent --config eval_configs/waitk_gpe_cpu.yaml ...   (speech cascade)
    simuleval --agent agents/waitk_gpe.py ...   (SimulEval's file form: TextAgent)

Path (tests/test_call_paths.py): agents/harness/simulstream.py → agents/systems/cascade.py →
agents/systems/word_waitk.py (GPETranslator, agents/systems/gpe.py) → policies/waitk.py or backends/streaming_masks/.
"""
from __future__ import annotations

from agents.lazy import lazy_agents


def simulstream_agents() -> dict[str, type]:
    """The project's recogniser with word times and transcript commit (agents.systems.cascade) feeding the GPE
    streaming decoder."""
    from agents.harness.simulstream import CascadeSpeechProcessor
    from agents.systems.gpe import GPETranslator
    from agents.systems.gpe_config import GPECascadeConfig
    from backends.streaming_masks.loading import load_streaming_lm
    from common.weights import WeightLoad

    class Agent(CascadeSpeechProcessor):
        """ASR words (accessible once ended `hold_back` seconds ago) are read into the GPE cache; committed
        sentences are finished segments."""

        config_class = GPECascadeConfig
        default_preset = "waitk_gpe_cpu"  # eval_configs/waitk_gpe_cpu.yaml: what runs when no --config is given

        @classmethod
        def segment_model_load(cls, config: GPECascadeConfig):
            # The languages are arguments: the loaded LM carries its direction's prompt template.
            return WeightLoad.of(load_streaming_lm, config.model, config.source_lang, config.target_lang,
                                 dtype=config.model_dtype, device=config.model_device, adapter=config.adapter)

        @classmethod
        def segment_translator(cls, config: GPECascadeConfig, lm) -> GPETranslator:
            return GPETranslator(lm, config)

    return {"Agent": Agent}


def simuleval_agents() -> dict[str, type]:
    """SimulEval text-to-text: the gold source arrives one word per read, one target word is written per step of
    the schedule."""
    from agents.harness.simuleval import StreamingTextAgent
    from agents.systems.gpe import GPETranslator
    from agents.systems.gpe_config import GPEConfig

    class TextAgent(StreamingTextAgent):
        """Word-level wait-k over a group-position-encoding LLM, decoding without re-encoding."""

        config_class, translator_class = GPEConfig, GPETranslator
        default_preset = "waitk_gpe_text_cpu"  # what runs when no --config is given

    return {"TextAgent": TextAgent}


__getattr__, __dir__ = lazy_agents(__name__, {"Agent": simulstream_agents, "TextAgent": simuleval_agents},
                                   simuleval_agent="TextAgent")
