"""Directions: where one thing lies relative to another, in the room or in an image.

- ``relative_direction_scene``: standing at <A> facing <B>, the quadrant of <C> (seen from above);
- ``relative_direction_image``: <A> left or right of <B> in the image (horizontal viewing angles);
- ``camera_object_position``: <A> (shown in image 1) relative to the camera of image 2;
- ``camera_region_position``: the cell of a 3x3 grid over the image (rows top/middle/bottom,
  columns left/centre/right, each a third of the image) holding the centre of the box around <A>'s
  visible part (its 2D box in the frame, not its projected 3D centre).

Each is clear only when the answer stays away from the boundary between two answers by the margin:
derived from the objects' centroid uncertainty when the geometry carries it, else the settings'
fixed margin.

>>> image_region(0.5, 0.9)[0], image_region(1.2, 0.5)
('bottom centre', (None, 0.0))
>>> box_centre((0, 600, 200, 1000))
(0.1, 0.8)
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from assets.dge.tasks.angles import DIRECTIONS_4, QUADRANTS, direction_of, quadrant_of, signed_angle_deg
from assets.dge.tasks.answers import (
    NOT_VISIBLE,
    Evaluation,
    Spec,
    all_visible,
    camera_of,
    choice,
    clearly_visible,
    direction_margin,
    first_failure,
    object_fact,
    object_name,
    position_problem,
)
from assets.dge.tasks.balance import ANSWER_AND_THREE_DISTRACTORS, SHUFFLED
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.sampling import (
    CandidatePool,
    draw_object_groups,
    draw_object_in_frame,
    draw_object_pairs_in_frame,
)
from assets.dge.tasks.settings import TaskSettings
from assets.dge.tasks.task_type import TaskType

REGION_ROWS = ["top", "middle", "bottom"]
REGION_COLUMNS = ["left", "centre", "right"]
REGIONS = [f"{row} {column}" for row in REGION_ROWS for column in REGION_COLUMNS]


def image_region(u: float, v: float) -> tuple[str | None, float]:
    """The 3x3-grid cell of image coordinates ``(u, v)`` in [0, 1), and the distance to the nearest grid line.

    None (and 0) outside the image.
    """
    if not (0.0 <= u < 1.0 and 0.0 <= v < 1.0):
        return None, 0.0
    column = min(int(u * 3), 2)
    row = min(int(v * 3), 2)
    margin = min(min(abs(u - line), abs(v - line)) for line in (1 / 3, 2 / 3))
    return f"{REGION_ROWS[row]} {REGION_COLUMNS[column]}", margin


def box_centre(bbox: tuple[int, int, int, int]) -> tuple[float, float]:
    """Centre of a canonical ``[x1, y1, x2, y2]`` box (0..1000 grid) as fractions of the image."""
    x1, y1, x2, y2 = bbox
    return (x1 + x2) / 2000.0, (y1 + y2) / 2000.0


def sample_relative_direction_scene(pool: CandidatePool) -> Iterator[Spec]:
    """Three random visible objects (standing, facing, target) and frames that show them."""
    for group, cover in draw_object_groups(pool, 3, lambda: 3):
        yield {"standing": group[0], "facing": group[1], "target": group[2], "frames": cover}


def sample_camera_object_position(pool: CandidatePool) -> Iterator[Spec]:
    """A random visible object, one of the three frames that show most of it, and another random frame.

    Half of the second frames are drawn from those that do not show the object (where it is more
    often behind or to the side), so that "in front" does not dominate the answers.
    """
    for _ in range(pool.draws if pool.visible and len(pool.frames) >= 2 else 0):
        object_id = pool.pick(pool.visible)
        showing = pool.pick(pool.showing[object_id][:3])
        others = [f for f in pool.frames if f != showing]
        hidden = [f for f in others if f not in pool.showing[object_id]]
        use_hidden = hidden and pool.rng.uniform() < 0.5
        yield {"object_id": object_id, "frames": [showing, pool.pick(hidden if use_hidden else others)]}


def sample_camera_region_position(pool: CandidatePool) -> Iterator[Spec]:
    """A random visible object in a frame that shows it (the balance rule picks three other regions)."""
    for frame, object_id in draw_object_in_frame(pool):
        yield {"frame": frame, "object_id": object_id}


def evaluate_relative_direction_scene(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Quadrant of the target seen from the standing object facing the facing object."""
    standing, facing, target = spec["standing"], spec["facing"], spec["target"]
    origin, ahead, there = (object_fact(facts, o).centroid[:2] for o in (standing, facing, target))
    forward = ahead - origin
    towards = there - origin
    angle = signed_angle_deg(forward, towards)
    label, boundary = quadrant_of(angle)
    involved = [facts.objects[o] for o in (standing, facing, target)]
    reference = float(min(np.linalg.norm(forward), np.linalg.norm(towards)))
    margin = direction_margin(involved, reference, settings.direction_margin_deg, settings)
    problem = position_problem(involved, settings, comparison=True)
    reason = first_failure(
        (all_visible(facts, spec["frames"], [standing, facing, target], settings), NOT_VISIBLE),
        (not problem, problem),
        (reference >= settings.min_direction_distance_m, "reference distance too short"),
        (boundary >= margin, "direction within the margin of a boundary"),
    )
    return choice(
        spec["frames"],
        QUADRANTS,
        label,
        {
            "object_ids": [standing, facing, target],
            "angle_deg": angle,
            "boundary_margin_deg": boundary,
            "margin_deg": margin,
        },
        not reason,
        reason,
    )


