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

from assets.dge.tasks.answers import Evaluation, Spec, all_visible, numeric, object_fact, object_name
from assets.dge.tasks.balance import NUMERIC
from assets.dge.tasks.facts import SceneFacts
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
    extents = object_fact(facts, object_id).extents
    size_cm = float(np.max(extents)) * 100.0
    clear = all_visible(facts, spec["frames"], [object_id], settings)
    return numeric(
        spec["frames"],
        size_cm,
        "cm",
        {"object_id": object_id, "extents_m": extents.tolist(), "size_cm": size_cm},
        clear,
    )


def evaluate_attribute_measurement(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The object's height, length or width, in centimetres."""
    object_id, attribute = spec["object_id"], spec["attribute"]
    length, width, height = (float(v) for v in object_fact(facts, object_id).extents)
    value = {"height": height, "length": length, "width": width}[attribute] * 100.0
    clear = all_visible(facts, spec["frames"], [object_id], settings)
    return numeric(
        spec["frames"],
        value,
        "cm",
        {"object_id": object_id, "attribute": attribute, "value_cm": value},
        clear,
    )


def evaluate_room_size(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The room's floor area, clear only when the geometry pins it down (see :func:`~assets.dge.tasks.facts.room_area`)."""
    area = facts.room_area_m2
    return numeric(
        spec["frames"],
        area if area is not None else 0.0,
        "m^2",
        {"room_area_m2": area},
        area is not None and area > 0,
    )


def object_size_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """The longest dimension of <object>."""
    name = object_name(facts, spec["object_id"])
    return f"What is the length of the longest dimension (length, width or height) of the {name}, in centimetres?"


def attribute_measurement_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """How tall, long or wide <object> is."""
    name = object_name(facts, spec["object_id"])
    return {
        "height": f"How tall is the {name} (its height), in centimetres?",
        "length": f"How long is the {name}, i.e. the longer side of its footprint seen from above, in centimetres?",
        "width": f"How wide is the {name}, i.e. the shorter side of its footprint seen from above, in centimetres?",
    }[spec["attribute"]]


def room_size_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """The floor area of the room."""
    return (
        "What is the floor area of this room, in square metres? "
        "The images show the same room from different viewpoints."
    )


MEASUREMENT_TASK_TYPES = (
    TaskType("object_size", sample_object_size, evaluate_object_size, object_size_wording, NUMERIC),
    TaskType(
        "attribute_measurement",
        sample_attribute_measurement,
        evaluate_attribute_measurement,
        attribute_measurement_wording,
        NUMERIC,
    ),
    TaskType("room_size", sample_room_size, evaluate_room_size, room_size_wording, NUMERIC),
)
"""The measurement task types."""
