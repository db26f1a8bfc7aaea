"""An independent oracle for DGE answers: truth straight from the sample world's scene description.

Nothing here comes from ``assets.dge``: the answer of a ``dge_tasks`` row is recomputed from the
generator's ``truth/world.json`` (each object's exact centroid and extents, each view's true
pose) with the task's own definition, and compared with the row's answer. Only the row's spec
(which objects and frames it asks about) is read from the row.

All 16 task types are covered. A numeric answer is wrong when it is off by more than
``NUMERIC_TOLERANCE`` of the truth (and more than the absolute floor of its unit). A choice is
wrong when the gold option is not true under the oracle or when any offered distractor is true
(for most types exactly one option is true; for ``camera_motion`` every offered statement is
judged on its own: a turn of at least ``TURN_TRUE_DEG`` that way, a move of at least
``MOVE_TRUE_M`` along the camera's own axes; a rotation within ``HALF_TURN_EITHER_WAY_DEG`` of a half turn
is a turn either way, so both turn statements are true of it).

Definitions, written from the task wording (world frame: ``z`` up; OpenCV cameras, pose =
camera to world): a camera's heading is its optical axis projected onto the floor; directions on
the floor are signed angles, counter-clockwise (left) positive; in front/behind/left/right split
the circle at 45 and 135 degrees, quadrants at 0 and 90; left/right in an image compares the
columns the centroids project to; an image region is the 3x3-grid cell holding the centre of the
box around the object's visible pixels; an object's visible share in a view is its unoccluded
share times the share of its silhouette inside the image.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

NUMERIC_TOLERANCE = {"cm": 0.10, "m": 0.10, "m^2": 0.05}
"""Relative error above which a numeric answer is wrong, by unit."""
ABSOLUTE_FLOOR = {"cm": 3.0, "m": 0.05, "m^2": 0.5}
"""Errors below this (in the unit) are never wrong (rounding and the size of the smallest objects)."""
COVERED = (
    "object_count",
    "object_size",
    "attribute_measurement",
    "room_size",
    "camera_object_distance",
    "absolute_distance",
    "relative_distance",
    "depth_order",
    "relative_direction_scene",
    "relative_direction_image",
    "camera_object_position",
    "camera_region_position",
    "camera_camera_position",
    "camera_camera_elevation",
    "camera_motion",
    "visibility_comparison",
)
"""Every task type, in the ``dge_tasks`` contract's order (written out here, not imported)."""
TURN_TRUE_DEG = 10.0
"""A camera "turned left/right" when its heading rotated at least this much that way."""
MOVE_TRUE_M = 0.2
"""A camera "moved forward/backward/left/right" when it went at least this far along that axis of view 1."""
HALF_TURN_EITHER_WAY_DEG = 20.0
"""Two views whose headings differ by more than 180 minus this could come from a turn either way (which way the
camera went between them is not in the pair of images): "turned left" and "turned right" are both true."""


