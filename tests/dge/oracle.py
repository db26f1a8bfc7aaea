"""An independent oracle for DGE answers: truth straight from the sample world's scene description.

Nothing here comes from ``assets.dge``: the answer of a ``dge_tasks`` row is recomputed from the
generator's ``truth/world.json`` (each object's exact centroid and extents, each view's true
pose) with the task's own definition, and compared with the row's answer. Only the row's spec
(which objects and frames it asks about) is read from the row.

Covered task types: ``object_size``, ``attribute_measurement``, ``camera_object_distance``,
``absolute_distance``, ``relative_distance``, ``depth_order``, ``room_size``,
``camera_camera_elevation``. A numeric answer is wrong when it is off by more than
``NUMERIC_TOLERANCE`` of the truth (and more than the absolute floor of its unit); a choice is
wrong when it is not the oracle's choice.
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
    "object_size",
    "attribute_measurement",
    "camera_object_distance",
    "absolute_distance",
    "relative_distance",
    "depth_order",
    "room_size",
    "camera_camera_elevation",
)


@dataclass
class SceneTruth:
    """One scene of the truth file, indexed for the oracle (world frame: z up, floor at z = 0)."""

    objects: dict[int, dict[str, Any]]
    poses: dict[int, np.ndarray]
    room: dict[str, float]

    @classmethod
    def from_truth(cls, scene: Mapping[str, Any]) -> SceneTruth:
        """From one entry of ``truth["scenes"]``."""
        return cls(
            objects={item["object_id"]: item for item in scene["objects"]},
            poses={
                view["frame_index"]: np.asarray(view["pose"], dtype=np.float64) for view in scene["views"]
            },
            room=dict(scene["room"]),
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


def true_answer(task_type: str, spec: Mapping[str, Any], truth: SceneTruth) -> float | str:
    """The oracle's answer: a number in the row's unit, or the text of the right option."""
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
    raise ValueError(f"the oracle does not cover {task_type}")


def is_wrong(row: Mapping[str, Any], truth: SceneTruth) -> bool:
    """Whether a ``dge_tasks`` row's answer disagrees with the oracle."""
    spec = json.loads(row["facts"])["spec"]
    expected = true_answer(row["task_type"], spec, truth)
    if isinstance(expected, str):
        return row["options"][row["answer_index"]] != expected
    unit = row["unit"]
    error = abs(float(row["numeric_answer"]) - expected)
    return error > ABSOLUTE_FLOOR[unit] and error > NUMERIC_TOLERANCE[unit] * abs(expected)


@dataclass
class AccuracyTable:
    """Rows and wrong answers per task type."""

    rows: dict[str, int] = field(default_factory=dict)
    wrong: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

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
        lines = ["| task type | rows | wrong |", "|---|---|---|"]
        for task_type in COVERED:
            lines.append(f"| {task_type} | {self.rows.get(task_type, 0)} | {self.wrong.get(task_type, 0)} |")
        return "\n".join(lines)
