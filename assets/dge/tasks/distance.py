"""Distances: camera to object, object to object, which object is closest, which is nearer the camera.

Distances are between centres (an object's centroid, a camera's centre), in metres; depth is the
camera-frame ``z`` of a centroid (its distance from the image plane along the viewing direction,
which the question says). Comparisons are clear only when the compared values differ by more than
the margin: ``margin_sigmas`` combined standard deviations of the objects' centroids when the
geometry carries them, else the settings' fixed margins. Objects whose centroid is too uncertain are
not asked about.

>>> from assets.dge.tasks.facts import ObjectFact, SceneFacts
>>> chair = ObjectFact(0, "chair", np.array([0.0, 0.0, 0.5]), np.ones(3))
>>> table = ObjectFact(1, "table", np.array([2.0, 0.0, 0.4]), np.ones(3))
>>> facts = SceneFacts("s", {0: chair, 1: table}, {}, {}, None)
>>> evaluate_absolute_distance({"objects": [0, 1], "frames": []}, facts, TaskSettings()).numeric_answer
2.0
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
    camera_of,
    choice,
    clearly_visible,
    distance_margin,
    first_failure,
    numeric,
    object_fact,
    object_name,
    position_problem,
)
from assets.dge.tasks.balance import NUMERIC, SHUFFLED
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.sampling import (
    CandidatePool,
    draw_object_groups,
    draw_object_in_frame,
    draw_object_pairs_in_frame,
)
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType


def sample_camera_object_distance(pool: CandidatePool) -> Iterator[Spec]:
    """A random visible object in a random frame that shows it."""
    for frame, object_id in draw_object_in_frame(pool):
        yield {"frame": frame, "object_id": object_id}


def sample_absolute_distance(pool: CandidatePool) -> Iterator[Spec]:
    """Two random visible objects (sorted ids) and frames that show both."""
    for group, cover in draw_object_groups(pool, 2, lambda: 2):
        yield {"objects": sorted(group), "frames": cover}


def sample_relative_distance(pool: CandidatePool) -> Iterator[Spec]:
    """An anchor and 2-4 other objects to choose from, all visible, and frames that show them."""

    def group_size() -> int:
        return min(len(pool.visible), int(pool.rng.integers(3, 6)))

    for group, cover in draw_object_groups(pool, 3, group_size):
        yield {"anchor": group[0], "choices": group[1:], "frames": cover}


def evaluate_camera_object_distance(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Camera centre to the object's centre."""
    frame, object_id = spec["frame"], spec["object_id"]
    centroid = object_fact(facts, object_id).centroid
    camera = camera_of(facts, frame)
    distance = float(np.linalg.norm(centroid - camera.position))
    problem = position_problem([object_fact(facts, object_id)], settings)
    reason = first_failure(
        (clearly_visible(facts, frame, object_id, settings), NOT_VISIBLE), (not problem, problem)
    )
    return numeric(
        [frame],
        distance,
        "m",
        {
            "object_id": object_id,
            "camera_position": camera.position.tolist(),
            "centroid": centroid.tolist(),
            "distance_m": distance,
        },
        not reason,
        reason,
    )


