"""AlignAtt4LLM agents for every harness, each harness imported only when its agent is asked for:

    simulstream --agent agents.alignatt4llm:Agent --config eval_configs/alignatt4llm_cpu.yaml ...   (speech cascade)
    simuleval --agent-class agents.alignatt4llm.TextAgent --config eval_configs/alignatt4llm_text_cpu.yaml ...
    simuleval --agent agents/alignatt4llm.py ...   (SimulEval's file form: TextAgent; add --agent-class
        agents.alignatt4llm.WaitkTextAgent for the baseline)

with their peers on the same models: `WaitkTextAgent` (wait-k), `LocalAgreementTextAgent` and the speech
`LocalAgreementAgent` (LocalAgreement-2 ASR + LocalAgreement MT, the IWSLT 2026 baseline's rules) and `WaitkAgent`
(wait-k on the same cascade). Path (tests/test_call_paths.py): a chunk runs agents/harness/simulstream.py
→ agents/systems/cascade.py → agents/systems/llm.py → policies/alignatt.py or backends/<runtime>/lm.py; the model
loads through common/weights.py → backends/choice.py (hf/, vllm/, llama_cpp/).
"""
from __future__ import annotations

from agents.lazy import lazy_agents


def simulstream_agents() -> dict[str, type]:
    """The speech cascade for simulstream (`Agent`, the paper's §3) and its peers on the same cascade."""
    from agents.harness.simulstream import CascadeSpeechProcessor
    from agents.systems.config import (
        CascadeConfig,
        LocalAgreementCascadeConfig,
        WaitkCascadeConfig,
    )
    from agents.systems.llm import (
        AlignAttTranslator,
        LLMTranslator,
        LocalAgreementTranslator,
        WaitkTranslator,
        resolve_heads,
    )
    from backends.choice import lm_weights
    from backends.heads import every_direction_heads

    class LLMCascadeAgent(CascadeSpeechProcessor):
        """The cascade with an LLM segment translator, `translator_class(lm, config)`, on a runtime that captures
        no attention (the peers: wait-k, LocalAgreement)."""

        translator_class: type[LLMTranslator]

        @classmethod
        def capture_heads(cls, config):
            """The attention heads the LLM must capture for this agent's policy (None: no capture)."""
            return

        @classmethod
        def segment_model_load(cls, config):
            return lm_weights(config.backend, config.model, capture_heads=cls.capture_heads(config),
                           **config.lm_options())

        @classmethod
        def segment_translator(cls, config, lm) -> LLMTranslator:
            """The MT policy the cascade runs on each source segment."""
            return cls.translator_class(lm, config)

    class Agent(LLMCascadeAgent):
        """The chunk-synchronous cascade of the paper (§3): ASR first, then one AlignAtt MT step, append-only."""

        config_class = CascadeConfig
        default_preset = "alignatt4llm_cpu"  # eval_configs/alignatt4llm_cpu.yaml: what runs with no --config

        @classmethod
        def check_config(cls, config: CascadeConfig) -> None:
            super().check_config(config)
            resolve_heads(config)  # a missing head set for the direction fails here, in milliseconds

        @classmethod
        def capture_heads(cls, config: CascadeConfig):
            """The direction's heads and those of every other direction the model has a default set for, so that one
            vLLM engine serves a server whose streams switch direction (`--tgt-lang`); a `heads:` file serves every
            direction."""
            own = resolve_heads(config).heads
            if config.heads:
                return own
            return tuple(sorted({*own, *every_direction_heads(config.model, config.top_k_heads)}))

        @classmethod
        def segment_translator(cls, config: CascadeConfig, lm) -> LLMTranslator:
            return AlignAttTranslator(lm, config, resolve_heads(config))

    class LocalAgreementAgent(LLMCascadeAgent):
        """The peer on the same recogniser and LLM: whisper_streaming's LocalAgreement-2 commit on the recogniser's
        words (`source_frontier: agreement`) feeding LocalAgreement over greedy re-translation (the IWSLT 2026
        baseline's MT rule), chunk-synchronous, append-only."""

        config_class = LocalAgreementCascadeConfig
        default_preset = "local_agreement_cpu"
        translator_class = LocalAgreementTranslator

    class WaitkAgent(LLMCascadeAgent):
        """The wait-k peer on the same recogniser, transcript commit and LLM: after k accessible source words, one
        target word per accessible word (the naive schedule every simultaneous system is compared with)."""

        config_class = WaitkCascadeConfig
        default_preset = "waitk_cpu"
        translator_class = WaitkTranslator

    return {"Agent": Agent, "LocalAgreementAgent": LocalAgreementAgent, "WaitkAgent": WaitkAgent}


def simuleval_agents() -> dict[str, type]:
    """SimulEval text-to-text: the gold source word by word, every read word accessible; the peers share the LLM
    backend and prompt."""
    from agents.harness.simuleval import StreamingTextAgent
    from agents.systems.config import AlignAttConfig, LocalAgreementConfig, WaitkConfig
    from agents.systems.llm import (
        AlignAttTranslator,
        LocalAgreementTranslator,
        WaitkTranslator,
    )

    class TextAgent(StreamingTextAgent):
        """AlignAtt policy over a decoder-only LLM (paper §4) for SimulEval text-to-text."""

        config_class, translator_class = AlignAttConfig, AlignAttTranslator
        default_preset = "alignatt4llm_text_cpu"

    class WaitkTextAgent(StreamingTextAgent):
        """Wait-k on the same LLM backend and prompt, for comparison."""

        config_class, translator_class = WaitkConfig, WaitkTranslator
        default_preset = "waitk_text_cpu"

    class LocalAgreementTextAgent(StreamingTextAgent):
        """LocalAgreement-n over greedy re-translation (the IWSLT 2026 baseline's MT rule) on the same LLM backend
        and prompt, for comparison."""

        config_class, translator_class = LocalAgreementConfig, LocalAgreementTranslator
        default_preset = "local_agreement_text_cpu"

    return {"TextAgent": TextAgent, "WaitkTextAgent": WaitkTextAgent,
            "LocalAgreementTextAgent": LocalAgreementTextAgent}


__getattr__, __dir__ = lazy_agents(__name__, {
    "Agent": simulstream_agents, "LocalAgreementAgent": simulstream_agents, "WaitkAgent": simulstream_agents,
    "TextAgent": simuleval_agents, "WaitkTextAgent": simuleval_agents, "LocalAgreementTextAgent": simuleval_agents,
}, simuleval_agent="TextAgent")
