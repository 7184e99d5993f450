"""The registered capture op inside a vLLM forward pass: it takes the padding rows from vLLM's forward context
(padded graph batches carry stale positions), and outside a forward pass it writes every row inside the capacity."""
from types import SimpleNamespace

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; these tests run in .venv-vllm (make vllm-env)")

import torch  # noqa: E402
from vllm.forward_context import override_forward_context  # noqa: E402

import backends.vllm.capture_op  # noqa: E402,F401  (registers torch.ops.simulagents.capture_rows)

CAPACITY, HEAD_DIM = 8, 2


def run_op(is_padding):
    positions = torch.tensor([5, 6, 1, 2])  # the last two: a padded batch's stale positions
    rows = torch.arange(4 * 3 * HEAD_DIM, dtype=torch.float32).reshape(4, 3 * HEAD_DIM) + 1
    buffer = torch.zeros(2, CAPACITY + 1, HEAD_DIM)
    context = SimpleNamespace(is_padding=is_padding) if is_padding is not None else None
    with override_forward_context(context):
        zero = torch.ops.simulagents.capture_rows(positions, rows, torch.tensor([0, 2]), buffer)
    assert zero.item() == 0
    return rows, buffer


def test_padding_rows_of_the_forward_pass_are_not_written():
    rows, buffer = run_op(torch.tensor([False, False, True, True]))
    assert torch.equal(buffer[:, 5], rows[0].reshape(3, HEAD_DIM)[[0, 2]])
    assert torch.equal(buffer[:, 6], rows[1].reshape(3, HEAD_DIM)[[0, 2]])
    assert not buffer[:, 1:3].any(), "a padding row overwrote a real position"


def test_outside_a_forward_pass_every_row_is_written():
    rows, buffer = run_op(None)
    assert torch.equal(buffer[:, 1], rows[2].reshape(3, HEAD_DIM)[[0, 2]])
