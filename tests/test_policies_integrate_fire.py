"""Tests for policies.integrate_fire: fire counts, fire frames, CIF weights and the streaming accumulator."""
from __future__ import annotations

import pytest
import torch

from policies.integrate_fire import IntegrateAndFire, fire_frames, rescale_to_counts, segment_weights


def test_hand_example() -> None:
    alpha = torch.tensor([0.3, 0.5, 0.4, 0.9, 0.2])  # running sums 0.3 0.8 1.2 2.1 2.3
    assert fire_frames(alpha, 2).tolist() == [2, 3]
    weights = segment_weights(alpha, 2)
    expected = torch.tensor([[0.3, 0.5, 0.2, 0.0, 0.0],
                             [0.0, 0.0, 0.2, 0.9, 0.2]])  # the last segment also takes the 0.3 left at the end
    assert torch.allclose(weights, expected, atol=1e-6)
    accumulator = IntegrateAndFire()
    pushes = [accumulator.push(a) for a in alpha.tolist()]
    assert [len(completed) for completed, _ in pushes] == [0, 0, 1, 1, 0]
    assert pushes[2][0] == [pytest.approx(0.2)] and pushes[2][1] == pytest.approx(0.2)
    assert accumulator.finish() is True and accumulator.fires == 3  # frame 4 arrived after the last fire


def test_yield_count_equals_sum_of_rescaled_scores() -> None:
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        frames = int(torch.randint(5, 80, (1,), generator=generator))
        count = int(torch.randint(1, frames, (1,), generator=generator))
        alpha = torch.sigmoid(3 * torch.randn(1, frames, generator=generator))
        rescaled = rescale_to_counts(alpha, torch.tensor([count]))[0]
        assert float(rescaled.sum()) == pytest.approx(count, rel=1e-5)
        running = torch.cumsum(rescaled.double(), 0)
        fired = sum(1 for n in range(1, count + 1) if bool((running >= n - 1e-4).any()))
        assert fired == count  # the running sum reaches every level 1..count within the input
        frames_fired = fire_frames(rescaled, count)
        assert len(frames_fired) == count and bool((frames_fired[1:] >= frames_fired[:-1]).all())
        weights = segment_weights(rescaled, count)
        assert torch.allclose(weights.sum(0), rescaled, atol=1e-4)  # every frame's score is spent exactly
        assert torch.allclose(weights.sum(1), torch.ones(count), atol=1e-3)


def test_streaming_accumulator_fires_where_the_batch_rule_does() -> None:
    generator = torch.Generator().manual_seed(1)
    alpha = torch.sigmoid(2 * torch.randn(300, generator=generator))
    accumulator = IntegrateAndFire()
    streamed = [t for t, a in enumerate(alpha.tolist()) for _ in accumulator.push(a)[0]]
    assert streamed == fire_frames(alpha, len(streamed)).tolist()
    assert len(streamed) == int(alpha.sum())


def test_rescaling_ignores_padding() -> None:
    alpha = torch.tensor([[0.5, 0.5, 0.9, 0.9]])
    rescaled = rescale_to_counts(alpha, torch.tensor([3]), torch.tensor([[1.0, 1.0, 0.0, 0.0]]))
    assert rescaled.tolist() == [[1.5, 1.5, 0.0, 0.0]]


def test_scores_outside_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        IntegrateAndFire().push(1.7)


def test_segment_weights_are_differentiable() -> None:
    alpha = torch.tensor([0.4, 0.7, 0.6, 0.3], requires_grad=True)
    states = torch.randn(4, 3)
    (segment_weights(alpha, 2) @ states).sum().backward()
    assert alpha.grad is not None and float(alpha.grad.abs().sum()) > 0
