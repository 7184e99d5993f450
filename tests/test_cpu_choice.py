"""The CPU-dependent choices of backends.cpu: flags read from /proc/cpuinfo (x86 and aarch64 layouts) and the weight
format that follows (bf16 only where bf16 runs in hardware), and `gguf_weights: auto` accepted by the configs."""
from __future__ import annotations

import pytest

from agents.systems.config import CascadeConfig
from backends.cpu import cpu_info, cpu_summary, has_native_bf16, preferred_gguf_weights, relevant_flags
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



def test_the_installed_llama_cpp_does_not_multiply_with_amx():
    """`make install` builds llama.cpp without AMX: its AMX code died with 'Illegal instruction' at the first q8_0
    decode on an Intel Xeon VM with amx_tile (the whole suite stopped there)."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    from backends.llama_cpp import build_features

    assert "AMX_INT8" not in build_features(), build_features()


def test_quantized_weights_on_an_amx_build_are_refused_with_the_fix(tmp_path):
    """The session refuses before llama.cpp would die with SIGILL, and only for quantized weights on an AMX build
    (build features given, as an AMX build reports them)."""
    from backends.llama_cpp import check_no_amx_matmul

    amx_build, plain_build = frozenset({"AVX512", "AVX512_BF16", "AMX_INT8"}), frozenset({"AVX2", "AVX512"})
    with pytest.raises(RuntimeError, match=r"(?s)model.gguf holds quantized weights.*Illegal instruction.*"
                                           r"bf16.*CFLAGS='-mno-amx-tile"):
        check_no_amx_matmul("7", tmp_path / "model.gguf", amx_build)  # q8_0
    check_no_amx_matmul("32", tmp_path / "model.gguf", amx_build)  # bf16 never takes the AMX path
    check_no_amx_matmul("7", tmp_path / "model.gguf", plain_build)


def test_the_summary_printed_beside_timings_names_this_cpu_its_kernel_flags_and_cores():
    """`make demo` and every benchmark print it beside their speeds (a speed on one kind of CPU says nothing of
    another)."""
    import os

    model, flags = cpu_info()
    summary = cpu_summary()
    assert summary.startswith(f"cpu: {model} | flags: ") and f"| {os.cpu_count()} cores |" in summary
    assert all(flag in summary.split("|")[1].split() for flag in relevant_flags(flags))
