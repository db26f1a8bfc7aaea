"""The learning-rate schedule: the pure curve against transformers' scheduler."""

from __future__ import annotations

import pytest
import torch
from transformers import get_scheduler

from training.lr_schedule import cosine_with_min_lr, lr_schedule_arguments


def test_pure_schedule_equals_the_transformers_scheduler():
    total, peak = 200, 5e-5
    arguments = lr_schedule_arguments()
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    scheduler = get_scheduler(
        arguments["lr_scheduler_type"],
        optimizer,
        num_warmup_steps=int(arguments["warmup_steps"] * total),
        num_training_steps=total,
        scheduler_specific_kwargs=arguments["lr_scheduler_kwargs"],
    )
    for step in range(total):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(
            cosine_with_min_lr(step, total, peak), rel=1e-6
        )
        optimizer.step()
        scheduler.step()


def test_schedule_shape():
    total, peak = 100, 5e-5
    values = [cosine_with_min_lr(step, total, peak) for step in range(total + 1)]
    assert values[5] == pytest.approx(peak)  # 5% warm-up reaches the peak
    assert values[:6] == sorted(values[:6]) and values[5:] == sorted(values[5:], reverse=True)
    assert min(values[5:]) == pytest.approx(5e-6)
