"""Harness adapters: one module per system (`alignatt4llm`, ...), each a thin layer over a streaming translator.

Shared adapter code lives in `agents.harness`; the harness-neutral streaming contract in `agents.core`.
"""

import backends  # noqa: F401  (loads CTranslate2 before torch and llama.cpp: backends/openmp.py)
