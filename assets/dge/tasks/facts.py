"""What the task types read about one scene: objects, cameras, per-frame visibility and the room.

:class:`SceneFacts` is built from the ``scene_geometry``, ``frame_visibility`` and ``rgbd_frames``
tables for a scanned scene (:func:`scene_facts_from_tables`), from one image's estimated depth in
single-image mode, or from a synthetic world's exact truth to audit answers.

Conventions (gravity-aligned frame: metres, ``z`` up; OpenCV cameras): an object's position is its
centroid (the centre of its oriented box); a camera's heading is its viewing direction projected
onto the floor.

>>> pose = np.eye(4); pose[:3, :3] = [[1, 0, 0], [0, 0, 1], [0, -1, 0]]
>>> CameraFact(frame_index=0, pose=pose, intrinsics=np.eye(3), width=64, height=48).heading.tolist()
[0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from data_contracts.origin import REAL
from data_contracts.scan_datasets import SCANNET

CONFIDENCE_COLUMNS = (
    "observed_views",
    "extent_coverage",
    "depth_noise_m",
    "position_uncertainty_m",
    "size_uncertainty_m",
)
"""Per-object measurement confidence in ``scene_geometry``; questions and margins use them when present."""


@dataclass(frozen=True)
class ObjectFact:
    """An object's label, centroid and oriented-box extents ``(length, width, height)``, length >= width.

    The measurement confidence (frames that saw the object, share of its extent they cover, depth
    noise, standard deviations of its centroid and size) is None when the geometry does not carry it
    (exact truth, single images, older tables); then the settings' fixed margins apply.
    """

    object_id: int
    label: str
    centroid: np.ndarray
    extents: np.ndarray
    observed_views: int | None = None
    extent_coverage: float | None = None
    depth_noise_m: float | None = None
    position_uncertainty_m: float | None = None
    size_uncertainty_m: float | None = None


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
    upright_turns: int = 0
    """Clockwise quarter turns that make the stored colour image upright (``rgbd_frames.upright_turns``)."""

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
    room_problem: str = ""
    """Why the room's area is not asked about (``""`` when ``room_area_m2`` is known or no reason was given)."""
    up_problem: str = ""
    """Why no question that depends on "up" is asked (``""`` when the gravity direction is known)."""
    geometry_source: str = "scanned"
    origin: str = REAL
    dataset: str = SCANNET
    """The scan's data set (``rgbd_frames.source``), or ``visual_genome`` for one image's estimated depth."""
    provenance: dict[str, Any] = field(default_factory=dict)

    def seen_in(self, frame_index: int, object_id: int) -> SeenFact | None:
        """The visibility of ``object_id`` in ``frame_index`` (None when not in view)."""
        return self.seen.get((frame_index, object_id))


ROOM_NOT_WALLED = "a side of the room has no wall in the frames (the capture saw part of the room)"
UP_UNKNOWN = "no floor was found and the scan gives no gravity direction ('up' would be the cameras' guess)"
"""Withholding reason of every question that depends on "up" (sizes, heights, directions seen from above, camera
turns) on a scan whose floor plane was not found and that has neither an axis alignment nor cameras that turned
enough to show their common up axis (``scene_geometry.floor_source`` 'fallback')."""


def up_answer(geometry_row: Mapping[str, Any]) -> str:
    """``""`` when the geometry's "up" is known (a floor plane, or the scan's gravity), else why not.

    >>> up_answer({"floor_source": "camera_poses"}), up_answer({"floor_source": "fallback"}) == UP_UNKNOWN
    ('', True)
    """
    return UP_UNKNOWN if geometry_row["floor_source"] == "fallback" else ""


"""Withholding reason of room-size questions on a room that walls do not bound on every side."""


