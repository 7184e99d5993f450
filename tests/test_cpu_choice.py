"""The CPU-dependent choices of backends.cpu: flags read from /proc/cpuinfo (x86 and aarch64 layouts) and the weight
format that follows (bf16 only where bf16 runs in hardware), and `gguf_weights: auto` accepted by the configs."""
from __future__ import annotations

import pytest

from agents.systems.config import CascadeConfig
from backends.cpu import cpu_info, has_native_bf16, preferred_gguf_weights
from common.config import ConfigError, build_config

X86_AVX2 = "processor\t: 0\nmodel name\t: AMD EPYC 7B12\nflags\t\t: fpu sse2 avx avx2 fma\n\nprocessor\t: 1\n"
X86_BF16 = "processor\t: 0\nmodel name\t: Intel Xeon\nflags\t\t: avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
ARM_BF16 = "processor\t: 0\nFeatures\t: fp asimd sve i8mm bf16\nCPU part\t: 0xd40\n"


@pytest.mark.parametrize("text, model, native, weights", [
    (X86_AVX2, "AMD EPYC 7B12", False, "q8_0"),
    (X86_BF16, "Intel Xeon", True, "bf16"),
    (ARM_BF16, "0xd40", True, "bf16"),
])
def test_flags_decide_the_weight_format(tmp_path, text, model, native, weights):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    found_model, flags = cpu_info(cpuinfo)
    assert found_model == model
    assert has_native_bf16(flags) is native
    assert preferred_gguf_weights(flags) == weights


def test_without_proc_cpuinfo_the_choice_is_the_portable_one(tmp_path):
    model, flags = cpu_info(tmp_path / "absent")
    assert flags == frozenset() and model
    assert preferred_gguf_weights(flags) == "q8_0"


def test_auto_weights_are_accepted_only_as_a_llama_cpp_choice():
    build_config(CascadeConfig, {"backend": "llama_cpp", "gguf_weights": "auto"})
    with pytest.raises(ConfigError, match="gguf_weights must be empty, auto or one of"):
        build_config(CascadeConfig, {"backend": "llama_cpp", "gguf_weights": "q3"})
    with pytest.raises(ConfigError, match="gguf_weights applies to backend llama_cpp only"):
        build_config(CascadeConfig, {"backend": "hf", "gguf_weights": "auto"})


def test_a_build_without_bf16_kernels_vetoes_bf16():
    """A portable AVX2 llama.cpp build (the CPU image's) on an AVX512-BF16 machine: q8_0, not emulated bf16."""
    flags = frozenset({"avx2", "avx512f", "avx512_bf16"})
    assert preferred_gguf_weights(flags, build_features=frozenset({"AVX", "AVX2", "FMA", "F16C"})) == "q8_0"
    assert preferred_gguf_weights(flags, build_features=frozenset({"AVX2", "AVX512", "AVX512_BF16"})) == "bf16"
    assert preferred_gguf_weights(frozenset({"avx2"}), build_features=frozenset({"AVX512_BF16"})) == "q8_0"


def test_the_installed_llama_cpp_reports_its_build_features():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import build_features

    features = build_features()
    assert features and all(name and name.isupper() and " " not in name for name in features), features
