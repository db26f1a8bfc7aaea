"""The learning-rate schedule of SpatialCORE (paper Table 4).

Cosine decay to a minimum of 5e-6 after a linear warm-up over 5% of the steps. transformers
implements it (`lr_scheduler_type: cosine_with_min_lr`, `lr_scheduler_kwargs: {min_lr_rate: 0.1}`
with the peak 5e-5, `warmup_steps: 0.05`); `cosine_with_min_lr` states the same curve as a pure
function, and `lr_schedule_arguments` gives the recipe keys. The floor is given as a rate of the
peak, not as `min_lr`: with `min_lr` transformers reads the peak from `optimizer.defaults`, which
DeepSpeed's ZeRO-3 optimizer does not have (the ZeRO-3 launch stops before the first step).

>>> round(cosine_with_min_lr(0, 100, 5e-5), 8), round(cosine_with_min_lr(5, 100, 5e-5), 8)
(0.0, 5e-05)
>>> round(cosine_with_min_lr(100, 100, 5e-5), 8)
5e-06
"""

from __future__ import annotations

import math
from typing import Any

PEAK_LEARNING_RATE = 5e-5
MIN_LEARNING_RATE = 5e-6
WARMUP_RATIO = 0.05


def cosine_with_min_lr(
    step: int,
    total_steps: int,
    peak_lr: float,
    min_lr: float = MIN_LEARNING_RATE,
    warmup_ratio: float = WARMUP_RATIO,
) -> float:
    """Learning rate at `step`: linear warm-up to `peak_lr`, then cosine decay to `min_lr`.

    Same curve as transformers' `get_cosine_with_min_lr_schedule_with_warmup` with
    `num_warmup_steps = ceil(warmup_ratio * total_steps)`.

    Args:
        step (`int`): optimizer step (0-based).
        total_steps (`int`): number of optimizer steps of the run.
        peak_lr (`float`): learning rate after warm-up.
        min_lr (`float`, *optional*, defaults to `5e-6`): floor of the cosine.
        warmup_ratio (`float`, *optional*, defaults to `0.05`): share of steps spent warming up.
    """
    warmup = math.ceil(total_steps * warmup_ratio)
    if step < warmup:
        return peak_lr * step / max(1, warmup)
    progress = (step - warmup) / max(1, total_steps - warmup)
    cosine = 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))
    return min_lr + (peak_lr - min_lr) * cosine


def lr_schedule_arguments(
    min_lr: float = MIN_LEARNING_RATE,
    warmup_ratio: float = WARMUP_RATIO,
    peak_lr: float = PEAK_LEARNING_RATE,
) -> dict[str, Any]:
    """`GRPOConfig` / `SFTConfig` keys of the paper's schedule (the floor as a rate of `peak_lr`).

    >>> arguments = lr_schedule_arguments()
    >>> arguments["lr_scheduler_type"], arguments["lr_scheduler_kwargs"]
    ('cosine_with_min_lr', {'min_lr_rate': 0.1})
    """
    return {
        "learning_rate": peak_lr,
        "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr_rate": round(min_lr / peak_lr, 12)},
        "warmup_steps": warmup_ratio,
    }
