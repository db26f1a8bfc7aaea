"""Exact question-answer rows for the 16 DGE task types, computed from a scene's geometry.

A question is described by a small JSON-able *spec* (the task type's object ids, frame indices and
options). :func:`evaluate_spec` computes its answer from :class:`SceneFacts` (objects, cameras,
per-frame visibility, room) and says whether the answer is clear under the geometry's own
uncertainty (two distances within the margin, an object barely visible...): unclear questions are
not emitted. Because the answer is a function of the spec and the facts alone, the same spec can be
re-evaluated on other facts, e.g. a synthetic world's exact truth, to audit every emitted answer.

Conventions (gravity-aligned frame: metres, ``z`` up; OpenCV cameras): an object's position is its
centroid (the centre of its oriented box); "left" and "right" are seen from above with ``z`` up; a
camera's heading is its viewing direction projected onto the floor; depth is the camera-frame
``z`` of the centroid. Numeric answers are rounded: metres to 2 decimals, centimetres to integers,
square metres to 1 decimal, counts to integers.

| task type | question | answer |
|---|---|---|
| ``object_count`` | how many <label>s are in the room (frames show them all) | count |
| ``object_size`` | longest dimension of <object> | cm |
| ``camera_object_distance`` | camera centre to <object>'s centre | m |
| ``absolute_distance`` | centre of <A> to centre of <B> | m |
| ``relative_distance`` | which of 2-4 objects is closest to <A> | choice |
| ``depth_order`` | which of two objects is closer to the camera (depth) | choice |
| ``relative_direction_scene`` | standing at <A> facing <B>: quadrant of <C> | choice of 4 |
| ``relative_direction_image`` | is <A> left or right of <B> in this image | choice of 2 |
| ``room_size`` | floor area of a rectangular room | m^2 |
| ``camera_camera_position`` | camera 2 relative to camera 1 (front/behind/left/right) | choice of 4 |
| ``camera_camera_elevation`` | camera 2 higher or lower than camera 1 | choice of 2 |
| ``visibility_comparison`` | in which image is more of <A> visible | choice of 2 |
| ``camera_object_position`` | <A> (seen in image 1) relative to camera 2 | choice of 4 |
| ``camera_region_position`` | region of the image (3x3 grid) holding <A>'s centre | choice of 4 |
| ``camera_motion`` | moved forward/backward/left/right or turned left/right | choice of 4 |
| ``attribute_measurement`` | height, length or width of <A> | cm |

>>> config = TaskConfig()
>>> config.distance_margin_m, config.max_tasks_per_type
(0.15, 4)
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from data_contracts.dge_tasks import TASK_TYPES, DgeTasks
from data_contracts.images import encode_image
from data_contracts.mcq_questions import LETTERS
from data_contracts.stable_hash import stable_int, stable_split
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)

DIRECTIONS_4 = ["in front", "behind", "to the left", "to the right"]
QUADRANTS = ["front-left", "front-right", "back-left", "back-right"]
MOTIONS = ["moved forward", "moved backward", "moved left", "moved right", "turned left", "turned right"]
REGION_ROWS = ["top", "middle", "bottom"]
REGION_COLUMNS = ["left", "centre", "right"]
REGIONS = [f"{row} {column}" for row in REGION_ROWS for column in REGION_COLUMNS]
STRUCTURE_LABELS = (
    "wall",
    "floor",
    "ceiling",
    "object",
    "otherstructure",
    "otherfurniture",
    "otherprop",
    "unknown",
)
ATTRIBUTES = ("height", "length", "width")


@dataclass(frozen=True)
class TaskConfig:
    """Which questions are emitted, and the margins that keep them unambiguous.

    Args:
        task_types (`tuple[str, ...]`, *optional*): task types to generate (default: all 16).
        max_tasks_per_type (`int`, *optional*, defaults to 4): most questions of one type per scene.
        max_images (`int`, *optional*, defaults to 4): most frames shown by one question.
        min_visibility (`float`, *optional*, defaults to 0.5): an object is named in a frame only when at least
            this share of it is unoccluded ...
        min_in_frame (`float`, *optional*, defaults to 0.5): ... and at least this share lies inside the image.
        distance_margin_m (`float`, *optional*, defaults to 0.15): closest and second-closest distances differ
            by at least this much ...
        distance_margin_relative (`float`, *optional*, defaults to 0.1): ... and by this fraction of the closest.
        depth_margin_m (`float`, *optional*, defaults to 0.15): depths of two objects differ by at least this.
        direction_margin_deg (`float`, *optional*, defaults to 15.0): angles stay this far from the boundary
            between two direction answers.
        image_direction_margin_deg (`float`, *optional*, defaults to 5.0): horizontal viewing angles of two
            objects differ by at least this for left/right in the image.
        min_direction_distance_m (`float`, *optional*, defaults to 0.5): reference distances for directions.
        elevation_margin_m (`float`, *optional*, defaults to 0.15): camera heights differ by at least this.
        visibility_margin (`float`, *optional*, defaults to 0.2): visible shares differ by at least this.
        region_margin (`float`, *optional*, defaults to 0.04): an object's centre stays this far (fraction of the
            image side) from the lines between image regions.
        turn_min_deg (`float`, *optional*, defaults to 25.0): a turn rotates at least this much ...
        turn_max_translation_m (`float`, *optional*, defaults to 0.3): ... while moving at most this far.
        move_min_translation_m (`float`, *optional*, defaults to 0.4): a move goes at least this far ...
        move_max_turn_deg (`float`, *optional*, defaults to 15.0): ... while turning at most this much.
        excluded_labels (`tuple[str, ...]`, *optional*): labels never asked about (room structure).
        candidate_draws (`int`, *optional*, defaults to 400): random candidates drawn per task type and scene.
        min_room_rectangularity (`float`, *optional*, defaults to 0.95): room-size questions only for rooms whose
            footprint fills this share of its minimum-area rectangle (see :func:`room_area`).
        motion_window (`int`, *optional*, defaults to 3): camera motion compares frames at most this many
            positions apart in the frame sequence.
        test_fraction (`float`, *optional*, defaults to 0.1): share of scenes in the ``test`` split.
        image_max_side (`int`, *optional*): re-encode images larger than this (JPEG); None keeps the files.
        seed (`int`, *optional*, defaults to 0): seed of the per-scene sampling.
    """

    task_types: tuple[str, ...] = tuple(TASK_TYPES)
    max_tasks_per_type: int = 4
    max_images: int = 4
    min_visibility: float = 0.5
    min_in_frame: float = 0.5
    distance_margin_m: float = 0.15
    distance_margin_relative: float = 0.1
    depth_margin_m: float = 0.15
    direction_margin_deg: float = 15.0
    image_direction_margin_deg: float = 5.0
    min_direction_distance_m: float = 0.5
    elevation_margin_m: float = 0.15
    visibility_margin: float = 0.2
    region_margin: float = 0.04
    turn_min_deg: float = 25.0
    turn_max_translation_m: float = 0.3
    move_min_translation_m: float = 0.4
    move_max_turn_deg: float = 15.0
    excluded_labels: tuple[str, ...] = STRUCTURE_LABELS
    candidate_draws: int = 400
    min_room_rectangularity: float = 0.95
    motion_window: int = 3
    test_fraction: float = 0.1
    image_max_side: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = sorted(set(self.task_types) - set(TASK_TYPES))
        if unknown:
            raise ValueError(f"unknown DGE task types {unknown}; valid: {', '.join(TASK_TYPES)}")


# --------------------------------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectFact:
    """An object's label, centroid and oriented-box extents ``(length, width, height)``, length >= width."""

    object_id: int
    label: str
    centroid: np.ndarray
    extents: np.ndarray