def evaluate_absolute_distance(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Centre to centre of two objects."""
    a, b = spec["objects"]
    distance = float(np.linalg.norm(object_fact(facts, a).centroid - object_fact(facts, b).centroid))
    problem = position_problem([facts.objects[a], facts.objects[b]], settings)
    reason = first_failure(
        (all_visible(facts, spec["frames"], [a, b], settings), NOT_VISIBLE), (not problem, problem)
    )
    return numeric(
        spec["frames"], distance, "m", {"object_ids": [a, b], "distance_m": distance}, not reason, reason
    )


def evaluate_relative_distance(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The choice closest to the anchor; clear when the runner-up is farther by both distance margins."""
    anchor, choices = spec["anchor"], spec["choices"]
    anchor_centroid = object_fact(facts, anchor).centroid
    names = [object_name(facts, c) for c in choices]
    distances = [float(np.linalg.norm(facts.objects[c].centroid - anchor_centroid)) for c in choices]
    order = np.argsort(distances)
    best, second = distances[order[0]], distances[order[1]]
    gap = second - best
    involved = [facts.objects[o] for o in (anchor, choices[order[0]], choices[order[1]])]
    margin = distance_margin(involved, settings.distance_margin_m, settings)
    problem = position_problem(involved, settings, comparison=True)
    reason = first_failure(
        (all_visible(facts, spec["frames"], [anchor, *choices], settings), NOT_VISIBLE),
        (not problem, problem),
        (
            gap >= margin and gap >= settings.distance_margin_relative * best,
            "closest distances within the margin",
        ),
    )
    return choice(
        spec["frames"],
        names,
        names[order[0]],
        {"anchor": anchor, "choices": choices, "distances_m": distances, "gap_m": gap, "margin_m": margin},
        not reason,
        reason,
    )


def evaluate_depth_order(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The object nearer the camera (smaller depth); clear when the depths differ by the depth margin."""
    frame = spec["frame"]
    a, b = spec["objects"]
    camera = camera_of(facts, frame)
    names = [object_name(facts, a), object_name(facts, b)]
    depths = [float(camera.to_camera(facts.objects[o].centroid)[2]) for o in (a, b)]
    gap = abs(depths[0] - depths[1])
    involved = [facts.objects[a], facts.objects[b]]
    margin = distance_margin(involved, settings.depth_margin_m, settings)
    problem = position_problem(involved, settings, comparison=True)
    reason = first_failure(
        (all(clearly_visible(facts, frame, o, settings) for o in (a, b)), NOT_VISIBLE),
        (not problem, problem),
        (gap >= margin, "depths within the margin"),
    )
    return choice(
        [frame],
        names,
        names[int(np.argmin(depths))],
        {"object_ids": [a, b], "depths_m": depths, "gap_m": gap, "margin_m": margin},
        not reason,
        reason,
    )


def camera_object_distance_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Camera to <object>."""
    name = object_name(facts, spec["object_id"])
    return (
        f"How far is the centre of the {name} from the camera that took this image? "
        "Answer in metres, to 2 decimal places (the nearest centimetre)."
    )


def absolute_distance_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """<A> to <B>."""
    name_a, name_b = (object_name(facts, o) for o in spec["objects"])
    return (
        f"What is the distance between the centre of the {name_a} and the centre of the {name_b}? "
        "Answer in metres, to 2 decimal places (the nearest centimetre)."
    )


def relative_distance_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Which object is closest to <anchor>."""
    anchor_name = object_name(facts, spec["anchor"])
    return f"Which of these objects is closest to the {anchor_name} (measured between the objects' centres)?"


def depth_order_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """<A> or <B>: which has the smaller depth (distance along the viewing direction)."""
    name_a, name_b = (object_name(facts, o) for o in spec["objects"])
    return (
        f"In this image, which has the smaller depth: the {name_a} or the {name_b}? Depth is the distance of "
        "an object's centre from the camera along the camera's viewing direction (not the straight-line distance)."
    )


DISTANCE_TASK_TYPES = (
    TaskType(
        "camera_object_distance",
        sample_camera_object_distance,
        evaluate_camera_object_distance,
        camera_object_distance_wording,
        NUMERIC,
    ),
    TaskType(
        "absolute_distance",
        sample_absolute_distance,
        evaluate_absolute_distance,
        absolute_distance_wording,
        NUMERIC,
    ),
    TaskType(
        "relative_distance",
        sample_relative_distance,
        evaluate_relative_distance,
        relative_distance_wording,
        SHUFFLED,
        margins=("distance_margin_m", "distance_margin_relative"),
    ),
    TaskType(
        "depth_order",
        draw_object_pairs_in_frame,
        evaluate_depth_order,
        depth_order_wording,
        SHUFFLED,
        margins=("depth_margin_m",),
    ),
)
"""The distance task types."""