def room_answer(
    geometry_row: Mapping[str, Any], min_rectangularity: float = 0.95
) -> tuple[float | None, str]:
    """The room's floor area for questions and ``""``, or None and why the geometry does not pin it down.

    Every side of the room's rectangle must be bounded by a wall found in the cloud
    (``room_walled_sides`` 4): a capture that saw part of the room measures the part it saw. A
    footprint that fills at least ``min_rectangularity`` of its minimum-area rectangle is a
    rectangular room (corners no camera saw shave a little off the hull): its area is the
    rectangle's. Other footprints (L-shaped rooms) and scans whose floor was not found give no answer.

    >>> row = {"room_length_m": 6.0, "room_width_m": 5.0, "room_area_m2": 29.5, "floor_source": "ransac"}
    >>> room_answer({**row, "room_walled_sides": 4})
    (30.0, '')
    >>> room_answer({**row, "room_walled_sides": 3})[1]
    'a side of the room has no wall in the frames (the capture saw part of the room)'
    >>> room_answer({**row, "room_walled_sides": 4, "room_area_m2": 24.0})
    (None, 'room footprint not rectangular')
    """
    rectangle = float(geometry_row["room_length_m"]) * float(geometry_row["room_width_m"])
    if geometry_row["floor_source"] != "ransac" or rectangle <= 0:
        return None, "floor not found"
    if int(geometry_row.get("room_walled_sides") or 0) < 4:
        return None, ROOM_NOT_WALLED
    if float(geometry_row["room_area_m2"]) / rectangle < min_rectangularity:
        return None, "room footprint not rectangular"
    return rectangle, ""


def room_area(geometry_row: Mapping[str, Any], min_rectangularity: float = 0.95) -> float | None:
    """The room's floor area for questions, or None when the geometry does not pin it down (:func:`room_answer`).

    >>> room_area({"room_length_m": 6.0, "room_width_m": 5.0, "room_area_m2": 29.5, "floor_source": "ransac",
    ...     "room_walled_sides": 4})
    30.0
    """
    return room_answer(geometry_row, min_rectangularity)[0]


MASK_BORDER_SHARE = 0.01
"""A mask box within this share of the image side from the border is cut off by it: it says nothing of the object's
extent beyond, so :func:`mask_shortfall_m` does not read it."""
MASK_SLACK_SHARE = 0.015
"""Masks pass the projected box of a well-measured object by up to this share of the image width (silhouette pixels,
pose error; 1.2% at most for 95% of the objects within 4 cm of the truth on the realistic worlds): only what lies
beyond it counts as missing from the box."""


def box_corners(center: np.ndarray, extents: np.ndarray, yaw: float) -> np.ndarray:
    """The 8 corners of a yaw-oriented box (gravity frame).

    >>> box_corners(np.zeros(3), np.array([2.0, 1.0, 1.0]), 0.0).max(axis=0).tolist()
    [1.0, 0.5, 0.5]
    """
    cos_yaw, sin_yaw = float(np.cos(yaw)), float(np.sin(yaw))
    rotation = np.array([[cos_yaw, -sin_yaw, 0.0], [sin_yaw, cos_yaw, 0.0], [0.0, 0.0, 1.0]])
    signs = np.array([[x, y, z] for x in (-1.0, 1.0) for y in (-1.0, 1.0) for z in (-1.0, 1.0)])
    return (
        np.asarray(center, dtype=np.float64)
        + (signs * np.asarray(extents, dtype=np.float64) / 2.0) @ rotation.T
    )


def mask_shortfall_m(corners: np.ndarray, boxes: list[tuple[CameraFact, tuple[int, int, int, int]]]) -> float:
    """How far (metres) an object's masks reach beyond its measured box: the most, over the frames whose mask box
    (0..1000 grid) the image border does not cut, of the pixels by which the mask box passes the projected box on
    any side beyond ``MASK_SLACK_SHARE`` of the image width, at the box's depth. A box fused from part of the
    object (a shelf's one side panel) falls short of what the masks show; its uncertainty grows by that much.

    >>> pose = np.eye(4)
    >>> camera = CameraFact(0, pose, np.array([[100.0, 0, 50], [0, 100.0, 50], [0, 0, 1]]), 100, 100)
    >>> corners = box_corners(np.array([0.0, 0.0, 2.0]), np.array([0.4, 0.4, 0.4]), 0.0)
    >>> round(mask_shortfall_m(corners, [(camera, (300, 400, 600, 600))]), 3)  # 8.9 px past its left side, at 2 m
    0.148
    """
    worst = 0.0
    border = 1000 * MASK_BORDER_SHARE
    for camera, box in boxes:
        x1, y1, x2, y2 = box
        if min(x1, y1) <= border or max(x2, y2) >= 1000 - border:
            continue
        points = np.array([camera.to_camera(corner) for corner in corners])
        if (points[:, 2] <= 0.05).any():
            continue
        u = camera.intrinsics[0, 0] * points[:, 0] / points[:, 2] + camera.intrinsics[0, 2]
        v = camera.intrinsics[1, 1] * points[:, 1] / points[:, 2] + camera.intrinsics[1, 2]
        scale_x, scale_y = camera.width / 1000.0, camera.height / 1000.0
        beyond = max(
            u.min() - x1 * scale_x,
            x2 * scale_x - u.max(),
            v.min() - y1 * scale_y,
            y2 * scale_y - v.max(),
            0.0,
        )
        beyond = max(beyond - MASK_SLACK_SHARE * camera.width, 0.0)
        worst = max(worst, float(beyond * np.median(points[:, 2]) / camera.intrinsics[0, 0]))
    return worst


