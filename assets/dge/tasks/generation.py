"""Generation: every clear question of the configured task types for one scene.

Per task type, a generator seeded by ``(seed, scene, task type)`` drives the type's sampler;
each candidate spec is answered by :func:`~assets.dge.tasks.registry.evaluate_spec`, unclear
answers are dropped, the type's balance rule settles the options, and the task id is derived from
the (settled) spec, so the same spec always gets the same id and duplicates are dropped. At most
``max_tasks_per_type`` questions of a type are kept.

>>> task_id_for("scene0000_00", "room_size", {"frames": [0, 3]})
'scene0000_00/room_size/b633ec566f'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from assets.dge.tasks.answers import TaskAnswer
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.registry import DEFAULT_TASK_SETTINGS, evaluate_spec, task_type_entry
from assets.dge.tasks.sampling import CandidatePool
from assets.dge.tasks.settings import TaskSettings
from data_contracts.stable_hash import stable_int


def task_id_for(scene_id: str, task_type: str, spec: Mapping[str, Any]) -> str:
    """``<scene_id>/<task_type>/<10 hex digits of the spec's sha256>``."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{scene_id}/{task_type}/{digest}"


@dataclass
class GeneratedTask:
    """One emitted question before images are attached."""

    task_id: str
    scene_id: str
    task_type: str
    spec: dict[str, Any]
    answer: TaskAnswer
    options: list[str]
    answer_index: int | None


def generate_tasks_of_type(task_type: str, facts: SceneFacts, settings: TaskSettings) -> list[GeneratedTask]:
    """The clear questions of one task type for one scene (at most ``max_tasks_per_type``)."""
    entry = task_type_entry(task_type)
    rng = np.random.default_rng(stable_int(settings.seed, facts.scene_id, task_type))
    tasks: list[GeneratedTask] = []
    seen_ids: set[str] = set()
    for spec in entry.sampler(CandidatePool(facts, settings, rng)):
        answer = evaluate_spec(task_type, spec, facts, settings)
        if not answer.clear or (answer.options and answer.answer_option not in answer.options):
            continue
        answer = entry.balance.settle(answer, rng)
        if answer.options and answer.options != spec.get("options", answer.options):
            spec = {**spec, "options": answer.options}
        task_id = task_id_for(facts.scene_id, task_type, spec)
        if task_id in seen_ids:
            continue
        seen_ids.add(task_id)
        options = entry.balance.order(task_id, answer.options)
        index = options.index(answer.answer_option) if options else None
        tasks.append(GeneratedTask(task_id, facts.scene_id, task_type, spec, answer, options, index))
        if len(tasks) >= settings.max_tasks_per_type:
            break
    return tasks


def generate_tasks(facts: SceneFacts, settings: TaskSettings = DEFAULT_TASK_SETTINGS) -> list[GeneratedTask]:
    """Every clear question of the configured types for one scene (at most ``max_tasks_per_type`` each)."""
    return [
        task
        for task_type in settings.task_types
        for task in generate_tasks_of_type(task_type, facts, settings)
    ]
