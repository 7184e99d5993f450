"""What a benchmark ran on: the CPU model, its instruction-set flags that decide the kernels (avx2, avx512f,
avx512_bf16, amx), the core count and the load average, printed beside every timing."""
from __future__ import annotations

import os

from backends.cpu import RELEVANT_FLAGS, cpu_info, relevant_flags


def cpu_summary() -> str:
    """One line, e.g. 'cpu: AMD EPYC | flags: avx2 avx512f avx512_bf16 | 2 cores | load 1.9 1.5 1.2' (Linux)."""
    model, flags = cpu_info()
    present = " ".join(relevant_flags(flags)) or "none of " + " ".join(RELEVANT_FLAGS)
    load = " ".join(f"{value:.1f}" for value in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    return f"cpu: {model} | flags: {present} | {os.cpu_count()} cores | load {load}"
