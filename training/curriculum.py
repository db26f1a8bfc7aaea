"""SpatialCORE's reward curriculum: the reward changes with training progress.

An accuracy-only warm phase, then the grounding reward without confidence weighting, then the full
reward. `CurriculumReward` is a reward function (TRL signature, picklable, stable `__name__`) that
delegates to the phase's reward according to `trainer_state.global_step / trainer_state.max_steps`
(TRL passes `trainer_state` to every reward), and reports the phase as `curriculum/phase` through
`log_metric`. The learning-rate schedule is in `training.lr_schedule`.

>>> curriculum_phase(0.2, [0.1, 0.3])
1
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from training.rewards import SpatialCoreConfig, get_spatialcore_reward

CURRICULUM_PHASES = ("accuracy", "grounding", "full")


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