def evaluate_relative_direction_image(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Left or right by the objects' horizontal viewing angles in the camera."""
    frame = spec["frame"]
    a, b = spec["objects"]
    camera = camera_of(facts, frame)
    angles, depths = [], []
    for o in (a, b):
        point = camera.to_camera(object_fact(facts, o).centroid)
        angles.append(math.degrees(math.atan2(point[0], point[2])))
        depths.append(float(np.hypot(point[0], point[2])))
    gap = abs(angles[0] - angles[1])
    involved = [facts.objects[a], facts.objects[b]]
    margin = direction_margin(involved, min(depths), settings.image_direction_margin_deg, settings)
    reason = first_failure(
        (all(clearly_visible(facts, frame, o, settings) for o in (a, b)), NOT_VISIBLE),
        (gap >= margin, "viewing angles within the margin"),
    )
    return choice(
        [frame],
        ["left", "right"],
        "left" if angles[0] < angles[1] else "right",
        {"object_ids": [a, b], "horizontal_angles_deg": angles, "gap_deg": gap, "margin_deg": margin},
        not reason,
        reason,
    )


def evaluate_camera_object_position(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """Direction of the object from the second camera, relative to its heading."""
    object_id = spec["object_id"]
    show, query = spec["frames"]
    centroid = object_fact(facts, object_id).centroid
    camera = camera_of(facts, query)
    camera_of(facts, show)  # the frame that shows the object must exist too
    heading = camera.heading
    if heading is None:
        return choice(spec["frames"], DIRECTIONS_4, None, {}, False, "camera looks straight up or down")
    offset = (centroid - camera.position)[:2]
    angle = signed_angle_deg(heading, offset)
    label, boundary = direction_of(angle)
    reference = float(np.linalg.norm(offset))
    margin = direction_margin([facts.objects[object_id]], reference, settings.direction_margin_deg, settings)
    problem = position_problem([facts.objects[object_id]], settings, comparison=True)
    reason = first_failure(
        (clearly_visible(facts, show, object_id, settings), NOT_VISIBLE),
        (not problem, problem),
        (reference >= settings.min_direction_distance_m, "reference distance too short"),
        (boundary >= margin, "direction within the margin of a boundary"),
    )
    return choice(
        spec["frames"],
        DIRECTIONS_4,
        label,
        {"object_id": object_id, "angle_deg": angle, "boundary_margin_deg": boundary, "margin_deg": margin},
        not reason,
        reason,
    )


def evaluate_camera_region_position(spec: Spec, facts: SceneFacts, settings: TaskSettings) -> Evaluation:
    """The grid cell of the image holding the centre of the object's visible 2D box."""
    frame, object_id = spec["frame"], spec["object_id"]
    object_fact(facts, object_id)  # the object must exist
    camera_of(facts, frame)  # and so must the frame
    options = list(spec.get("options", REGIONS))
    seen = facts.seen_in(frame, object_id)
    if seen is None or seen.bbox is None:
        return choice([frame], options, None, {}, False, NOT_VISIBLE)
    u, v = box_centre(seen.bbox)
    region, margin = image_region(u, v)
    reason = first_failure(
        (clearly_visible(facts, frame, object_id, settings), NOT_VISIBLE),
        (
            region is not None and margin >= settings.region_margin,
            "box centre within the margin of a grid line",
        ),
    )
    return choice(
        [frame],
        options,
        region,
        {"object_id": object_id, "box_centre_fraction": [u, v], "margin": margin},
        not reason,
        reason,
    )


def relative_direction_scene_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Standing at <A> facing <B>: quadrant of <C>."""
    standing, facing, target = (object_name(facts, spec[key]) for key in ("standing", "facing", "target"))
    return (
        f"Imagine you are standing at the {standing} and facing the {facing}. Seen from above, is the "
        f"{target} to your front-left, front-right, back-left or back-right?"
    )


def relative_direction_image_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """<A> left or right of <B> in this image."""
    name_a, name_b = (object_name(facts, o) for o in spec["objects"])
    return (
        f"In this image, is the {name_a} to the left or to the right of the {name_b} "
        "(comparing where their centres appear from the camera's point of view)?"
    )


def camera_object_position_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """<A> relative to the camera of image 2."""
    name = object_name(facts, spec["object_id"])
    return (
        f"The {name} is shown in image 1. Facing the way the camera of image 2 looks, where was the {name} "
        "when image 2 was taken: in front, behind, to the left or to the right?"
    )


def camera_region_position_wording(spec: Mapping[str, Any], facts: SceneFacts) -> str:
    """Region of the image holding <A>'s centre."""
    name = object_name(facts, spec["object_id"])
    return (
        "Divide this image into a 3x3 grid of equal cells: rows top, middle and bottom; columns left, centre "
        f"and right. Which cell holds the centre of the box around the visible part of the {name}?"
    )


DIRECTION_TASK_TYPES = (
    TaskType(
        "relative_direction_scene",
        sample_relative_direction_scene,
        evaluate_relative_direction_scene,
        relative_direction_scene_wording,
        SHUFFLED,
        margins=("direction_margin_deg", "min_direction_distance_m"),
        needs_up=True,
    ),
    TaskType(
        "relative_direction_image",
        draw_object_pairs_in_frame,
        evaluate_relative_direction_image,
        relative_direction_image_wording,
        SHUFFLED,
        margins=("image_direction_margin_deg",),
    ),
    TaskType(
        "camera_object_position",
        sample_camera_object_position,
        evaluate_camera_object_position,
        camera_object_position_wording,
        SHUFFLED,
        margins=("direction_margin_deg", "min_direction_distance_m"),
        needs_up=True,
    ),
    TaskType(
        "camera_region_position",
        sample_camera_region_position,
        evaluate_camera_region_position,
        camera_region_position_wording,
        ANSWER_AND_THREE_DISTRACTORS,
        margins=("region_margin",),
    ),
)
"""The direction task types."""