def horizontal_heading(pose: np.ndarray, min_horizontal: float = 0.3) -> np.ndarray | None:
    """A camera's viewing direction (its ``z`` axis) projected onto the floor, as a unit 2D vector.

    None when the camera looks almost straight up or down (horizontal part below ``min_horizontal``).

    >>> pose = np.eye(4); pose[:3, :3] = [[1, 0, 0], [0, 0, 1], [0, -1, 0]]
    >>> horizontal_heading(pose).tolist()
    [0.0, 1.0]
    """
    forward = pose[:3, 2]
    horizontal = np.array([forward[0], forward[1]], dtype=np.float64)
    norm = float(np.linalg.norm(horizontal))
    return horizontal / norm if norm > min_horizontal else None


@dataclass(frozen=True)
class CameraFact:
    """A frame's camera: camera-to-gravity pose, colour intrinsics and image size, and its image file."""

    frame_index: int
    pose: np.ndarray
    intrinsics: np.ndarray
    width: int
    height: int
    color_path: str | None = None

    @property
    def position(self) -> np.ndarray:
        """Camera centre."""
        return self.pose[:3, 3]

    @property
    def heading(self) -> np.ndarray | None:
        """Unit viewing direction projected onto the floor (None when looking almost straight up or down)."""
        return horizontal_heading(self.pose)

    def to_camera(self, point: np.ndarray) -> np.ndarray:
        """A gravity-frame point in camera coordinates."""
        rotation = self.pose[:3, :3]
        return rotation.T @ (np.asarray(point) - self.pose[:3, 3])


@dataclass(frozen=True)
class SeenFact:
    """What a frame shows of an object: unoccluded share, share inside the image, canonical box."""

    visibility: float
    in_frame: float
    bbox: tuple[int, int, int, int] | None

    @property
    def visible_fraction(self) -> float:
        """Share of the object visible in the image (unoccluded and inside)."""
        return self.visibility * self.in_frame


@dataclass
class SceneFacts:
    """Everything the task types read about one scene."""

    scene_id: str
    objects: dict[int, ObjectFact]
    cameras: dict[int, CameraFact]
    seen: dict[tuple[int, int], SeenFact]
    room_area_m2: float | None
    unmeasured_labels: set[str] = field(default_factory=set)
    geometry_source: str = "scanned"
    provenance: dict[str, Any] = field(default_factory=dict)

    def seen_in(self, frame_index: int, object_id: int) -> SeenFact | None:
        """The visibility of ``object_id`` in ``frame_index`` (None when not in view)."""
        return self.seen.get((frame_index, object_id))


def room_area(geometry_row: Mapping[str, Any], min_rectangularity: float = 0.95) -> float | None:
    """The room's floor area for questions, or None when the geometry does not pin it down.

    A footprint that fills at least ``min_rectangularity`` of its minimum-area rectangle is a
    rectangular room (corners no camera saw shave a little off the hull): its area is the
    rectangle's. Other footprints (L-shaped rooms, rooms seen only in part) and scans whose floor
    was not found give no answer.

    >>> room_area({"room_length_m": 6.0, "room_width_m": 5.0, "room_area_m2": 29.5, "floor_source": "ransac"})
    30.0
    >>> room_area({"room_length_m": 6.0, "room_width_m": 5.0, "room_area_m2": 24.0, "floor_source": "ransac"}) is None
    True
    """
    rectangle = float(geometry_row["room_length_m"]) * float(geometry_row["room_width_m"])
    if geometry_row["floor_source"] != "ransac" or rectangle <= 0:
        return None
    if float(geometry_row["room_area_m2"]) / rectangle < min_rectangularity:
        return None
    return rectangle


