"""Metric geometry of scene-graph objects, for the depth, distance, size, reach and orientation templates.

Visual Genome gives only 2D boxes. Where a geometry cache exists, the template generator also asks
metric questions (which object is closer to the camera, which of two is nearer a third, which is
bigger in 3D, which way an object faces). Two kinds of cache are read:

- the sample world's exact truth (``truth/world.json``): per view, the Visual Genome image id and
  per object the Visual Genome object id; the 3D centroid, axis-aligned box, volume and facing
  direction are taken from the scene's objects and moved into the camera frame with the view pose;
- a geometry Parquet file with one row per (image, object) and the columns of
  :data:`GEOMETRY_COLUMNS` (for example written from a depth model's output): ``image_id`` and
  ``object_id`` as strings, ``camera_xyz`` (centroid in the camera frame: metres, x right, y down,
  z forward), and the nullable ``aabb_min``/``aabb_max`` (any metric frame shared by the image's
  objects), ``volume_m3``, ``facing_camera`` (unit vector in the camera frame) and ``has_front``.

>>> geometry = ObjectGeometry(camera_xyz=(0.0, 0.0, 2.0))
>>> geometry.distance_to_camera
2.0
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

logger = logging.getLogger(__name__)

GEOMETRY_COLUMNS = (
    "image_id",
    "object_id",
    "camera_xyz",
    "aabb_min",
    "aabb_max",
    "volume_m3",
    "facing_camera",
    "has_front",
)

ImageGeometry = dict[str, "ObjectGeometry"]
"""Object id -> geometry, for one image."""


@dataclass(frozen=True)
class ObjectGeometry:
    """Metric facts about one object in one image.

    Args:
        camera_xyz (`tuple[float, float, float]`): centroid in the camera frame (metres; x right, y down,
            z forward).
        aabb_min, aabb_max (`tuple[float, float, float]`, *optional*): an axis-aligned box in a metric frame
            shared by the image's objects (the world frame for the sample world).
        volume_m3 (`float`, *optional*): the object's volume.
        facing_camera (`tuple[float, float, float]`, *optional*): the direction the object's front faces, in the
            camera frame (unit vector); `None` for objects without a front.
        facing_world (`tuple[float, float, float]`, *optional*): the same direction in the `aabb` frame.
        up_world (`tuple[float, float, float]`, defaults to `(0, 0, 1)`): the up direction of the `aabb` frame
            (z up, as in the sample world).
    """

    camera_xyz: tuple[float, float, float]
    aabb_min: tuple[float, float, float] | None = None
    aabb_max: tuple[float, float, float] | None = None
    volume_m3: float | None = None
    facing_camera: tuple[float, float, float] | None = None
    facing_world: tuple[float, float, float] | None = None
    up_world: tuple[float, float, float] = (0.0, 0.0, 1.0)

    @property
    def distance_to_camera(self) -> float:
        """Euclidean distance of the centroid from the camera centre."""
        return float(math.sqrt(sum(value * value for value in self.camera_xyz)))

    @property
    def centre(self) -> np.ndarray:
        """Centre of the box (in the `aabb` frame), or the camera-frame centroid when there is no box."""
        if self.aabb_min is not None and self.aabb_max is not None:
            return (np.asarray(self.aabb_min) + np.asarray(self.aabb_max)) / 2.0
        return np.asarray(self.camera_xyz, dtype=np.float64)

    def heading_frame(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(position, facing, up)`` in one frame for questions asked from the object's point of view.

        The `aabb` frame when the world facing is known, else the camera frame (up = -y, which assumes a
        camera without roll); `None` for objects without a front.
        """
        if self.facing_world is not None and self.aabb_min is not None:
            return self.centre, np.asarray(self.facing_world, dtype=np.float64), np.asarray(self.up_world)
        if self.facing_camera is not None:
            return (
                np.asarray(self.camera_xyz, dtype=np.float64),
                np.asarray(self.facing_camera, dtype=np.float64),
                np.array([0.0, -1.0, 0.0]),
            )
        return None


def box_gap(first: ObjectGeometry, second: ObjectGeometry) -> float | None:
    """Shortest distance between two objects' axis-aligned boxes (0 when they touch or overlap).

    >>> a = ObjectGeometry((0, 0, 1), (0, 0, 0), (1, 1, 1))
    >>> b = ObjectGeometry((0, 0, 1), (2, 0, 0), (3, 1, 1))
    >>> box_gap(a, b)
    1.0
    """
    if first.aabb_min is None or first.aabb_max is None or second.aabb_min is None or second.aabb_max is None:
        return None
    low_a, high_a = np.asarray(first.aabb_min), np.asarray(first.aabb_max)
    low_b, high_b = np.asarray(second.aabb_min), np.asarray(second.aabb_max)
    separation = np.maximum(0.0, np.maximum(low_a - high_b, low_b - high_a))
    return float(np.linalg.norm(separation))


