"""The vLLM capture op's write (backends/vllm/capture_op.py): rows land at their positions, positions past the
capacity and padding rows go to the trash row, and no shape depends on data (so a CUDA graph can record it)."""
import pytest
import torch
from torch._subclasses.fake_tensor import DynamicOutputShapeException, FakeTensorMode

from backends.vllm.capture_op import write_rows

HEADS, HEAD_DIM, CAPACITY = 4, 3, 6


def reference_write(positions, rows, heads, buffer, is_padding):
    """Row by row in Python: the selected heads of each real token inside the capacity, at its position."""
    for i, position in enumerate(positions.tolist()):
        if position < CAPACITY and not (is_padding is not None and is_padding[i]):
            buffer[:, position] = rows[i].reshape(HEADS, HEAD_DIM)[heads]


@pytest.mark.parametrize("padded", [False, True])
def test_rows_land_at_their_positions_and_the_rest_in_the_trash_row(padded):
    generator = torch.Generator().manual_seed(0)
    positions = torch.tensor([3, 4, 5, 9, 1, 2])  # 9: past the capacity (a profiling run's dummy token)
    is_padding = torch.tensor([False, False, False, False, True, True]) if padded else None  # stale positions 1, 2
    rows = torch.randn(len(positions), HEADS * HEAD_DIM, generator=generator)
    heads = torch.tensor([1, 3])
    earlier = torch.randn(len(heads), CAPACITY + 1, HEAD_DIM, generator=generator)  # rows of earlier steps
    buffer, expected = earlier.clone(), earlier.clone()

    write_rows(positions, rows, heads, buffer, is_padding)
    reference_write(positions, rows, heads, expected, is_padding)

    assert torch.equal(buffer[:, :CAPACITY], expected[:, :CAPACITY])
    if padded:
        assert torch.equal(buffer[:, 1:3], earlier[:, 1:3]), "padding rows overwrote real rows"


def test_the_write_has_no_shape_that_depends_on_data():
    """Under FakeTensorMode (no shape environment) an op whose output shape depends on tensor values, the boolean
    mask the op used before, raises. A graph cannot record such an op: it needs the values on the host."""

    def boolean_mask_write(positions, rows, heads, buffer, is_padding):
        selected = rows.reshape(len(positions), -1, HEAD_DIM).index_select(1, heads)
        keep = (positions < CAPACITY) & ~is_padding
        buffer[:, positions[keep]] = selected[keep].transpose(0, 1)

    def fake_inputs(mode):
        tensors = (torch.tensor([0, 1, 9]), torch.randn(3, HEADS * HEAD_DIM), torch.tensor([0, 2]),
                   torch.zeros(2, CAPACITY + 1, HEAD_DIM), torch.tensor([False, False, True]))
        return [mode.from_tensor(t) for t in tensors]

    mode = FakeTensorMode()
    with mode:
        write_rows(*fake_inputs(mode))
    mode = FakeTensorMode()
    with pytest.raises(DynamicOutputShapeException), mode:  # the check tells the two apart
        boolean_mask_write(*fake_inputs(mode))