def scene_facts_from_tables(
    geometry_row: Mapping[str, Any],
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
    min_room_rectangularity: float = 0.95,
) -> SceneFacts:
    """Facts of a scanned scene from its ``scene_geometry`` row, ``frame_visibility`` rows and ``rgbd_frames`` rows."""
    scene_id = str(geometry_row["scene_id"])
    world_to_gravity = np.asarray(geometry_row["world_to_gravity"], dtype=np.float64).reshape(4, 4)
    objects = {
        int(item["object_id"]): ObjectFact(
            object_id=int(item["object_id"]),
            label=str(item["label"]),
            centroid=np.asarray(item["centroid"], dtype=np.float64),
            extents=np.asarray(item["obb_extents"], dtype=np.float64),
        )
        for item in geometry_row["objects"]
    }
    used = {int(index) for index in geometry_row["used_frames"]}
    cameras = {}
    for row in frames.filter(pl.col("scene_id") == scene_id).iter_rows(named=True):
        index = int(row["frame_index"])
        if index not in used:
            continue
        pose = world_to_gravity @ np.asarray(row["pose"], dtype=np.float64).reshape(4, 4)
        cameras[index] = CameraFact(
            frame_index=index,
            pose=pose,
            intrinsics=np.asarray(row["color_intrinsics"], dtype=np.float64).reshape(3, 3),
            width=int(row["color_width"]),
            height=int(row["color_height"]),
            color_path=str(row["color_path"]),
        )
    seen = {}
    for row in visibility.filter(pl.col("scene_id") == scene_id).iter_rows(named=True):
        seen[(int(row["frame_index"]), int(row["object_id"]))] = SeenFact(
            visibility=float(row["visibility_ratio"]),
            in_frame=float(row["in_frame_ratio"]),
            bbox=None if row["bbox"] is None else tuple(int(v) for v in row["bbox"]),
        )
    return SceneFacts(
        scene_id=scene_id,
        objects=objects,
        cameras=cameras,
        seen=seen,
        room_area_m2=room_area(geometry_row, min_room_rectangularity),
        unmeasured_labels={str(item["label"]) for item in geometry_row["dropped_objects"]},
        geometry_source=str(geometry_row.get("geometry_source", "scanned")),
    )


# --------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskAnswer:
    """A computed question: text, frames, options and answer (an option text or a number), facts."""

    task_type: str
    question: str
    frame_indices: list[int]
    options: list[str]
    answer_option: str | None
    numeric_answer: float | None
    unit: str | None
    values: dict[str, Any]
    clear: bool
    reason: str = ""


class SpecError(ValueError):
    """A spec that refers to objects or frames the facts do not have."""


def _plural(label: str) -> str:
    """English plural of a label's last word.

    >>> _plural("shelf"), _plural("box"), _plural("trash can"), _plural("bookcase")
    ('shelves', 'boxes', 'trash cans', 'bookcases')
    """
    head, _, last = label.rpartition(" ")
    irregular = {"shelf": "shelves", "person": "people", "knife": "knives", "leaf": "leaves", "mouse": "mice"}
    if last in irregular:
        plural = irregular[last]
    elif last.endswith(("s", "x", "z", "ch", "sh")):
        plural = last + "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        plural = last[:-1] + "ies"
    else:
        plural = last + "s"
    return f"{head} {plural}" if head else plural


def _round(value: float, unit: str | None) -> float:
    digits = {"m": 2, "cm": 0, "m^2": 1, None: 0}[unit]
    rounded = round(float(value), digits)
    return float(int(rounded)) if digits == 0 else rounded


def format_number(value: float, unit: str | None) -> str:
    """The answer text of a numeric answer (no unit; the unit has its own column).

    >>> format_number(2.345, "m"), format_number(85.6, "cm"), format_number(31.52, "m^2"), format_number(3, None)
    ('2.35', '86', '31.5', '3')
    """
    digits = {"m": 2, "cm": 0, "m^2": 1, None: 0}[unit]
    return f"{_round(value, unit):.{digits}f}"


def _signed_angle_deg(reference: np.ndarray, vector: np.ndarray) -> float:
    """Angle from ``reference`` to ``vector`` in the xy-plane, counter-clockwise (left) positive."""
    cross = reference[0] * vector[1] - reference[1] * vector[0]
    dot = reference[0] * vector[0] + reference[1] * vector[1]
    return math.degrees(math.atan2(cross, dot))


def _direction_of(angle_deg: float) -> tuple[str, float]:
    """Front/behind/left/right of a signed angle, and its distance to the nearest class boundary (degrees)."""
    a = abs(angle_deg)
    if a <= 45:
        label = "in front"
    elif a >= 135:
        label = "behind"
    else:
        label = "to the left" if angle_deg > 0 else "to the right"
    boundary = min(abs(a - 45), abs(a - 135))
    return label, boundary


def _quadrant_of(angle_deg: float) -> tuple[str, float]:
    front = abs(angle_deg) < 90
    left = angle_deg > 0
    label = ("front-" if front else "back-") + ("left" if left else "right")
    boundary = min(abs(angle_deg), abs(abs(angle_deg) - 90), 180 - abs(angle_deg))
    return label, boundary


def _name(facts: SceneFacts, object_id: int) -> str:
    if object_id not in facts.objects:
        raise SpecError(f"object {object_id} is not in scene {facts.scene_id}")
    return facts.objects[object_id].label


def _camera(facts: SceneFacts, frame_index: int) -> CameraFact:
    if frame_index not in facts.cameras:
        raise SpecError(f"frame {frame_index} is not in scene {facts.scene_id}")
    return facts.cameras[frame_index]


def _clearly_visible(facts: SceneFacts, frame_index: int, object_id: int, config: TaskConfig) -> bool:
    seen = facts.seen_in(frame_index, object_id)
    return (
        seen is not None
        and seen.bbox is not None
        and seen.visibility >= config.min_visibility
        and seen.in_frame >= config.min_in_frame
    )


def _all_visible(
    facts: SceneFacts, frames: Iterable[int], objects: Iterable[int], config: TaskConfig
) -> bool:
    """Every object is clearly visible in at least one of the frames."""
    frames = list(frames)
    return all(any(_clearly_visible(facts, f, o, config) for f in frames) for o in objects)


