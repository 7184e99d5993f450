"""vLLM backend: the transformers backend's drafting interface (`session(heads).draft(...)` → `Draft`) served by a
vLLM engine whose selected attention layers capture post-RoPE q/k through a custom op (docs/vllm.md).

Import `backends.vllm.lm` only where vLLM is installed (`make vllm-env`)."""