def centre_distance(first: ObjectGeometry, second: ObjectGeometry) -> float:
    """Distance between two objects' centres (box centres when both have boxes, else camera-frame centroids)."""
    if first.aabb_min is not None and second.aabb_min is not None:
        return float(np.linalg.norm(first.centre - second.centre))
    return float(np.linalg.norm(np.asarray(first.camera_xyz) - np.asarray(second.camera_xyz)))


def _vector(values) -> tuple[float, float, float]:
    return (float(values[0]), float(values[1]), float(values[2]))


def load_world_geometry(world_json: str | Path) -> dict[str, ImageGeometry]:
    """Per Visual Genome image id, the geometry of its objects, from the sample world's truth file.

    Args:
        world_json (`str` or `Path`): ``<sample_world>/truth/world.json``.

    Returns:
        `dict[str, dict[str, ObjectGeometry]]`: image id -> object id -> geometry (ids as strings, as in
        the ``scene_graphs`` table).
    """
    document = json.loads(Path(world_json).read_text())
    catalogue = document.get("catalogue", {})
    images: dict[str, ImageGeometry] = {}
    for scene in document.get("scenes", []):
        objects = {entry["object_id"]: entry for entry in scene.get("objects", [])}
        for view in scene.get("views", []):
            image_id = view.get("vg_image_id")
            if image_id is None:
                continue
            pose = np.asarray(view["pose"], dtype=np.float64)
            rotation, translation = pose[:3, :3], pose[:3, 3]
            per_object: ImageGeometry = {}
            for item in view.get("objects", []):
                vg_object_id = item.get("vg_object_id")
                truth = objects.get(item["object_id"])
                if vg_object_id is None or truth is None:
                    continue
                centroid = np.asarray(truth["centroid"], dtype=np.float64)
                camera_xyz = rotation.T @ (centroid - translation)
                facing = truth.get("facing")
                has_front = bool(catalogue.get(truth.get("category"), {}).get("has_front", False))
                facing_world = _vector(facing) if facing is not None and has_front else None
                facing_camera = _vector(rotation.T @ np.asarray(facing)) if facing_world is not None else None
                per_object[str(vg_object_id)] = ObjectGeometry(
                    camera_xyz=_vector(camera_xyz),
                    aabb_min=_vector(truth["aabb"]["min"]),
                    aabb_max=_vector(truth["aabb"]["max"]),
                    volume_m3=float(truth["volume"]) if truth.get("volume") is not None else None,
                    facing_camera=facing_camera,
                    facing_world=facing_world,
                )
            images[str(image_id)] = per_object
    logger.info("geometry for %d images from %s", len(images), world_json)
    return images


def load_geometry_table(path: str | Path) -> dict[str, ImageGeometry]:
    """Per image id, the geometry of its objects, from a geometry Parquet file (see the module docstring)."""
    frame = pl.read_parquet(path)
    missing = [name for name in ("image_id", "object_id", "camera_xyz") if name not in frame.columns]
    if missing:
        raise ValueError(f"geometry table {path} lacks columns {missing}; expected {GEOMETRY_COLUMNS}")
    images: dict[str, ImageGeometry] = {}
    for row in frame.iter_rows(named=True):
        facing = row.get("facing_camera")
        has_front = row.get("has_front")
        images.setdefault(str(row["image_id"]), {})[str(row["object_id"])] = ObjectGeometry(
            camera_xyz=_vector(row["camera_xyz"]),
            aabb_min=_vector(row["aabb_min"]) if row.get("aabb_min") is not None else None,
            aabb_max=_vector(row["aabb_max"]) if row.get("aabb_max") is not None else None,
            volume_m3=row.get("volume_m3"),
            facing_camera=_vector(facing) if facing is not None and has_front is not False else None,
        )
    return images


def load_geometry(path: str | Path | None) -> Mapping[str, ImageGeometry]:
    """Geometry from a ``world.json`` truth file or a geometry Parquet file; empty for `None`.

    >>> load_geometry(None)
    {}
    """
    if path is None:
        return {}
    location = Path(path)
    if not location.exists():
        raise FileNotFoundError(f"geometry cache {location} does not exist")
    if location.suffix == ".json":
        return load_world_geometry(location)
    return load_geometry_table(location)