def _numeric(task_type, question, frames, value, unit, values, clear=True, reason="") -> TaskAnswer:
    return TaskAnswer(
        task_type, question, list(frames), [], None, _round(value, unit), unit, values, clear, reason
    )


def _choice(task_type, question, frames, options, answer, values, clear, reason="") -> TaskAnswer:
    return TaskAnswer(
        task_type, question, list(frames), list(options), answer, None, None, values, clear, reason
    )


def _object_count(spec, facts, config):
    label = spec["label"]
    frames = spec["frames"]
    members = sorted(o for o, obj in facts.objects.items() if obj.label == label)
    count = len(members)
    clear = label not in facts.unmeasured_labels and _all_visible(facts, frames, members, config)
    question = (
        f"How many {_plural(label)} are there in this room? The images show the same room from different "
        "viewpoints. Answer with a number."
    )
    return _numeric(
        "object_count",
        question,
        frames,
        count,
        None,
        {"label": label, "object_ids": members, "count": count},
        clear and count > 0,
        "" if clear else "not every instance is clearly visible in the frames",
    )


def _object_size(spec, facts, config):
    object_id = spec["object_id"]
    name = _name(facts, object_id)
    extents = facts.objects[object_id].extents
    size_cm = float(np.max(extents)) * 100.0
    question = f"What is the length of the longest dimension (length, width or height) of the {name}, in centimetres?"
    clear = _all_visible(facts, spec["frames"], [object_id], config)
    return _numeric(
        "object_size",
        question,
        spec["frames"],
        size_cm,
        "cm",
        {"object_id": object_id, "extents_m": extents.tolist(), "size_cm": size_cm},
        clear,
    )


def _camera_object_distance(spec, facts, config):
    frame, object_id = spec["frame"], spec["object_id"]
    name = _name(facts, object_id)
    camera = _camera(facts, frame)
    distance = float(np.linalg.norm(facts.objects[object_id].centroid - camera.position))
    question = f"How far is the centre of the {name} from the camera that took this image, in metres?"
    clear = _clearly_visible(facts, frame, object_id, config)
    return _numeric(
        "camera_object_distance",
        question,
        [frame],
        distance,
        "m",
        {
            "object_id": object_id,
            "camera_position": camera.position.tolist(),
            "centroid": facts.objects[object_id].centroid.tolist(),
            "distance_m": distance,
        },
        clear,
    )


def _absolute_distance(spec, facts, config):
    a, b = spec["objects"]
    name_a, name_b = _name(facts, a), _name(facts, b)
    distance = float(np.linalg.norm(facts.objects[a].centroid - facts.objects[b].centroid))
    question = (
        f"What is the distance between the centre of the {name_a} and the centre of the {name_b}, in metres?"
    )
    clear = _all_visible(facts, spec["frames"], [a, b], config)
    return _numeric(
        "absolute_distance",
        question,
        spec["frames"],
        distance,
        "m",
        {"object_ids": [a, b], "distance_m": distance},
        clear,
    )


def _relative_distance(spec, facts, config):
    anchor, choices = spec["anchor"], spec["choices"]
    anchor_name = _name(facts, anchor)
    names = [_name(facts, c) for c in choices]
    distances = [
        float(np.linalg.norm(facts.objects[c].centroid - facts.objects[anchor].centroid)) for c in choices
    ]
    order = np.argsort(distances)
    best, second = distances[order[0]], distances[order[1]]
    gap = second - best
    clear = gap >= config.distance_margin_m and gap >= config.distance_margin_relative * best
    clear = clear and _all_visible(facts, spec["frames"], [anchor, *choices], config)
    question = (
        f"Which of these objects is closest to the {anchor_name} (measured between the objects' centres)?"
    )
    return _choice(
        "relative_distance",
        question,
        spec["frames"],
        names,
        names[order[0]],
        {"anchor": anchor, "choices": choices, "distances_m": distances, "gap_m": gap},
        clear,
        "" if clear else "closest distances within the margin",
    )


def _depth_order(spec, facts, config):
    frame = spec["frame"]
    a, b = spec["objects"]
    camera = _camera(facts, frame)
    names = [_name(facts, a), _name(facts, b)]
    depths = [float(camera.to_camera(facts.objects[o].centroid)[2]) for o in (a, b)]
    gap = abs(depths[0] - depths[1])
    clear = gap >= config.depth_margin_m and all(_clearly_visible(facts, frame, o, config) for o in (a, b))
    question = f"In this image, which is closer to the camera: the {names[0]} or the {names[1]}?"
    return _choice(
        "depth_order",
        question,
        [frame],
        names,
        names[int(np.argmin(depths))],
        {"object_ids": [a, b], "depths_m": depths, "gap_m": gap},
        clear,
    )


def _relative_direction_scene(spec, facts, config):
    standing, facing, target = spec["standing"], spec["facing"], spec["target"]
    names = [_name(facts, o) for o in (standing, facing, target)]
    origin = facts.objects[standing].centroid[:2]
    forward = facts.objects[facing].centroid[:2] - origin
    towards = facts.objects[target].centroid[:2] - origin
    angle = _signed_angle_deg(forward, towards)
    label, boundary = _quadrant_of(angle)
    clear = (
        boundary >= config.direction_margin_deg
        and np.linalg.norm(forward) >= config.min_direction_distance_m
        and np.linalg.norm(towards) >= config.min_direction_distance_m
        and _all_visible(facts, spec["frames"], [standing, facing, target], config)
    )
    question = (
        f"Imagine you are standing at the {names[0]} and facing the {names[1]}. "
        f"Is the {names[2]} to your front-left, front-right, back-left or back-right?"
    )
    return _choice(
        "relative_direction_scene",
        question,
        spec["frames"],
        QUADRANTS,
        label,
        {"object_ids": [standing, facing, target], "angle_deg": angle, "boundary_margin_deg": boundary},
        clear,
    )


