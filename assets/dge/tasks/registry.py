"""The one registry of DGE task types, and :func:`evaluate_spec`, which answers a spec with its entry.

The entries come from the family modules, in the ``dge_tasks`` contract's order; importing this
module fails when the families do not define exactly the contract's 16 task types.

>>> list(REGISTRY) == TASK_TYPES
True
>>> REGISTRY["camera_motion"].margins[:4]
('turn_min_deg', 'turn_max_deg', 'turn_max_translation_m', 'move_min_translation_m')
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from assets.dge.tasks.answers import TaskAnswer
from assets.dge.tasks.counting import COUNTING_TASK_TYPES
from assets.dge.tasks.direction import DIRECTION_TASK_TYPES
from assets.dge.tasks.distance import DISTANCE_TASK_TYPES
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.measurement import MEASUREMENT_TASK_TYPES
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType
from assets.dge.tasks.views import VIEW_TASK_TYPES
from data_contracts.dge_tasks import TASK_TYPES

FAMILIES: tuple[tuple[TaskType, ...], ...] = (
    COUNTING_TASK_TYPES,
    MEASUREMENT_TASK_TYPES,
    DISTANCE_TASK_TYPES,
    DIRECTION_TASK_TYPES,
    VIEW_TASK_TYPES,
)


def _registry(families: tuple[tuple[TaskType, ...], ...]) -> dict[str, TaskType]:
    entries = [entry for family in families for entry in family]
    by_name = {entry.name: entry for entry in entries}
    if len(by_name) != len(entries) or set(by_name) != set(TASK_TYPES):
        names = sorted(entry.name for entry in entries)
        raise RuntimeError(f"the DGE task families define {names}; the dge_tasks contract has {TASK_TYPES}")
    return {name: by_name[name] for name in TASK_TYPES}


REGISTRY: dict[str, TaskType] = _registry(FAMILIES)
"""Every DGE task type by name, in the contract's order."""

DEFAULT_TASK_SETTINGS = TaskSettings()


def task_type_entry(task_type: str) -> TaskType:
    """The registry entry of a task type; raises ValueError for an unknown name."""
    if task_type not in REGISTRY:
        raise ValueError(f"unknown DGE task type {task_type!r}; valid: {', '.join(TASK_TYPES)}")
    return REGISTRY[task_type]


def evaluate_spec(
    task_type: str, spec: Mapping[str, Any], facts: SceneFacts, settings: TaskSettings = DEFAULT_TASK_SETTINGS
) -> TaskAnswer:
    """Compute the answer of one question spec on ``facts`` (raises ``SpecError`` for unknown ids).

    A type that needs "up" is not clear on a scan whose "up" is a guess (``facts.up_problem`` is the reason).
    """
    entry = task_type_entry(task_type)
    spec = dict(spec)
    evaluation = entry.evaluator(spec, facts, settings)
    clear, reason = evaluation.clear, evaluation.reason
    if entry.needs_up and facts.up_problem:
        clear, reason = False, facts.up_problem
    return TaskAnswer(
        task_type=task_type,
        question=entry.wording(spec, facts),
        frame_indices=evaluation.frame_indices,
        options=evaluation.options,
        answer_option=evaluation.answer_option,
        numeric_answer=evaluation.numeric_answer,
        unit=evaluation.unit,
        values=evaluation.values,
        clear=clear,
        reason=reason,
    )
