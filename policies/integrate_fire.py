"""Integrate-and-fire segmentation for STAR and CIF: scores α_t in [0, 1] are accumulated and a segment ends
("fires") each time the sum crosses the threshold β (the remainder carries over). One place for the math:
training (scores rescaled to the target length), CIF's per-segment weights, and the streaming accumulator.

With running sums c_t = α_1 + ... + α_t (c_0 = 0), the n-th fire happens at the first frame t with c_t ≥ nβ, and
frame t gives segment n the share  w[n, t] = max(0, min(c_t, nβ) − max(c_{t−1}, (n−1)β)).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

# Running sums are floats: a sum rescaled to exactly L may land at L - 1e-7. Crossing within this of the threshold
# counts as crossing it, so rescaled scores fire exactly L times.
FIRE_TOLERANCE = 1e-4


def rescale_to_counts(alpha: torch.Tensor, counts: torch.Tensor, mask: torch.Tensor | None = None,
                      threshold: float = 1.0) -> torch.Tensor:
    """α̃ = β·n*·α / Σα per row (the paper's eq. 9): scores [batch, frames] whose valid frames sum to
    `threshold * counts`; padded frames (mask 0) become 0."""
    if mask is not None:
        alpha = alpha * mask
    total = alpha.sum(dim=-1, keepdim=True).clamp_min(1e-6)
    return alpha * (threshold * counts.to(alpha.dtype).unsqueeze(-1) / total)


def fire_frames(alpha: torch.Tensor, count: int, threshold: float = 1.0) -> torch.Tensor:
    """Frame index of each of the first `count` fires of one row of scores [frames] (long [count]). Fires the
    running sum does not reach happen at the last frame (the end of the input forces them)."""
    running = torch.cumsum(alpha.detach().double(), dim=0)
    levels = threshold * torch.arange(1, count + 1, dtype=torch.float64, device=alpha.device) - FIRE_TOLERANCE
    return torch.searchsorted(running, levels).clamp_max(alpha.shape[0] - 1)


def segment_weights(alpha: torch.Tensor, count: int, threshold: float = 1.0) -> torch.Tensor:
    """CIF's weights [count, frames]: row n holds the share of each frame's score that integrates into segment n
    (differentiable in α). The last row also takes any score left after the last full segment, as the forced
    final fire at the end of the input does."""
    running = torch.cumsum(alpha, dim=0)
    before = running - alpha
    lower = threshold * torch.arange(count, dtype=alpha.dtype, device=alpha.device).unsqueeze(1)
    upper = lower + threshold
    upper[-1] = torch.maximum(upper[-1], running[-1:].detach())
    return (torch.minimum(running.unsqueeze(0), upper) - torch.maximum(before.unsqueeze(0), lower)).clamp_min(0)


@dataclass
class IntegrateAndFire:
    """The streaming accumulator: `push(α_t)` splits one frame's score into the shares that complete segments
    (one per fire) and the share carried into the open segment; `finish()` says whether the open segment must be
    forced to fire at the end of the stream (it has frames)."""

    threshold: float = 1.0
    accumulated: float = 0.0  # score integrated into the open segment so far
    open_frames: int = 0  # frames pushed since the last fire
    fires: int = 0

    def reset(self) -> None:
        self.accumulated, self.open_frames, self.fires = 0.0, 0, 0

    def push(self, alpha: float) -> tuple[list[float], float]:
        """(shares of `alpha` that complete a segment, one per fire; share left in the open segment)."""
        if not 0.0 <= alpha <= 1.0 + 1e-6:
            raise ValueError(f"a segmenter score must lie in [0, 1] (a sigmoid output), got {alpha}")
        completed: list[float] = []
        left = float(alpha)
        self.open_frames += 1
        while self.accumulated + left >= self.threshold - FIRE_TOLERANCE:
            share = max(0.0, self.threshold - self.accumulated)
            completed.append(min(share, left))
            left = max(0.0, left - share)
            self.accumulated, self.open_frames, self.fires = 0.0, 0, self.fires + 1
        self.accumulated += left
        if left > FIRE_TOLERANCE and completed:
            self.open_frames = 1  # this frame also starts the next segment
        return completed, left

    def finish(self) -> bool:
        """True when frames arrived after the last fire: the end of the stream forces one more fire."""
        forced = self.open_frames > 0
        if forced:
            self.accumulated, self.open_frames, self.fires = 0.0, 0, self.fires + 1
        return forced