def _relative_direction_image(spec, facts, config):
    frame = spec["frame"]
    a, b = spec["objects"]
    camera = _camera(facts, frame)
    names = [_name(facts, a), _name(facts, b)]
    angles = []
    for o in (a, b):
        point = camera.to_camera(facts.objects[o].centroid)
        angles.append(math.degrees(math.atan2(point[0], point[2])))
    gap = abs(angles[0] - angles[1])
    clear = gap >= config.image_direction_margin_deg and all(
        _clearly_visible(facts, frame, o, config) for o in (a, b)
    )
    question = f"In this image, is the {names[0]} to the left or to the right of the {names[1]}?"
    return _choice(
        "relative_direction_image",
        question,
        [frame],
        ["left", "right"],
        "left" if angles[0] < angles[1] else "right",
        {"object_ids": [a, b], "horizontal_angles_deg": angles, "gap_deg": gap},
        clear,
    )


def _room_size(spec, facts, config):
    area = facts.room_area_m2
    question = "What is the floor area of this room, in square metres? The images show the same room from different viewpoints."
    return _numeric(
        "room_size",
        question,
        spec["frames"],
        area if area is not None else 0.0,
        "m^2",
        {"room_area_m2": area},
        area is not None and area > 0,
    )


def _camera_pair(facts, spec):
    first, second = (_camera(facts, f) for f in spec["frames"])
    return first, second


def _camera_camera_position(spec, facts, config):
    first, second = _camera_pair(facts, spec)
    heading = first.heading
    offset = (second.position - first.position)[:2]
    if heading is None:
        return _choice(
            "camera_camera_position", "", spec["frames"], DIRECTIONS_4, None, {}, False, "no heading"
        )
    angle = _signed_angle_deg(heading, offset)
    label, boundary = _direction_of(angle)
    clear = (
        boundary >= config.direction_margin_deg and np.linalg.norm(offset) >= config.min_direction_distance_m
    )
    question = (
        "Facing the way the camera of image 1 looks, where was the camera that took image 2: "
        "in front, behind, to the left or to the right?"
    )
    return _choice(
        "camera_camera_position",
        question,
        spec["frames"],
        DIRECTIONS_4,
        label,
        {"angle_deg": angle, "distance_m": float(np.linalg.norm(offset)), "boundary_margin_deg": boundary},
        clear,
    )


def _camera_camera_elevation(spec, facts, config):
    first, second = _camera_pair(facts, spec)
    rise = float(second.position[2] - first.position[2])
    question = "Was image 2 taken from a higher or a lower position than image 1?"
    return _choice(
        "camera_camera_elevation",
        question,
        spec["frames"],
        ["higher", "lower"],
        "higher" if rise > 0 else "lower",
        {"height_change_m": rise},
        abs(rise) >= config.elevation_margin_m,
    )


def _visibility_comparison(spec, facts, config):
    object_id = spec["object_id"]
    name = _name(facts, object_id)
    shares = []
    for frame in spec["frames"]:
        _camera(facts, frame)
        seen = facts.seen_in(frame, object_id)
        shares.append(seen.visible_fraction if seen is not None else 0.0)
    gap = abs(shares[0] - shares[1])
    clear = gap >= config.visibility_margin and _all_visible(facts, spec["frames"], [object_id], config)
    question = f"In which image is a larger part of the {name} visible (not hidden by other objects and inside the image)?"
    return _choice(
        "visibility_comparison",
        question,
        spec["frames"],
        ["image 1", "image 2"],
        "image 1" if shares[0] > shares[1] else "image 2",
        {"object_id": object_id, "visible_fractions": shares, "gap": gap},
        clear,
    )


def _camera_object_position(spec, facts, config):
    object_id = spec["object_id"]
    show, query = spec["frames"]
    name = _name(facts, object_id)
    camera = _camera(facts, query)
    _camera(facts, show)
    heading = camera.heading
    offset = (facts.objects[object_id].centroid - camera.position)[:2]
    if heading is None:
        return _choice(
            "camera_object_position", "", spec["frames"], DIRECTIONS_4, None, {}, False, "no heading"
        )
    angle = _signed_angle_deg(heading, offset)
    label, boundary = _direction_of(angle)
    clear = (
        boundary >= config.direction_margin_deg
        and np.linalg.norm(offset) >= config.min_direction_distance_m
        and _clearly_visible(facts, show, object_id, config)
    )
    question = (
        f"The {name} is shown in image 1. Facing the way the camera of image 2 looks, where was the {name} "
        "when image 2 was taken: in front, behind, to the left or to the right?"
    )
    return _choice(
        "camera_object_position",
        question,
        spec["frames"],
        DIRECTIONS_4,
        label,
        {"object_id": object_id, "angle_deg": angle, "boundary_margin_deg": boundary},
        clear,
    )


def _region_of(u: float, v: float) -> tuple[str | None, float]:
    if not (0.0 <= u < 1.0 and 0.0 <= v < 1.0):
        return None, 0.0
    column = min(int(u * 3), 2)
    row = min(int(v * 3), 2)
    margin = min(min(abs(u - line), abs(v - line)) for line in (1 / 3, 2 / 3))
    return f"{REGION_ROWS[row]} {REGION_COLUMNS[column]}", margin


def _camera_region_position(spec, facts, config):
    frame, object_id = spec["frame"], spec["object_id"]
    name = _name(facts, object_id)
    camera = _camera(facts, frame)
    point = camera.to_camera(facts.objects[object_id].centroid)
    region, margin = None, 0.0
    uv = None
    if point[2] > 0:
        u = (camera.intrinsics[0, 0] * point[0] / point[2] + camera.intrinsics[0, 2] + 0.5) / camera.width
        v = (camera.intrinsics[1, 1] * point[1] / point[2] + camera.intrinsics[1, 2] + 0.5) / camera.height
        uv = [float(u), float(v)]
        region, margin = _region_of(u, v)
    clear = (
        region is not None
        and margin >= config.region_margin
        and _clearly_visible(facts, frame, object_id, config)
    )
    question = f"In which part of this image is the centre of the {name}?"
    return _choice(
        "camera_region_position",
        question,
        [frame],
        spec["options"],
        region,
        {"object_id": object_id, "centre_uv_fraction": uv, "margin": margin},
        clear,
    )


