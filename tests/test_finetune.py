"""The shared fine-tuning pieces: learning-rate schedules and the common knob checks (the training loop itself runs
in the GPE and SimulMask fine-tuning tests, through each system's recipe)."""
from __future__ import annotations

import math

import pytest

from backends.finetune.config import FinetuneKnobs, TrainingLoopKnobs
from backends.finetune.loop import learning_rate_at
from backends.finetune_gpe.config import GPEFinetuneConfig
from backends.finetune_simulmask.config import SimulMaskFinetuneConfig
from backends.star.config import StarTrainConfig
from common.config import ConfigError


def test_warmup_then_linear_decay_to_zero():
    config = FinetuneKnobs(learning_rate=1.0, warmup_steps=4, max_steps=12, lr_schedule="linear")
    rates = [learning_rate_at(step, config) for step in range(12)]
    assert rates[:4] == [0.25, 0.5, 0.75, 1.0]
    assert rates[4:] == pytest.approx([1 - i / 8 for i in range(8)])  # reaches 0 at max_steps


def test_linear_decay_stops_at_the_final_fraction_of_the_peak():
    """STAR's schedule (a tenth of the peak at max_steps) is the shared one with a floor."""
    config = TrainingLoopKnobs(learning_rate=2.0, warmup_steps=4, max_steps=12, final_lr_fraction=0.1)
    rates = [learning_rate_at(step, config) for step in range(4, 16)]
    assert rates[:8] == pytest.approx([2.0 * (1 - 0.9 * i / 8) for i in range(8)])
    assert rates[8:] == pytest.approx([0.2] * 4)  # held at the floor past max_steps
    assert StarTrainConfig().final_lr_fraction == 0.1 and FinetuneKnobs().final_lr_fraction == 0.0
    with pytest.raises(ConfigError, match="final_lr_fraction"):
        StarTrainConfig(train_tsv="x.tsv", final_lr_fraction=1.5).validate()


def test_warmup_then_inverse_square_root():
    config = FinetuneKnobs(learning_rate=2.0, warmup_steps=4, max_steps=100, lr_schedule="inverse_sqrt")
    assert [learning_rate_at(step, config) for step in range(4)] == [0.5, 1.0, 1.5, 2.0]
    for step in (4, 15, 99):
        assert learning_rate_at(step, config) == pytest.approx(2.0 * math.sqrt(4 / (step + 1)))


def test_each_system_keeps_its_papers_schedule_and_checks():
    assert GPEFinetuneConfig().lr_schedule == "linear" and GPEFinetuneConfig().accumulation == 1
    simulmask = SimulMaskFinetuneConfig()
    assert (simulmask.lr_schedule, simulmask.weight_decay, simulmask.batch_size * simulmask.accumulation) == (
        "inverse_sqrt", 0.1, 64)
    with pytest.raises(ConfigError, match="lr_schedule"):
        GPEFinetuneConfig(source_file="a", target_file="b", lr_schedule="cosine").validate()
    with pytest.raises(ConfigError, match="phi"):
        GPEFinetuneConfig(source_file="a", target_file="b", phi=-1).validate()
    with pytest.raises(ConfigError, match="alignment"):
        SimulMaskFinetuneConfig(source_file="a", target_file="b", alignment="oracle").validate()
