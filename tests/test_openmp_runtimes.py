"""CTranslate2 keeps the OpenMP runtime it ships when the process imports this package first, and binds to torch's
libgomp when torch came first (backends/openmp.py): read from the dynamic linker's own record of its bindings."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# glibc's LD_DEBUG=bindings line: "binding file A [0] to B [0]: normal symbol `GOMP_parallel'"
BINDING = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `((?:GOMP|omp)_\w+)")


def openmp_libraries_ctranslate2_binds_to(imports: str, tmp_path: Path) -> set[Path]:
    """The libraries CTranslate2's OpenMP symbols resolve to in a fresh interpreter that runs `imports`."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "ld"
    env = {**os.environ, "LD_BIND_NOW": "1", "LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(log)}
    subprocess.run([sys.executable, "-c", imports], cwd=ROOT, env=env, check=True, timeout=300,
                   capture_output=True)
    bound = set()
    for path in tmp_path.glob("ld.*"):
        with path.open(errors="replace") as lines:
            for line in lines:
                match = BINDING.search(line)
                if match and "libctranslate2" in Path(match.group(1)).name:
                    bound.add(Path(match.group(2)).resolve())
    return bound


def test_ctranslate2_keeps_its_own_libgomp_when_the_package_is_imported_first(tmp_path):
    import ctranslate2
    import torch

    own = Path(ctranslate2.__file__).resolve().parent.parent / "ctranslate2.libs"
    bound = openmp_libraries_ctranslate2_binds_to(
        "import agents.alignatt4llm; import torch; import llama_cpp; import ctranslate2", tmp_path / "package")
    assert bound and all(library.parent == own and library.name.startswith("libgomp") for library in bound)

    # The hazard the order avoids: torch first, and CTranslate2's OpenMP calls go to torch's libgomp.
    torch_libraries = Path(torch.__file__).resolve().parent / "lib"
    bound = openmp_libraries_ctranslate2_binds_to("import torch; import ctranslate2", tmp_path / "torch")
    assert bound and all(library.parent == torch_libraries for library in bound)