def _camera_motion(spec, facts, config):
    first, second = _camera_pair(facts, spec)
    heading_1, heading_2 = first.heading, second.heading
    if heading_1 is None or heading_2 is None:
        return _choice("camera_motion", "", spec["frames"], spec["options"], None, {}, False, "no heading")
    turn = _signed_angle_deg(heading_1, heading_2)
    offset = (second.position - first.position)[:2]
    distance = float(np.linalg.norm(offset))
    label = None
    clear = False
    if abs(turn) >= config.turn_min_deg and distance <= config.turn_max_translation_m:
        label, clear = ("turned left" if turn > 0 else "turned right"), True
    elif distance >= config.move_min_translation_m and abs(turn) <= config.move_max_turn_deg:
        direction, boundary = _direction_of(_signed_angle_deg(heading_1, offset))
        label = {
            "in front": "moved forward",
            "behind": "moved backward",
            "to the left": "moved left",
            "to the right": "moved right",
        }[direction]
        clear = boundary >= config.direction_margin_deg
    question = "How did the camera move between image 1 and image 2?"
    return _choice(
        "camera_motion",
        question,
        spec["frames"],
        spec["options"],
        label,
        {"turn_deg": turn, "translation_m": distance},
        clear,
    )


def _attribute_measurement(spec, facts, config):
    object_id, attribute = spec["object_id"], spec["attribute"]
    name = _name(facts, object_id)
    length, width, height = (float(v) for v in facts.objects[object_id].extents)
    value = {"height": height, "length": length, "width": width}[attribute] * 100.0
    question = {
        "height": f"How tall is the {name} (its height), in centimetres?",
        "length": f"How long is the {name}, i.e. the longer side of its footprint seen from above, in centimetres?",
        "width": f"How wide is the {name}, i.e. the shorter side of its footprint seen from above, in centimetres?",
    }[attribute]
    clear = _all_visible(facts, spec["frames"], [object_id], config)
    return _numeric(
        "attribute_measurement",
        question,
        spec["frames"],
        value,
        "cm",
        {"object_id": object_id, "attribute": attribute, "value_cm": value},
        clear,
    )


EVALUATORS: dict[str, Callable[[dict, SceneFacts, TaskConfig], TaskAnswer]] = {
    "object_count": _object_count,
    "object_size": _object_size,
    "camera_object_distance": _camera_object_distance,
    "absolute_distance": _absolute_distance,
    "relative_distance": _relative_distance,
    "depth_order": _depth_order,
    "relative_direction_scene": _relative_direction_scene,
    "relative_direction_image": _relative_direction_image,
    "room_size": _room_size,
    "camera_camera_position": _camera_camera_position,
    "camera_camera_elevation": _camera_camera_elevation,
    "visibility_comparison": _visibility_comparison,
    "camera_object_position": _camera_object_position,
    "camera_region_position": _camera_region_position,
    "camera_motion": _camera_motion,
    "attribute_measurement": _attribute_measurement,
}


def evaluate_spec(
    task_type: str, spec: Mapping[str, Any], facts: SceneFacts, config: TaskConfig = TaskConfig()
) -> TaskAnswer:
    """Compute the answer of one question spec on ``facts`` (raises :class:`SpecError` for unknown ids)."""
    if task_type not in EVALUATORS:
        raise ValueError(f"unknown DGE task type {task_type!r}; valid: {', '.join(TASK_TYPES)}")
    return EVALUATORS[task_type](dict(spec), facts, config)


# --------------------------------------------------------------------------------------------------
# Candidate specs
# --------------------------------------------------------------------------------------------------


def nameable_objects(facts: SceneFacts, config: TaskConfig) -> list[int]:
    """Objects a question can name by label alone: the label is unique in the scene and not excluded."""
    counts: dict[str, int] = {}
    for obj in facts.objects.values():
        counts[obj.label] = counts.get(obj.label, 0) + 1
    return sorted(
        o
        for o, obj in facts.objects.items()
        if counts[obj.label] == 1
        and obj.label not in facts.unmeasured_labels
        and obj.label.lower() not in config.excluded_labels
        and obj.label.strip()
    )


def frames_showing(facts: SceneFacts, object_id: int, config: TaskConfig) -> list[int]:
    """Frames where the object is clearly visible, best first (largest visible share, then lowest index)."""
    frames = [f for f in facts.cameras if _clearly_visible(facts, f, object_id, config)]
    return sorted(frames, key=lambda f: (-facts.seen[(f, object_id)].visible_fraction, f))


def cover_frames(facts: SceneFacts, object_ids: Iterable[int], config: TaskConfig) -> list[int] | None:
    """Few frames (at most ``max_images``) in which every object is clearly visible at least once; None if impossible."""
    remaining = set(object_ids)
    chosen: list[int] = []
    candidates = sorted(facts.cameras)
    while remaining:
        best = max(
            candidates,
            key=lambda f: (sum(_clearly_visible(facts, f, o, config) for o in remaining), -f),
            default=None,
        )
        if best is None:
            return None
        covered = {o for o in remaining if _clearly_visible(facts, best, o, config)}
        if not covered or len(chosen) >= config.max_images:
            return None
        chosen.append(best)
        remaining -= covered
    return sorted(chosen)


def _spread(frames: list[int], count: int) -> list[int]:
    if len(frames) <= count:
        return list(frames)
    positions = np.linspace(0, len(frames) - 1, count).round().astype(int)
    return [frames[p] for p in positions]