@dataclass
class SceneTruth:
    """One scene of the truth file, indexed for the oracle (world frame: z up, floor at z = 0)."""

    objects: dict[int, dict[str, Any]]
    poses: dict[int, np.ndarray]
    room: dict[str, float]
    views: dict[int, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_truth(cls, scene: Mapping[str, Any]) -> SceneTruth:
        """From one entry of ``truth["scenes"]``."""
        return cls(
            objects={item["object_id"]: item for item in scene["objects"]},
            poses={
                view["frame_index"]: np.asarray(view["pose"], dtype=np.float64) for view in scene["views"]
            },
            room=dict(scene["room"]),
            views={view["frame_index"]: view for view in scene["views"]},
        )

    def centre(self, object_id: int) -> np.ndarray:
        """The object's exact centroid."""
        return np.asarray(self.objects[object_id]["centroid"], dtype=np.float64)

    def dimensions(self, object_id: int) -> dict[str, float]:
        """Length (longer side seen from above), width and height in metres."""
        x, y, z = (float(v) for v in self.objects[object_id]["extents"])
        return {"length": max(x, y), "width": min(x, y), "height": z, "size": max(x, y, z)}

    def camera_depth(self, frame: int, object_id: int) -> float:
        """Depth (camera z) of the object's centroid in the frame's true camera."""
        pose = self.poses[frame]
        return float((pose[:3, :3].T @ (self.centre(object_id) - pose[:3, 3]))[2])

    def label(self, object_id: int) -> str:
        """The object's label (its category)."""
        return str(self.objects[object_id]["category"])

    def heading(self, frame: int) -> np.ndarray:
        """The camera's optical axis projected onto the floor, unit length."""
        forward = self.poses[frame][:2, 2]
        return forward / np.linalg.norm(forward)

    def floor_angle(self, frame: int, point: np.ndarray) -> float:
        """Signed angle (degrees, left positive) from the camera's heading to ``point`` seen from above."""
        return _floor_angle(self.heading(frame), np.asarray(point)[:2] - self.poses[frame][:2, 3])

    def image_column(self, frame: int, object_id: int) -> float:
        """The image column (pixels) the object's centroid projects to."""
        pose, view = self.poses[frame], self.views[frame]
        x, _, z = pose[:3, :3].T @ (self.centre(object_id) - pose[:3, 3])
        intrinsics = np.asarray(view["color_intrinsics"])
        return float(intrinsics[0, 0] * x / z + intrinsics[0, 2])

    def seen(self, frame: int, object_id: int) -> dict[str, Any] | None:
        """The view's record of the object (None when the view does not show it)."""
        for item in self.views[frame]["objects"]:
            if item["object_id"] == object_id:
                return item
        return None

    def visible_share(self, frame: int, object_id: int) -> float:
        """Unoccluded share times the share of the silhouette inside the image (0 when not shown)."""
        item = self.seen(frame, object_id)
        if item is None or not item["unoccluded_pixels"]:
            return 0.0
        return item["visible_pixels"] / item["unoccluded_pixels"] * (1.0 - item["truncation"])

    def region(self, frame: int, object_id: int) -> str | None:
        """The 3x3-grid cell ("top left" ... "bottom right") holding the centre of the visible pixels' box."""
        item = self.seen(frame, object_id)
        if item is None or item["bbox_px"] is None:
            return None
        x1, y1, x2, y2 = item["bbox_px"]
        view = self.views[frame]
        column = int(3 * (x1 + x2) / 2 / view["width"])
        row = int(3 * (y1 + y2) / 2 / view["height"])
        return f"{('top', 'middle', 'bottom')[row]} {('left', 'centre', 'right')[column]}"


def _floor_angle(reference: np.ndarray, vector: np.ndarray) -> float:
    return float(
        np.degrees(
            np.arctan2(
                reference[0] * vector[1] - reference[1] * vector[0],
                reference[0] * vector[0] + reference[1] * vector[1],
            )
        )
    )


def _side(angle: float) -> str:
    """In front / behind / to the left / to the right of a signed floor angle."""
    if abs(angle) <= 45:
        return "in front"
    if abs(angle) >= 135:
        return "behind"
    return "to the left" if angle > 0 else "to the right"


def motion_statements(first: int, second: int, truth: SceneTruth) -> set[str]:
    """Every camera-motion statement that is true from view ``first`` to view ``second``."""
    heading = truth.heading(first)
    left = np.array([-heading[1], heading[0]])
    turn = _floor_angle(heading, truth.heading(second))
    offset = truth.poses[second][:2, 3] - truth.poses[first][:2, 3]
    along = {
        "moved forward": float(offset @ heading),
        "moved backward": -float(offset @ heading),
        "moved left": float(offset @ left),
        "moved right": -float(offset @ left),
    }
    true = {name for name, distance in along.items() if distance >= MOVE_TRUE_M}
    either_way = abs(turn) >= 180.0 - HALF_TURN_EITHER_WAY_DEG
    if turn >= TURN_TRUE_DEG or either_way:
        true.add("turned left")
    if turn <= -TURN_TRUE_DEG or either_way:
        true.add("turned right")
    return true


def true_answer(task_type: str, spec: Mapping[str, Any], truth: SceneTruth) -> float | str | set[str]:
    """The oracle's answer: a number in the row's unit, the text of the right option, or the true statements."""
    if task_type == "object_count":
        return float(sum(1 for item in truth.objects.values() if item["category"] == spec["label"]))
    if task_type == "object_size":
        return truth.dimensions(spec["object_id"])["size"] * 100.0
    if task_type == "attribute_measurement":
        return truth.dimensions(spec["object_id"])[spec["attribute"]] * 100.0
    if task_type == "camera_object_distance":
        return float(np.linalg.norm(truth.centre(spec["object_id"]) - truth.poses[spec["frame"]][:3, 3]))
    if task_type == "absolute_distance":
        a, b = spec["objects"]
        return float(np.linalg.norm(truth.centre(a) - truth.centre(b)))
    if task_type == "relative_distance":
        anchor = truth.centre(spec["anchor"])
        closest = min(spec["choices"], key=lambda o: float(np.linalg.norm(truth.centre(o) - anchor)))
        return truth.label(closest)
    if task_type == "depth_order":
        nearest = min(spec["objects"], key=lambda o: truth.camera_depth(spec["frame"], o))
        return truth.label(nearest)
    if task_type == "room_size":
        return truth.room["width"] * truth.room["depth"]
    if task_type == "camera_camera_elevation":
        first, second = (truth.poses[f][2, 3] for f in spec["frames"])
        return "higher" if second > first else "lower"
    if task_type == "relative_direction_scene":
        standing, facing, target = (truth.centre(spec[key])[:2] for key in ("standing", "facing", "target"))
        angle = _floor_angle(facing - standing, target - standing)
        return ("front-" if abs(angle) < 90 else "back-") + ("left" if angle > 0 else "right")
    if task_type == "relative_direction_image":
        a, b = spec["objects"]
        return (
            "left" if truth.image_column(spec["frame"], a) < truth.image_column(spec["frame"], b) else "right"
        )
    if task_type == "camera_object_position":
        _, query = spec["frames"]
        return _side(truth.floor_angle(query, truth.centre(spec["object_id"])))
    if task_type == "camera_region_position":
        return truth.region(spec["frame"], spec["object_id"]) or "not shown"
    if task_type == "camera_camera_position":
        first, second = spec["frames"]
        return _side(truth.floor_angle(first, truth.poses[second][:3, 3]))
    if task_type == "camera_motion":
        return motion_statements(*spec["frames"], truth)
    if task_type == "visibility_comparison":
        shares = [truth.visible_share(f, spec["object_id"]) for f in spec["frames"]]
        return "image 1" if shares[0] > shares[1] else "image 2"
    raise ValueError(f"the oracle does not cover {task_type}")


def is_wrong(row: Mapping[str, Any], truth: SceneTruth) -> bool:
    """Whether a ``dge_tasks`` row's answer disagrees with the oracle."""
    spec = json.loads(row["facts"])["spec"]
    expected = true_answer(row["task_type"], spec, truth)
    if isinstance(expected, (str, set)):
        true = expected if isinstance(expected, set) else {expected}
        gold = row["options"][row["answer_index"]]
        return gold not in true or any(option in true for option in row["options"] if option != gold)
    unit = row["unit"]
    error = abs(float(row["numeric_answer"]) - expected)
    if unit is None:
        return error > 0
    return error > ABSOLUTE_FLOOR[unit] and error > NUMERIC_TOLERANCE[unit] * abs(expected)


@dataclass
class AccuracyTable:
    """Rows and wrong answers per task type."""

    rows: dict[str, int] = field(default_factory=dict)
    wrong: dict[str, int] = field(default_factory=dict)
    withheld: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    def add_withheld(self, withheld: Mapping[str, Mapping[str, int]]) -> None:
        """Add the generator's withheld candidates (per task type, per reason) to the table."""
        for task_type, reasons in withheld.items():
            self.withheld[task_type] = self.withheld.get(task_type, 0) + sum(reasons.values())

    def add(self, rows: Iterable[Mapping[str, Any]], truth: SceneTruth) -> None:
        """Judge every covered row."""
        for row in rows:
            task_type = row["task_type"]
            if task_type not in COVERED:
                continue
            self.rows[task_type] = self.rows.get(task_type, 0) + 1
            if is_wrong(row, truth):
                self.wrong[task_type] = self.wrong.get(task_type, 0) + 1
                self.examples.append(f"{row['task_id']}: {row['answer']} ({row['question']})")

    def markdown(self) -> str:
        """A markdown table, one line per covered task type."""
        lines = ["| task type | rows | wrong | withheld |", "|---|---|---|---|"]
        for task_type in COVERED:
            counts = (
                self.rows.get(task_type, 0),
                self.wrong.get(task_type, 0),
                self.withheld.get(task_type, 0),
            )
            lines.append(f"| {task_type} | {' | '.join(str(count) for count in counts)} |")
        return "\n".join(lines)
