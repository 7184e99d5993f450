"""`python -m without_torch ARGS`: our `simulstream` command in a process that cannot import torch, as in the CPU
container image (docker/requirements-cpu.txt has no torch); tests/test_submission_path.py serves the CPU preset so."""
import sys

sys.modules["torch"] = None  # `import torch` raises ModuleNotFoundError; transformers reports it unavailable

from agents.simulstream_cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