def candidate_specs(
    task_type: str, facts: SceneFacts, config: TaskConfig, rng: np.random.Generator
) -> Iterator[dict]:
    """Candidate specs of one task type, drawn at random (seeded); :func:`evaluate_spec` decides which are clear.

    Combinatorial spaces (object triples, frame pairs) are sampled, never enumerated, so long scans
    cost no more than short ones; at most ``candidate_draws`` candidates are drawn.
    """
    names = nameable_objects(facts, config)
    frames = sorted(facts.cameras)
    shown = {o: frames_showing(facts, o, config) for o in names}
    visible = [o for o in names if shown[o]]
    draws = config.candidate_draws

    def pick(items: list):
        return items[int(rng.integers(len(items)))]

    def distinct(items: list, count: int) -> list:
        return [items[i] for i in rng.choice(len(items), size=count, replace=False)]

    if task_type == "object_count":
        labels = sorted(
            {obj.label for obj in facts.objects.values() if obj.label.lower() not in config.excluded_labels}
        )
        for index in rng.permutation(len(labels)):
            members = [o for o, obj in facts.objects.items() if obj.label == labels[index]]
            cover = cover_frames(facts, members, config)
            if cover is not None:
                yield {"label": labels[index], "frames": cover}
    elif task_type in ("object_size", "attribute_measurement"):
        for index in rng.permutation(len(visible)):
            o = visible[index]
            spec = {"object_id": o, "frames": [shown[o][0]]}
            if task_type == "attribute_measurement":
                spec["attribute"] = ATTRIBUTES[int(rng.integers(len(ATTRIBUTES)))]
            yield spec
    elif task_type == "room_size":
        if frames:
            yield {"frames": _spread(frames, config.max_images)}
    elif task_type in ("camera_object_distance", "camera_region_position"):
        for _ in range(draws if visible else 0):
            o = pick(visible)
            spec = {"frame": pick(shown[o]), "object_id": o}
            if task_type == "camera_region_position":
                spec["options"] = _region_options(facts, spec["frame"], o, rng)
                if spec["options"] is None:
                    continue
            yield spec
    elif task_type in ("absolute_distance", "relative_distance", "relative_direction_scene"):
        needed = {"absolute_distance": 2, "relative_distance": 3, "relative_direction_scene": 3}[task_type]
        for _ in range(draws if len(visible) >= needed else 0):
            if task_type == "relative_distance":
                group = distinct(visible, int(min(len(visible), rng.integers(3, 6))))
            else:
                group = distinct(visible, needed)
            cover = cover_frames(facts, group, config)
            if cover is None:
                continue
            if task_type == "absolute_distance":
                yield {"objects": sorted(group), "frames": cover}
            elif task_type == "relative_distance":
                yield {"anchor": group[0], "choices": group[1:], "frames": cover}
            else:
                yield {"standing": group[0], "facing": group[1], "target": group[2], "frames": cover}
    elif task_type in ("depth_order", "relative_direction_image"):
        in_view = {f: [o for o in visible if _clearly_visible(facts, f, o, config)] for f in frames}
        usable = [f for f in frames if len(in_view[f]) >= 2]
        for _ in range(draws if usable else 0):
            f = pick(usable)
            yield {"frame": f, "objects": sorted(distinct(in_view[f], 2))}
    elif task_type in ("camera_camera_position", "camera_camera_elevation", "camera_motion"):
        for _ in range(draws if len(frames) >= 2 else 0):
            if task_type == "camera_motion":
                # Motions are read between nearby frames of the sequence.
                first = int(rng.integers(len(frames)))
                step = int(rng.integers(1, config.motion_window + 1)) * (1 if rng.uniform() < 0.5 else -1)
                second = int(np.clip(first + step, 0, len(frames) - 1))
                if second == first:
                    continue
                yield {"frames": [frames[first], frames[second]], "options": list(MOTIONS)}
            else:
                yield {"frames": distinct(frames, 2)}
    elif task_type == "visibility_comparison":
        for _ in range(draws if visible and len(frames) >= 2 else 0):
            o = pick(visible)
            showing = pick(shown[o])
            other = pick([f for f in frames if f != showing])
            yield {"object_id": o, "frames": [showing, other] if rng.uniform() < 0.5 else [other, showing]}
    elif task_type == "camera_object_position":
        for _ in range(draws if visible and len(frames) >= 2 else 0):
            o = pick(visible)
            showing = pick(shown[o][:3])
            yield {"object_id": o, "frames": [showing, pick([f for f in frames if f != showing])]}


def _region_options(
    facts: SceneFacts, frame: int, object_id: int, rng: np.random.Generator
) -> list[str] | None:
    answer = _camera_region_position(
        {"frame": frame, "object_id": object_id, "options": REGIONS}, facts, TaskConfig()
    )
    if answer.answer_option is None:
        return None
    others = [region for region in REGIONS if region != answer.answer_option]
    picked = [others[i] for i in rng.choice(len(others), size=3, replace=False)]
    return sorted([answer.answer_option, *picked], key=REGIONS.index)


def _finalise_options(answer: TaskAnswer, rng: np.random.Generator, max_options: int = 4) -> TaskAnswer:
    """Cut option lists longer than ``max_options`` to the answer plus seeded distractors (camera motion)."""
    if len(answer.options) <= max_options or answer.answer_option is None:
        return answer
    others = [option for option in answer.options if option != answer.answer_option]
    picked = [others[i] for i in rng.choice(len(others), size=max_options - 1, replace=False)]
    options = sorted([answer.answer_option, *picked], key=answer.options.index)
    return TaskAnswer(**{**answer.__dict__, "options": options})


# --------------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------------


def task_id_for(scene_id: str, task_type: str, spec: Mapping[str, Any]) -> str:
    """``<scene_id>/<task_type>/<10 hex digits of the spec's sha256>``.

    >>> task_id_for("scene0000_00", "room_size", {"frames": [0, 3]})
    'scene0000_00/room_size/b633ec566f'
    """
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{scene_id}/{task_type}/{digest}"


