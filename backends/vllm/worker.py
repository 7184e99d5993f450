"""The vLLM worker that installs q/k capture right after the weights load, before profiling, compilation and
warm-up trace the model, and answers the engine's reads of the captured rows (`collective_rpc`).

Select it with `LLM(..., worker_cls="backends.vllm.worker.CaptureWorker", additional_config={CONFIG_KEY: {...}})`.
"""
from __future__ import annotations

from vllm.platforms import current_platform

from backends.vllm.observer import install_capture, read_capture

CONFIG_KEY = "simulagents_capture"  # additional_config entry: {"heads": [[layer, head], ...]}

if current_platform.is_cpu():
    from vllm.v1.worker.cpu_worker import CPUWorker as _PlatformWorker
else:
    from vllm.v1.worker.gpu_worker import Worker as _PlatformWorker


class CaptureWorker(_PlatformWorker):
    """The platform's worker plus this engine's capture buffers (held by the model instance it loads)."""

    def load_model(self, *args, **kwargs) -> None:
        super().load_model(*args, **kwargs)
        self.capture_layouts = {}
        settings = (self.vllm_config.additional_config or {}).get(CONFIG_KEY)
        if not settings:
            return
        from vllm.distributed import get_tensor_model_parallel_world_size

        if get_tensor_model_parallel_world_size() > 1:
            raise NotImplementedError(
                "q/k capture with tensor parallelism is not implemented (heads are split over ranks); run the "
                "capturing engine with tensor_parallel_size=1 (design for TP: docs/vllm.md)"
            )
        heads = [tuple(pair) for pair in settings["heads"]]
        capacity = self.vllm_config.model_config.max_model_len  # every position a request can reach
        self.capture_layouts = install_capture(self.model_runner.get_model(), heads, capacity)

    def capture_layout(self):
        return self.capture_layouts

    def read_captured_rows(self, length: int):
        return read_capture(self.model_runner.get_model(), length)
