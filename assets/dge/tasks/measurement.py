"""Measurements: an object's longest dimension, height, length or width, and the room's floor area.

Sizes come from an object's oriented box, whose extents are ``(length, width, height)`` with the
length the longer side of its footprint seen from above; answers are in centimetres (objects) and
square metres (the room).

>>> from assets.dge.tasks.facts import ObjectFact, SceneFacts
>>> table = ObjectFact(1, "table", np.zeros(3), np.array([1.2, 0.8, 0.75]))
>>> facts = SceneFacts("s", {1: table}, {}, {}, None)
>>> evaluate_attribute_measurement({"object_id": 1, "attribute": "width", "frames": []}, facts, TaskSettings()).numeric_answer
80.0
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from assets.dge.tasks.answers import (
    NOT_VISIBLE,
    Evaluation,
    Spec,
    all_visible,
    first_failure,
    numeric,
    object_fact,
    precision_phrase,
    size_problem,
)
from assets.dge.tasks.balance import NUMERIC
from assets.dge.tasks.facts import ObjectFact, SceneFacts
from assets.dge.tasks.sampling import CandidatePool, spread_frames
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType

ATTRIBUTES = ("height", "length", "width")


def sample_object_size(pool: CandidatePool) -> Iterator[Spec]:
    """Every visible object once, in random order, with the frame that shows most of it."""
    for index in pool.rng.permutation(len(pool.visible)):
        object_id = pool.visible[index]
        yield {"object_id": object_id, "frames": [pool.showing[object_id][0]]}


def sample_attribute_measurement(pool: CandidatePool) -> Iterator[Spec]:
    """Every visible object once, in random order, with its best frame and a random attribute."""
    for spec in sample_object_size(pool):
        yield {**spec, "attribute": ATTRIBUTES[int(pool.rng.integers(len(ATTRIBUTES)))]}


def sample_room_size(pool: CandidatePool) -> Iterator[Spec]:
    """One candidate: frames spread over the whole scan."""
    if pool.frames:
        yield {"frames": spread_frames(pool.frames, pool.settings.max_images)}


def evaluate_object_size(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The largest extent of the object's oriented box, in centimetres."""
    object_id = spec["object_id"]
    obj = object_fact(facts, object_id)
    size_cm = float(np.max(obj.extents)) * 100.0
    reason = first_failure(
        (all_visible(facts, spec["frames"], [object_id], settings), NOT_VISIBLE),
        (not size_problem(obj, size_cm / 100.0, settings), size_problem(obj, size_cm / 100.0, settings)),
    )
    return numeric(
        spec["frames"],
        size_cm,
        "cm",
        {"object_id": object_id, "extents_m": obj.extents.tolist(), "size_cm": size_cm},
        not reason,
        reason,
    )


def evaluate_attribute_measurement(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The object's height, length or width, in centimetres."""
    object_id, attribute = spec["object_id"], spec["attribute"]
    obj = object_fact(facts, object_id)
    value = attribute_cm(obj, attribute)
    problem = size_problem(obj, value / 100.0, settings)
    reason = first_failure(
        (all_visible(facts, spec["frames"], [object_id], settings), NOT_VISIBLE), (not problem, problem)
    )
    return numeric(
        spec["frames"],
        value,
        "cm",
        {"object_id": object_id, "attribute": attribute, "value_cm": value},
        not reason,
        reason,
    )


def attribute_cm(obj: ObjectFact, attribute: str) -> float:
    """The object's height, length or width in centimetres."""
    length, width, height = (float(v) for v in obj.extents)
    return {"height": height, "length": length, "width": width}[attribute] * 100.0


def evaluate_room_size(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The room's floor area, clear only when the geometry pins it down (see :func:`~assets.dge.tasks.facts.room_answer`:
    walls on every side, a rectangular footprint, a floor)."""
    area = facts.room_area_m2
    reason = first_failure(
        (
            area is not None and area > 0,
            facts.room_problem or "room footprint not rectangular, or floor not found",
        ),
    )
    return numeric(
        spec["frames"], area if area is not None else 0.0, "m^2", {"room_area_m2": area}, not reason, reason
    )


def object_size_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """The longest dimension of <object>."""
    obj = object_fact(facts, spec["object_id"])
    precision = precision_phrase(float(np.max(obj.extents)) * 100.0, "cm")
    return (
        f"What is the length of the longest dimension (length, width or height) of the {obj.label}? "
        f"Answer in centimetres, {precision}."
    )


def attribute_measurement_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """How tall, long or wide <object> is."""
    obj = object_fact(facts, spec["object_id"])
    name = obj.label
    question = {
        "height": f"How tall is the {name} (its height)?",
        "length": f"How long is the {name}, i.e. the longer side of its footprint seen from above?",
        "width": f"How wide is the {name}, i.e. the shorter side of its footprint seen from above?",
    }[spec["attribute"]]
    return (
        f"{question} Answer in centimetres, {precision_phrase(attribute_cm(obj, spec['attribute']), 'cm')}."
    )


def room_size_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """The floor area of the room."""
    return (
        "What is the floor area of this room? The images show the same room from different viewpoints. "
        "Answer in square metres, to 1 decimal place."
    )


MEASUREMENT_TASK_TYPES = (
    TaskType(
        "object_size", sample_object_size, evaluate_object_size, object_size_wording, NUMERIC, needs_up=True
    ),
    TaskType(
        "attribute_measurement",
        sample_attribute_measurement,
        evaluate_attribute_measurement,
        attribute_measurement_wording,
        NUMERIC,
        needs_up=True,
    ),
    TaskType("room_size", sample_room_size, evaluate_room_size, room_size_wording, NUMERIC, needs_up=True),
)
"""The measurement task types."""