def shuffled_options(task_id: str, options: list[str]) -> list[str]:
    """Options in an order drawn from the task id (so gold letters are spread evenly and reproducibly)."""
    rng = np.random.default_rng(stable_int(task_id, "options"))
    return [options[i] for i in rng.permutation(len(options))]


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


def generate_tasks(facts: SceneFacts, config: TaskConfig = TaskConfig()) -> list[GeneratedTask]:
    """Every clear question of the configured types for one scene (at most ``max_tasks_per_type`` each)."""
    tasks: list[GeneratedTask] = []
    for task_type in config.task_types:
        rng = np.random.default_rng(stable_int(config.seed, facts.scene_id, task_type))
        accepted = 0
        seen_ids: set[str] = set()
        for spec in candidate_specs(task_type, facts, config, rng):
            answer = evaluate_spec(task_type, spec, facts, config)
            if not answer.clear or (answer.options and answer.answer_option not in answer.options):
                continue
            answer = _finalise_options(answer, rng)
            if answer.options and answer.options != spec.get("options", answer.options):
                spec = {**spec, "options": answer.options}
            task_id = task_id_for(facts.scene_id, task_type, spec)
            if task_id in seen_ids:
                continue
            seen_ids.add(task_id)
            options = shuffled_options(task_id, answer.options) if answer.options else []
            index = options.index(answer.answer_option) if options else None
            tasks.append(GeneratedTask(task_id, facts.scene_id, task_type, spec, answer, options, index))
            accepted += 1
            if accepted >= config.max_tasks_per_type:
                break
    return tasks


def _image_cell(camera: CameraFact, scene_id: str, config: TaskConfig, cache: dict[int, dict]) -> dict:
    if camera.frame_index in cache:
        return cache[camera.frame_index]
    if camera.color_path is None:
        raise SpecError(f"frame {camera.frame_index} of scene {scene_id} has no image file")
    name = f"{scene_id}/{camera.frame_index}{'.jpg' if config.image_max_side else ''}"
    if config.image_max_side:
        from PIL import Image

        with Image.open(camera.color_path) as image:
            image = image.convert("RGB")
            image.thumbnail((config.image_max_side, config.image_max_side))
            cell = encode_image(image, path=name, fmt="JPEG")
    else:
        suffix = camera.color_path.rsplit(".", 1)[-1] if "." in camera.color_path else "jpg"
        cell = encode_image(camera.color_path, path=f"{name}.{suffix}")
    cache[camera.frame_index] = cell
    return cell


def tasks_to_frame(
    tasks: list[GeneratedTask],
    facts: SceneFacts,
    config: TaskConfig = TaskConfig(),
    images: dict[int, dict] | None = None,
) -> pl.DataFrame:
    """``dge_tasks`` rows for generated tasks (images read from the frames' colour files).

    ``images`` may map frame indices to ready image cells (single-image mode passes its image).
    """
    cache: dict[int, dict] = dict(images or {})
    split = stable_split(facts.scene_id, config.test_fraction)
    rows = []
    for task in tasks:
        answer = task.answer
        cells = [
            cache[f] if f in cache else _image_cell(facts.cameras[f], facts.scene_id, config, cache)
            for f in answer.frame_indices
        ]
        facts_json = json.dumps(
            {
                "spec": task.spec,
                "values": answer.values,
                "geometry_source": facts.geometry_source,
                "margins": _margins(task.task_type, config),
                **({"provenance": facts.provenance} if facts.provenance else {}),
            },
            default=_json_default,
            sort_keys=True,
        )
        rows.append(
            {
                "task_id": task.task_id,
                "scene_id": task.scene_id,
                "task_type": task.task_type,
                "images": cells,
                "frame_indices": list(answer.frame_indices),
                "question": answer.question,
                "options": task.options,
                "answer_index": task.answer_index,
                "answer": LETTERS[task.answer_index]
                if task.answer_index is not None
                else format_number(answer.numeric_answer, answer.unit),
                "numeric_answer": answer.numeric_answer,
                "unit": answer.unit,
                "facts": facts_json,
                "geometry_source": facts.geometry_source,
                "split": split,
            }
        )
    return pl.DataFrame(rows, schema=polars_schema(DgeTasks))


def _margins(task_type: str, config: TaskConfig) -> dict[str, float]:
    relevant = {
        "relative_distance": ("distance_margin_m", "distance_margin_relative"),
        "depth_order": ("depth_margin_m",),
        "relative_direction_scene": ("direction_margin_deg", "min_direction_distance_m"),
        "relative_direction_image": ("image_direction_margin_deg",),
        "camera_camera_position": ("direction_margin_deg", "min_direction_distance_m"),
        "camera_camera_elevation": ("elevation_margin_m",),
        "visibility_comparison": ("visibility_margin",),
        "camera_object_position": ("direction_margin_deg", "min_direction_distance_m"),
        "camera_region_position": ("region_margin",),
        "camera_motion": (
            "turn_min_deg",
            "turn_max_translation_m",
            "move_min_translation_m",
            "move_max_turn_deg",
        ),
    }.get(task_type, ())
    names = ("min_visibility", "min_in_frame", *relevant)
    return {name: getattr(config, name) for name in names}


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def build_scene_tasks(
    geometry_row: Mapping[str, Any],
    visibility: pl.DataFrame,
    frames: pl.DataFrame,
    config: TaskConfig = TaskConfig(),
) -> pl.DataFrame:
    """The ``dge_tasks`` rows of one scanned scene (see :func:`generate_tasks` and :func:`tasks_to_frame`)."""
    facts = scene_facts_from_tables(geometry_row, visibility, frames, config.min_room_rectangularity)
    tasks = generate_tasks(facts, config)
    logger.info("scene %s: %d DGE tasks", facts.scene_id, len(tasks))
    return tasks_to_frame(tasks, facts, config)
