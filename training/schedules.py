"""Schedules over training progress: the reward curriculum and the learning rate.

**Reward curriculum** (SpatialCORE's optional set-up): an accuracy-only warm phase, then the
grounding reward without confidence weighting, then the full reward. `CurriculumReward` is a
reward function (TRL signature, picklable, stable `__name__`) that delegates to the phase's reward
according to `trainer_state.global_step / trainer_state.max_steps` (TRL passes `trainer_state` to
every reward), and reports the phase as `curriculum/phase` through `log_metric`.

**Learning rate** (paper Table 4): cosine decay to a minimum of 5e-6 after a linear warm-up over 5%
of the steps. transformers implements it (`lr_scheduler_type: cosine_with_min_lr`,
`lr_scheduler_kwargs: {min_lr: 5.0e-6}`, `warmup_steps: 0.05`); `cosine_with_min_lr` states the
same curve as a pure function, and `lr_schedule_arguments` gives the recipe keys.

>>> round(cosine_with_min_lr(0, 100, 5e-5), 8), round(cosine_with_min_lr(5, 100, 5e-5), 8)
(0.0, 5e-05)
>>> round(cosine_with_min_lr(100, 100, 5e-5), 8)
5e-06
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from training.rewards import SpatialCoreConfig, get_spatialcore_reward

MIN_LEARNING_RATE = 5e-6
WARMUP_RATIO = 0.05
CURRICULUM_PHASES = ("accuracy", "grounding", "full")


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
    min_lr: float = MIN_LEARNING_RATE, warmup_ratio: float = WARMUP_RATIO
) -> dict[str, Any]:
    """`GRPOConfig` / `SFTConfig` keys of the paper's schedule.

    >>> lr_schedule_arguments()["lr_scheduler_type"]
    'cosine_with_min_lr'
    """
    return {
        "lr_scheduler_type": "cosine_with_min_lr",
        "lr_scheduler_kwargs": {"min_lr": min_lr},
        "warmup_steps": warmup_ratio,
    }


def curriculum_phase(progress: float, boundaries: Sequence[float]) -> int:
    """Index of the phase at `progress` (share of training done) given the phases' end points.

    >>> [curriculum_phase(p, [0.1, 0.3]) for p in (0.0, 0.1, 0.2, 0.3, 0.9)]
    [0, 1, 1, 2, 2]
    """
    for index, boundary in enumerate(boundaries):
        if progress < boundary:
            return index
    return len(boundaries)


class CurriculumReward:
    """A reward that switches between phase rewards as training progresses.

    Args:
        phase_rewards (`Sequence[Callable]`): one reward function per phase, in order.
        boundaries (`Sequence[float]`): end of each phase but the last, as shares of `max_steps`
            (increasing, in (0, 1)).
        name (`str`, *optional*, defaults to `"spatialcore_curriculum_reward"`): `__name__` (TRL log key).

    >>> reward = CurriculumReward([lambda completions, **kw: [0.0], lambda completions, **kw: [1.0]], [0.5])
    >>> class State:
    ...     global_step, max_steps = 7, 10
    >>> reward(["x"], trainer_state=State())
    [1.0]
    """

    def __init__(
        self,
        phase_rewards: Sequence[Callable],
        boundaries: Sequence[float],
        name: str = "spatialcore_curriculum_reward",
    ):
        boundaries = [float(value) for value in boundaries]
        if len(phase_rewards) != len(boundaries) + 1:
            raise ValueError(f"{len(phase_rewards)} phase rewards need {len(phase_rewards) - 1} boundaries")
        if any(not 0.0 < value < 1.0 for value in boundaries) or boundaries != sorted(boundaries):
            raise ValueError(f"curriculum boundaries must increase within (0, 1), got {boundaries}")
        self.phase_rewards = list(phase_rewards)
        self.boundaries = boundaries
        self.__name__ = name

    def phase_at(self, trainer_state: Any) -> int:
        """The active phase for a `TrainerState` (phase 0 without one)."""
        if trainer_state is None or not getattr(trainer_state, "max_steps", 0):
            return 0
        return curriculum_phase(trainer_state.global_step / trainer_state.max_steps, self.boundaries)

    def __call__(self, completions, **kwargs) -> list[float | None]:
        phase = self.phase_at(kwargs.get("trainer_state"))
        log_metric = kwargs.get("log_metric")
        if log_metric is not None:
            log_metric("curriculum/phase", float(phase))
        return self.phase_rewards[phase](completions, **kwargs)


def spatialcore_curriculum_reward(
    boundaries: Sequence[float] = (0.1, 0.3), base: SpatialCoreConfig | None = None
) -> CurriculumReward:
    """SpatialCORE's curriculum: answer only, then grounding without confidence, then the full reward.

    Args:
        boundaries (`Sequence[float]`, *optional*, defaults to `(0.1, 0.3)`): ends of the first two phases
            as shares of the run.
        base ([`SpatialCoreConfig`], *optional*): constants of the full reward.

    >>> spatialcore_curriculum_reward().__name__
    'spatialcore_curriculum_reward'
    """
    base = base or SpatialCoreConfig()
    fields = {name: getattr(base, name) for name in base.__dataclass_fields__}
    accuracy_only = SpatialCoreConfig(
        **{**fields, "format_weight": 0.0, "spatial_weight": 0.0, "attempt_bonus": 0.0}
    )
    no_confidence = SpatialCoreConfig(**{**fields, "use_confidence": False})
    phases = [
        get_spatialcore_reward(
            accuracy_only, name="spatialcore_accuracy_phase_reward", metric_prefix="spatialcore"
        ),
        get_spatialcore_reward(
            no_confidence, name="spatialcore_grounding_phase_reward", metric_prefix="spatialcore"
        ),
        get_spatialcore_reward(base, name="spatialcore_full_phase_reward", metric_prefix="spatialcore"),
    ]
    return CurriculumReward(phases, boundaries)