def _confidence(item: Mapping[str, Any]) -> dict[str, Any]:
    """The object's confidence columns that the geometry row carries (missing or null ones stay None)."""
    found = {name: item.get(name) for name in CONFIDENCE_COLUMNS}
    return {
        name: (int(value) if name == "observed_views" else float(value))
        for name, value in found.items()
        if value is not None
    }


def _with_mask_shortfall(
    geometry_row: Mapping[str, Any],
    objects: dict[int, ObjectFact],
    cameras: dict[int, CameraFact],
    seen: dict[tuple[int, int], SeenFact],
) -> dict[int, ObjectFact]:
    """Objects fused from instance masks with their position and size uncertainty grown by :func:`mask_shortfall_m`
    (a box short of its masks on one side is off by half the shortfall there, and the projection sees only part of
    what is missing, so the position takes it whole)."""
    widened = dict(objects)
    for item in geometry_row["objects"]:
        fact = objects[int(item["object_id"])]
        if fact.position_uncertainty_m is None or fact.size_uncertainty_m is None:
            continue
        corners = box_corners(
            np.asarray(item["obb_center"], dtype=np.float64),
            np.asarray(item["obb_extents"], dtype=np.float64),
            float(item["obb_yaw"]),
        )
        boxes = [
            (cameras[frame], seen_fact.bbox)
            for (frame, object_id), seen_fact in seen.items()
            if object_id == fact.object_id and seen_fact.bbox is not None and frame in cameras
        ]
        shortfall = mask_shortfall_m(corners, boxes)
        if shortfall > 0:
            widened[fact.object_id] = replace(
                fact,
                position_uncertainty_m=fact.position_uncertainty_m + shortfall,
                size_uncertainty_m=fact.size_uncertainty_m + shortfall,
            )
    return widened


def _grid_box(values: Sequence[Any]) -> tuple[int, int, int, int]:
    """A table's ``[x1, y1, x2, y2]`` grid box as a tuple of ints."""
    x1, y1, x2, y2 = (int(value) for value in values)
    return x1, y1, x2, y2


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
            **_confidence(item),
        )
        for item in geometry_row["objects"]
    }
    used = {int(index) for index in geometry_row["used_frames"]}
    cameras = {}
    scene_frames = frames.filter(pl.col("scene_id") == scene_id)
    origins = set(scene_frames["origin"].unique().to_list())
    if len(origins) > 1:
        raise ValueError(f"scan {scene_id}'s frames have more than one origin: {sorted(origins)}")
    datasets = set(scene_frames["source"].unique().to_list())
    if len(datasets) > 1:
        raise ValueError(f"scan {scene_id}'s frames come from more than one data set: {sorted(datasets)}")
    for row in scene_frames.iter_rows(named=True):
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
            upright_turns=int(row.get("upright_turns") or 0),
        )
    seen = {}
    for row in visibility.filter(pl.col("scene_id") == scene_id).iter_rows(named=True):
        seen[(int(row["frame_index"]), int(row["object_id"]))] = SeenFact(
            visibility=float(row["visibility_ratio"]),
            in_frame=float(row["in_frame_ratio"]),
            bbox=None if row["bbox"] is None else _grid_box(row["bbox"]),
        )
    if geometry_row.get("object_points_source") == "instance_masks":
        objects = _with_mask_shortfall(geometry_row, objects, cameras, seen)
    area, room_problem = room_answer(geometry_row, min_room_rectangularity)
    return SceneFacts(
        scene_id=scene_id,
        objects=objects,
        cameras=cameras,
        seen=seen,
        room_area_m2=area,
        room_problem=room_problem,
        up_problem=up_answer(geometry_row),
        unmeasured_labels={str(item["label"]) for item in geometry_row["dropped_objects"]},
        geometry_source=str(geometry_row.get("geometry_source", "scanned")),
        origin=origins.pop() if origins else REAL,
        dataset=datasets.pop() if datasets else SCANNET,
    )
