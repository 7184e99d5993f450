"""What a benchmark ran on: the CPU model, its instruction-set flags that decide the kernels (avx2, avx512f,
avx512_bf16, amx), the core count and the load average, printed beside every timing (`backends.cpu.cpu_summary`,
which `make demo` prints too; the benchmarks import it from here)."""
from __future__ import annotations

from backends.cpu import cpu_summary

__all__ = ["cpu_summary"]
