"""Loads CTranslate2 (faster-whisper's runtime) before torch and llama.cpp, so that the recogniser keeps the OpenMP
runtime it ships instead of sharing theirs: shared, every llama.cpp step after a Whisper call ran 1.5x slower.

torch (`libtorch_global_deps`) and llama-cpp-python load their libraries RTLD_GLOBAL, so the `libgomp.so.1` they
link enters the process's global symbol scope, and a CTranslate2 loaded after them binds its OpenMP calls to that
libgomp rather than to its own copy (`LD_DEBUG=bindings` shows it; tests/test_openmp_runtimes.py). In one runtime the
two libraries' teams count more threads than the cores, which is where libgomp stops spinning at its barriers; a
llama.cpp step (a parallel region per graph split, and q/k capture splits the graph at every captured node) then
cost 65-80 ms instead of 44-48 ms after each Whisper call on a 2-core Intel Xeon (benchmarks/openmp_runtimes.py).
A longer spin (`GOMP_SPINCOUNT=3000000`, ten times libgomp's default) is not set: its gain in one pair of runs was
within the spread of four more (docs/cpu_low_latency.md).
"""
from __future__ import annotations

import importlib.util
import sys

# Libraries whose import loads a libgomp into the process.
OPENMP_LIBRARIES = ("ctranslate2", "torch", "llama_cpp")


def load_ctranslate2_first() -> None:
    """Import CTranslate2, where it is installed and no OpenMP library is loaded yet. Called when this package is
    imported (agents and backends); a process that imported torch itself before the package keeps the shared runtime."""
    if not any(name in sys.modules for name in OPENMP_LIBRARIES) and importlib.util.find_spec("ctranslate2"):
        import ctranslate2  # noqa: F401
