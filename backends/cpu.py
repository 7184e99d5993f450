"""What the CPU offers (model name, the instruction-set flags that decide the kernels) and the weight format that
follows from it, so a CPU preset runs the fast kernels on whichever x86-64 or ARM machine it lands on."""
from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from pathlib import Path

# Flags that decide which kernels run: AVX2 (every x86-64 of the last decade), AVX512, and native bf16 dot products.
RELEVANT_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 (AVX512-BF16, AMX) and aarch64 ("bf16" in Features)


def cpuinfo_entries(cpuinfo: Path) -> Iterator[tuple[str, str]]:
    """(key, value) of each line of /proc/cpuinfo, stripped, in order: ("", "") is the blank line that ends each
    processor's block. Nothing where the file does not exist (macOS, Windows)."""
    if cpuinfo.is_file():
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            yield key.strip(), value.strip()


def cpu_info(cpuinfo: Path = Path("/proc/cpuinfo")) -> tuple[str, frozenset[str]]:
    """The CPU's model name and flags from /proc/cpuinfo (x86 "flags", aarch64 "Features"); ("unknown", {}) where
    there is no /proc (macOS, Windows)."""
    model, flags = "unknown", frozenset()
    for key, value in cpuinfo_entries(cpuinfo):
        if key in ("model name", "Model", "CPU part") and model == "unknown":
            model = value
        elif key in ("flags", "Features") and not flags:
            flags = frozenset(value.split())
    if model == "unknown":
        model = platform.processor() or platform.machine() or "unknown"
    return model, flags


def cpu_identity(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The CPU's generation as /proc/cpuinfo numbers it (x86: vendor, family, model, stepping, microcode, e.g.
    'AuthenticAMD family 25 model 17 stepping 1 microcode 0x1000065'; aarch64: implementer, part, revision), or None.
    A hypervisor may report every generation as 'AMD EPYC' with the same flags; these numbers still tell them apart."""
    fields: dict[str, str] = {}
    for key, value in cpuinfo_entries(cpuinfo):
        if not key and fields:  # the first processor's block ends at its blank line
            break
        fields.setdefault(key, value)
    keys = ((("vendor_id", ""), ("cpu family", "family"), ("model", "model"), ("stepping", "stepping"),
             ("microcode", "microcode")) if "vendor_id" in fields else
            (("CPU implementer", "implementer"), ("CPU part", "part"), ("CPU variant", "variant"),
             ("CPU revision", "revision")))
    parts = [f"{label} {fields[key]}".strip() for key, label in keys if fields.get(key)]
    return " ".join(parts) or None


def relevant_flags(flags: frozenset[str]) -> list[str]:
    """Those of RELEVANT_FLAGS this CPU has, in their order: what a timing or a run records beside its figures."""
    return [flag for flag in RELEVANT_FLAGS if flag in flags]


def cpu_summary() -> str:
    """One line for beside a timing, e.g. 'cpu: AMD EPYC | flags: avx2 avx512f avx512_bf16 | 2 cores | load 1.9 1.5
    1.2' (Linux): a speed measured on one kind of CPU says nothing of another."""
    model, flags = cpu_info()
    present = " ".join(relevant_flags(flags)) or "none of " + " ".join(RELEVANT_FLAGS)
    load = " ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"cpu: {model} | flags: {present} | {os.cpu_count()} cores | load {load}"


def has_native_bf16(flags: frozenset[str] | None = None) -> bool:
    """True when bf16 matrix products run in hardware; elsewhere (AVX2-only x86, older ARM) bf16 weights are
    converted on the fly and run slower than float32."""
    flags = cpu_info()[1] if flags is None else flags
    return any(flag in flags for flag in NATIVE_BF16_FLAGS)


def preferred_gguf_weights(flags: frozenset[str] | None = None, build_features: frozenset[str] | None = None) -> str:
    """The llama.cpp weight format for this CPU: bf16 with native bf16 (full precision, fast kernels), else q8_0
    (8-bit, the best-optimised quantized kernels on AVX2 and NEON, decisions closest to bf16 among quantized types).
    `build_features` (what the llama.cpp library was compiled for, e.g. {"AVX2", "AVX512_BF16"}) vetoes bf16 when the
    build has no bf16 kernels: a portable AVX2 build on an AVX512-BF16 machine runs q8_0 faster."""
    native = has_native_bf16(flags)
    if build_features is not None:
        native = native and any("BF16" in feature for feature in build_features)
    return "bf16" if native else "q8_0"
