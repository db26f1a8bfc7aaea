"""Per-frame, per-object visibility: 2D boxes, visibility ratio, truncation, occlusion, camera position.

For one frame and one object, the object's stored surface points (gravity frame, each with a
normal and the area it stands for) are moved into the camera and projected through the
intrinsics. Only points on the object's own nearest surface count: they face the camera and are
not behind another part of the object (a depth buffer of the object alone, :func:`first_surface`).
Each is weighted by the image area it covers (``area * |cos| * fx * fy * range / z**3``), so the
sums below are pixel areas:

- *in-frame ratio*: the part of the object's silhouette that falls inside the image
  (``1 - truncation``); *truncated* when some of it falls outside. The stored points of an object
  fused from depth frames cover only what some frame saw (a ball's underside, the part of a chair
  no frame held whole), so the smaller of the points' share and the share of its oriented box's
  silhouette (:func:`box_in_frame_ratio`) counts;
- *depth-buffer test*: a point inside the image is *visible* when its depth is at most the frame's
  measured depth at its pixel plus a tolerance. A point behind the measured surface is hidden by
  whatever that surface is: the back-projected depth pixel is attributed to the object owning the
  nearest stored point (within ``self_occlusion_radius_m``); when that is the object itself (an
  edge, depth noise) the point is left out, otherwise it is occluded by something else;
- *visibility ratio*: visible area over visible plus occluded area, i.e. the visible part of what
  the image would show of the object if nothing else were in the way (pixels of the instance mask
  over pixels the object would cover alone);
- *2D box*: the pixel box of the object's pixels in the instance mask when the frame has one, else
  of the visible points (each widened by its footprint), in pixels and on the 0..1000 grid.

Pixels without a depth reading say nothing and are left out of both sums.

>>> settings = VisibilitySettings()
>>> settings.depth_tolerance_m, settings.occluded_below
(0.03, 0.95)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import polars as pl
import pydantic
from pydantic import ConfigDict, Field
from scipy import ndimage
from scipy.spatial import ConvexHull, QhullError, cKDTree
from tqdm.auto import tqdm

from assets.dge.camera import invert_rigid, project_points, rotate_vectors, transform_points
from assets.dge.confidence import DEFAULT_CONFIDENCE_SETTINGS
from assets.dge.fusion import FrameError, FrameRecord, depth_problem, read_depth_m, read_instance_labels
from assets.dge.geometry import ScanGeometry, camera_poses_in_gravity, frame_records
from assets.dge.objects import MeshSegmentationError, ObjectGeometry
from assets.dge.raycast import ObjectRays, SceneMesh, cast_frame, ray_grid
from assets.dge.room import clip_to_rectangle, polygon_area
from data_contracts.boxes import BoxError, pixels_to_grid
from data_contracts.frame_visibility import FrameVisibility
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema

logger = logging.getLogger(__name__)


class VisibilitySettings(pydantic.BaseModel):
    """How visibility is computed, and its thresholds.

    The fields are the run configuration of ``frame_visibility`` (where boxes and visibility come from, how
    many rays). The ``ClassVar`` attributes are the method's constants (depth-buffer tolerances, the
    occluded and truncated thresholds): not run configuration, read the same way
    (``settings.depth_tolerance_m``); a test that needs other values passes an instance of a subclass that
    overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    boxes_from_instance_masks: bool = Field(
        default=True, description="Take 2D boxes from instance masks when frames have them."
    )
    visibility_from_mesh: bool = Field(
        default=True,
        description="When the scan has a segmented mesh, decide visibility by casting rays against it "
        "(one cast per frame gives each pixel's object and everything behind it) instead of projecting "
        "object points.",
    )
    mesh_rays_per_frame: int = Field(
        default=20_000,
        description="Rays cast through the image per frame (an even pixel grid); the ring around the image that "
        "measures truncation gets a sixteenth of this density.",
    )

    # Constants of the method (not run configuration; a test may override them in a subclass).
    depth_tolerance_m: ClassVar[float] = 0.03
    """A point is visible when its depth is at most the measured depth plus this (absolute part of the
    depth-buffer tolerance)."""
    depth_tolerance_relative: ClassVar[float] = 0.01
    """Depth-buffer tolerance, share of the point's depth added to the absolute part."""
    self_occlusion_radius_m: ClassVar[float] = 0.05
    """A hiding surface whose nearest object point (within this radius) belongs to the object is the object
    itself."""
    self_depth_tolerance_m: ClassVar[float] = 0.02
    """Base depth tolerance of the object's own depth buffer (see first_surface)."""
    self_footprint: ClassVar[float] = 0.75
    """Radius of a point in its own depth buffer, in projected point spacings (the larger spacing of the two
    points compared)."""
    self_slant_factor: ClassVar[float] = 3.0
    """How many times the depth a slanted surface spans across one footprint two of its own points may differ
    by."""
    occluder_gap_m: ClassVar[float] = 0.01
    """A measured surface at least this much nearer than a point is checked for belonging to another object,
    even within the depth tolerance."""
    near_plane_m: ClassVar[float] = 0.05
    """Points nearer than this are behind the camera."""
    occluded_below: ClassVar[float] = 0.95
    """occluded when the visibility ratio is lower."""
    truncated_below: ClassVar[float] = 0.995
    """truncated when the in-frame ratio is lower."""


DEFAULT_VISIBILITY_SETTINGS = VisibilitySettings()


@dataclass
class ObjectInFrame:
    """What one frame shows of one object."""

    frame_index: int
    object_id: int
    label: str
    visibility_ratio: float
    in_frame_ratio: float
    visible_area_px: float
    truncated: bool
    occluded: bool
    bbox: list[int] | None
    bbox_px: list[float] | None
    bbox_source: str | None
    centroid_depth_m: float
    centroid_distance_m: float
    centroid_px: list[float]

    def as_row(self) -> dict[str, Any]:
        """Fields as a plain dict (for a polars row)."""
        return dict(self.__dict__)


class PreparedObjects:
    """Objects plus one KD-tree over all their points (with each point's owner), built once per scene when
    first needed (visibility from the mesh's rays never asks)."""

    def __init__(self, objects: list[ObjectGeometry]):
        self.objects = objects
        self._with_points = [obj for obj in objects if len(obj.points)]

    @cached_property
    def owners(self) -> np.ndarray:
        """The owning object id of each point of :attr:`tree`."""
        if not self._with_points:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([np.full(len(obj.points), obj.object_id) for obj in self._with_points])

    @cached_property
    def tree(self) -> cKDTree | None:
        """One KD-tree over every object's points (None without points)."""
        if not self._with_points:
            return None
        return cKDTree(np.concatenate([obj.points for obj in self._with_points]))

    def nearest_owner(self, points: np.ndarray, radius: float) -> np.ndarray:
        """The object owning the nearest stored point within ``radius`` of each point (-1: none)."""
        if self.tree is None or len(points) == 0:
            return np.full(len(points), -1, dtype=np.int64)
        distance, index = self.tree.query(points, k=1, distance_upper_bound=radius)
        found = np.isfinite(distance)
        owners = np.full(len(points), -1, dtype=np.int64)
        owners[found] = self.owners[index[found]]
        return owners


def first_surface(
    uv: np.ndarray,
    z: np.ndarray,
    cosine: np.ndarray,
    point_areas: np.ndarray,
    focal: float,
    config: VisibilitySettings,
) -> np.ndarray:
    """Which camera-facing points lie on the object's own nearest surface (not behind another of its parts).

    A point is self-occluded when another point of the object projects within a footprint of it
    (``self_footprint`` times the larger of the two points' projected spacings) and lies nearer by
    more than a tolerance: ``self_depth_tolerance_m`` plus ``self_slant_factor`` times the depth a
    surface spans across the footprint at the lesser slant of the two points (two points of one
    slanted surface differ in depth; a part in front of another does not borrow the other's slant).
    """
    spacing_px = np.sqrt(point_areas) * focal / z
    reach = config.self_footprint * float(spacing_px.max())
    pairs = cKDTree(uv, balanced_tree=False, compact_nodes=False).query_pairs(reach, output_type="ndarray")
    behind_own = np.zeros(len(z), dtype=bool)
    if len(pairs):
        first, second = pairs[:, 0], pairs[:, 1]
        footprint = config.self_footprint * np.maximum(spacing_px[first], spacing_px[second])
        close = np.linalg.norm(uv[first] - uv[second], axis=1) <= footprint
        first, second, footprint = first[close], second[close], footprint[close]
        slant = np.sqrt(np.clip(1.0 - cosine**2, 0.0, 1.0)) / np.maximum(cosine, 0.1)
        for near, far in ((first, second), (second, first)):
            spread = footprint * z[far] / focal * np.minimum(slant[near], slant[far])
            tolerance = config.self_depth_tolerance_m + config.self_slant_factor * spread
            behind_own[far[z[near] < z[far] - tolerance]] = True
    return ~behind_own


@dataclass
class PointClasses:
    """Per-point results of projecting one object into one frame (see :func:`classify_points`)."""

    points_camera: np.ndarray  # (N, 3)
    uv: np.ndarray  # (N, 2) colour pixels
    weight: np.ndarray  # (N,) image area in pixels (0 for points off the object's nearest surface)
    in_image: np.ndarray  # on the nearest surface and inside the image
    visible: np.ndarray
    occluded: np.ndarray  # hidden by something other than the object itself

    @property
    def in_frame_ratio(self) -> float:
        """Share of the silhouette inside the image."""
        total = float(self.weight.sum())
        return float(self.weight[self.in_image].sum()) / total if total > 0 else 0.0

    @property
    def visible_area(self) -> float:
        """Visible area in pixels."""
        return float(self.weight[self.visible].sum())

    @property
    def visibility_ratio(self) -> float:
        """Visible over visible plus occluded area."""
        considered = self.visible_area + float(self.weight[self.occluded].sum())
        return self.visible_area / considered if considered > 0 else 0.0


def classify_points(
    obj: ObjectGeometry,
    prepared: PreparedObjects,
    camera_pose: np.ndarray,
    record: FrameRecord,
    depth_m: np.ndarray,
    config: VisibilitySettings = DEFAULT_VISIBILITY_SETTINGS,
) -> PointClasses | None:
    """Project an object's points into a frame and classify them; None when nothing of it lies in the image."""
    if len(obj.points) == 0:
        return None
    world_to_camera = invert_rigid(camera_pose)
    points = transform_points(world_to_camera, obj.points)
    normals = rotate_vectors(world_to_camera, np.nan_to_num(obj.normals, nan=0.0))
    z = points[:, 2]
    in_front = z > config.near_plane_m
    if not in_front.any():
        return None
    ranges = np.linalg.norm(points, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        cosine = -np.sum(normals * points, axis=1) / ranges
    has_normal = np.linalg.norm(normals, axis=1) > 0.5
    facing = in_front & (~has_normal | (cosine > 0))
    cosine = np.where(has_normal, np.abs(cosine), 1.0)
    color_k = record.color_intrinsics
    uv, _ = project_points(points, color_k)
    facing_index = np.flatnonzero(facing)
    if len(facing_index) == 0:
        return None
    outer = np.zeros(len(points), dtype=bool)
    outer[facing_index] = first_surface(
        uv[facing_index],
        z[facing_index],
        cosine[facing_index],
        obj.point_areas[facing_index],
        color_k[0, 0],
        config,
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = obj.point_areas * cosine * color_k[0, 0] * color_k[1, 1] * ranges / np.maximum(z, 1e-9) ** 3
    weight = np.where(outer, weight, 0.0)
    total = float(weight.sum())
    if total <= 0:
        return None

    width, height = record.color_size
    with np.errstate(invalid="ignore"):
        in_image = (
            outer
            & (uv[:, 0] > -0.5)
            & (uv[:, 0] < width - 0.5)
            & (uv[:, 1] > -0.5)
            & (uv[:, 1] < height - 0.5)
        )
    if float(weight[in_image].sum()) <= 0:
        return None

    depth_k = record.depth_intrinsics
    depth_height, depth_width = depth_m.shape
    uv_depth, _ = project_points(points, depth_k)
    with np.errstate(invalid="ignore"):
        cols = np.round(np.where(in_image, uv_depth[:, 0], -1)).astype(np.int64)
        rows = np.round(np.where(in_image, uv_depth[:, 1], -1)).astype(np.int64)
    in_depth = in_image & (cols >= 0) & (cols < depth_width) & (rows >= 0) & (rows < depth_height)
    measured = np.zeros(len(points), dtype=np.float64)
    measured[in_depth] = depth_m[rows[in_depth], cols[in_depth]]
    known = in_depth & np.isfinite(measured) & (measured > 0)
    # A depth pixel spans more depth on a slanted surface: widen the tolerance by half a pixel's footprint.
    slant = np.sqrt(np.clip(1.0 - cosine**2, 0.0, 1.0)) / np.maximum(cosine, 0.1)
    tolerance = (
        config.depth_tolerance_m + config.depth_tolerance_relative * z + 0.5 * z / depth_k[0, 0] * slant
    )
    behind = known & (z > measured + tolerance)
    # Whatever is measured nearer than the point (even within the tolerance: a book lying on a
    # table) is attributed to the object owning the nearest stored point.
    nearer = np.flatnonzero(known & (measured < z - config.occluder_gap_m))
    owners = np.full(len(points), obj.object_id, dtype=np.int64)
    if len(nearer):
        d = measured[nearer]
        surface_camera = np.stack(
            [
                (cols[nearer] - depth_k[0, 2]) * d / depth_k[0, 0],
                (rows[nearer] - depth_k[1, 2]) * d / depth_k[1, 1],
                d,
            ],
            axis=1,
        )
        owners[nearer] = prepared.nearest_owner(
            transform_points(camera_pose, surface_camera), config.self_occlusion_radius_m
        )
    other = (owners != obj.object_id) & ((owners >= 0) | behind)
    visible = known & ~behind & ~other
    occluded_by_other = known & other
    return PointClasses(points, uv, weight, in_image, visible, occluded_by_other)


def box_in_frame_ratio(
    center: np.ndarray,
    extents: np.ndarray,
    yaw: float,
    camera_pose: np.ndarray,
    intrinsics: np.ndarray,
    width: int,
    height: int,
    near_m: float = 0.05,
) -> float:
    """Share of a yaw-oriented box's silhouette (the hull of its projected corners) inside a ``width x height``
    image; the box is cut at the near plane first, so a part behind the camera reaches far outside the image.

    >>> pose = np.eye(4)  # camera at the origin looking along +z
    >>> K = np.array([[100.0, 0, 49.5], [0, 100, 49.5], [0, 0, 1]])
    >>> round(box_in_frame_ratio(np.array([0.0, 0, 4]), np.array([1.0, 1, 1]), 0.0, pose, K, 100, 100), 3)
    1.0
    >>> round(box_in_frame_ratio(np.array([2.0, 0, 4]), np.array([1.0, 1, 1]), 0.0, pose, K, 100, 100), 2)  # at the edge
    0.42
    >>> box_in_frame_ratio(np.array([0.0, 0, 0.3]), np.array([1.0, 1, 1]), 0.0, pose, K, 100, 100) < 0.05  # around it
    True
    """
    half = np.asarray(extents, dtype=np.float64) / 2.0
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    cos_a, sin_a = np.cos(yaw), np.sin(yaw)
    rotation = np.array([[cos_a, -sin_a, 0.0], [sin_a, cos_a, 0.0], [0.0, 0.0, 1.0]])
    corners = transform_points(invert_rigid(camera_pose), (signs * half) @ rotation.T + center)
    points = [corner for corner in corners if corner[2] > near_m]
    for first in range(8):  # the box's edges join corners that differ in one sign
        for second in range(first + 1, 8):
            if np.count_nonzero(signs[first] != signs[second]) != 1:
                continue
            a, b = corners[first], corners[second]
            if (a[2] > near_m) != (b[2] > near_m):
                points.append(a + (near_m - a[2]) / (b[2] - a[2]) * (b - a))
    if len(points) < 3:
        return 0.0
    uv, _ = project_points(np.array(points), intrinsics)
    try:
        hull = ConvexHull(uv)
    except QhullError:
        return 0.0
    polygon = uv[hull.vertices]
    total = polygon_area(polygon)
    if total <= 0:
        return 0.0
    inside = clip_to_rectangle(polygon, np.array([-0.5, -0.5]), np.array([width - 0.5, height - 0.5]))
    return float(np.clip(polygon_area(inside) / total, 0.0, 1.0))


def seen_box(obj: ObjectGeometry) -> tuple[np.ndarray, np.ndarray]:
    """The object's oriented box (centre, extents), reaching down to what it stands on when no frame saw its base
    (a support gap above ``max_support_gap_m``, :func:`assets.dge.confidence.support_gap`): the part the frames
    missed is still part of its silhouette.

    >>> obj = ObjectGeometry(0, "chair", 1, np.zeros(3), np.zeros(3), np.zeros(3), np.array([0.0, 0, 0.65]),
    ...     np.array([0.5, 0.4, 0.6]), 0.0, np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0), support_gap_m=0.35)
    >>> [values.round(3).tolist() for values in seen_box(obj)]
    [[0.0, 0.0, 0.475], [0.5, 0.4, 0.95]]
    """
    center, extents = np.array(obj.obb_center, dtype=np.float64), np.array(obj.obb_extents, dtype=np.float64)
    if obj.support_gap_m > DEFAULT_CONFIDENCE_SETTINGS.max_support_gap_m:
        center[2] -= obj.support_gap_m / 2.0
        extents[2] += obj.support_gap_m
    return center, extents


def object_in_frame(
    obj: ObjectGeometry,
    prepared: PreparedObjects,
    camera_pose: np.ndarray,
    record: FrameRecord,
    depth_m: np.ndarray,
    instance_boxes: Mapping[int, list[float]] | None,
    config: VisibilitySettings = DEFAULT_VISIBILITY_SETTINGS,
) -> ObjectInFrame | None:
    """Visibility of one object in one frame; ``None`` when no camera-facing part lies in the image.

    ``camera_pose`` is the camera-to-gravity-frame transform; ``depth_m`` the frame's metric depth;
    ``instance_boxes`` the pixel boxes of the frame's instance mask by object id (None without a mask).
    """
    classes = classify_points(obj, prepared, camera_pose, record, depth_m, config)
    if classes is None:
        return None
    visible = classes.visible
    visibility_ratio = classes.visibility_ratio
    visible_area = classes.visible_area
    uv, z = classes.uv, classes.points_camera[:, 2]
    color_k = record.color_intrinsics
    width, height = record.color_size
    center, extents = seen_box(obj)
    in_frame_ratio = min(
        classes.in_frame_ratio,
        box_in_frame_ratio(
            center, extents, obj.obb_yaw, camera_pose, color_k, width, height, config.near_plane_m
        ),
    )
    world_to_camera = invert_rigid(camera_pose)

    bbox_px = None
    source = None
    if config.boxes_from_instance_masks and instance_boxes is not None and obj.object_id in instance_boxes:
        bbox_px = list(instance_boxes[obj.object_id])
        source = "instance_mask"
    if bbox_px is None and visible.any():
        spacing = np.sqrt(obj.point_areas[visible])
        radius = 0.5 * spacing * color_k[0, 0] / z[visible]
        u = uv[visible, 0]
        v = uv[visible, 1]
        bbox_px = [
            float(max(0.0, np.floor(np.min(u - radius) + 0.5))),
            float(max(0.0, np.floor(np.min(v - radius) + 0.5))),
            float(min(width, np.floor(np.max(u + radius) + 0.5) + 1)),
            float(min(height, np.floor(np.max(v + radius) + 0.5) + 1)),
        ]
        source = "points"
    bbox = None
    if bbox_px is not None:
        try:
            bbox = pixels_to_grid(bbox_px, width, height)
        except BoxError:
            bbox_px, bbox, source = None, None, None

    centroid_camera = transform_points(world_to_camera, obj.centroid[None, :])[0]
    centroid_uv, _ = project_points(centroid_camera[None, :], color_k)
    return ObjectInFrame(
        frame_index=record.frame_index,
        object_id=obj.object_id,
        label=obj.label,
        visibility_ratio=float(np.clip(visibility_ratio, 0.0, 1.0)),
        in_frame_ratio=float(np.clip(in_frame_ratio, 0.0, 1.0)),
        visible_area_px=visible_area,
        truncated=bool(in_frame_ratio < config.truncated_below),
        occluded=bool(visibility_ratio < config.occluded_below),
        bbox=bbox,
        bbox_px=bbox_px,
        bbox_source=source,
        centroid_depth_m=float(centroid_camera[2]),
        centroid_distance_m=float(np.linalg.norm(centroid_camera)),
        centroid_px=[float(centroid_uv[0, 0]), float(centroid_uv[0, 1])],
    )


def object_in_frame_from_rays(
    obj: ObjectGeometry,
    rays: ObjectRays,
    grid_stride: int,
    camera_pose: np.ndarray,
    record: FrameRecord,
    instance_boxes: Mapping[int, list[float]] | None,
    config: VisibilitySettings = DEFAULT_VISIBILITY_SETTINGS,
) -> ObjectInFrame | None:
    """Visibility of one object in one frame from the frame's mesh cast (see :mod:`assets.dge.raycast`)."""
    if rays.inside_area <= 0:
        return None
    width, height = record.color_size
    bbox_px = None
    source = None
    if config.boxes_from_instance_masks and instance_boxes is not None and obj.object_id in instance_boxes:
        bbox_px = list(instance_boxes[obj.object_id])
        source = "instance_mask"
    if bbox_px is None and len(rays.visible_pixels):
        half = grid_stride / 2.0
        low = rays.visible_pixels.min(axis=0) - half
        high = rays.visible_pixels.max(axis=0) + half
        bbox_px = [
            float(max(0.0, np.floor(low[0] + 0.5))),
            float(max(0.0, np.floor(low[1] + 0.5))),
            float(min(width, np.floor(high[0] + 0.5))),
            float(min(height, np.floor(high[1] + 0.5))),
        ]
        source = "mesh_rays"
    bbox = None
    if bbox_px is not None:
        try:
            bbox = pixels_to_grid(bbox_px, width, height)
        except BoxError:
            bbox_px, bbox, source = None, None, None
    centroid_camera = transform_points(invert_rigid(camera_pose), obj.centroid[None, :])[0]
    centroid_uv, _ = project_points(centroid_camera[None, :], record.color_intrinsics)
    visibility_ratio = float(np.clip(rays.visibility_ratio, 0.0, 1.0))
    in_frame_ratio = float(np.clip(rays.in_frame_ratio, 0.0, 1.0))
    return ObjectInFrame(
        frame_index=record.frame_index,
        object_id=obj.object_id,
        label=obj.label,
        visibility_ratio=visibility_ratio,
        in_frame_ratio=in_frame_ratio,
        visible_area_px=rays.visible_area,
        truncated=bool(in_frame_ratio < config.truncated_below),
        occluded=bool(visibility_ratio < config.occluded_below),
        bbox=bbox,
        bbox_px=bbox_px,
        bbox_source=source,
        centroid_depth_m=float(centroid_camera[2]),
        centroid_distance_m=float(np.linalg.norm(centroid_camera)),
        centroid_px=[float(centroid_uv[0, 0]), float(centroid_uv[0, 1])],
    )


def mask_boxes(object_ids: np.ndarray) -> dict[int, list[float]]:
    """Pixel-edge boxes ``[x1, y1, x2, y2]`` of every object id (>= 0) in an id image, in one pass.

    >>> ids = np.full((4, 5), -1); ids[1:3, 2:5] = 7
    >>> mask_boxes(ids)
    {7: [2.0, 1.0, 5.0, 3.0]}
    """
    return label_boxes(np.where(object_ids >= 0, object_ids + 1, 0).astype(np.int64))


def label_boxes(labels: np.ndarray) -> dict[int, list[float]]:
    """Pixel-edge boxes ``[x1, y1, x2, y2]`` by object id of an instance image as stored (``objectId + 1``, 0 where
    no object; non-negative integers), in one pass.

    >>> labels = np.zeros((4, 5), np.uint8); labels[1:3, 2:5] = 8
    >>> label_boxes(labels)
    {7: [2.0, 1.0, 5.0, 3.0]}
    """
    boxes = {}
    for index, found in enumerate(ndimage.find_objects(labels)):
        if found is not None:
            rows, cols = found
            boxes[index] = [float(cols.start), float(rows.start), float(cols.stop), float(rows.stop)]
    return boxes


def frame_visibility(
    record: FrameRecord,
    camera_pose: np.ndarray,
    prepared: PreparedObjects,
    config: VisibilitySettings = DEFAULT_VISIBILITY_SETTINGS,
    mesh: SceneMesh | None = None,
) -> list[ObjectInFrame]:
    """Visibility of every object in one frame; raises :class:`FrameError` for an unusable frame.

    ``camera_pose`` is the frame's camera-to-gravity-frame transform. With ``mesh`` (the scan's
    segmented mesh) one ray cast decides every object's visibility; without it each object's
    points are projected and tested against the depth image.
    """
    depth = read_depth_m(record.depth_path, record.depth_scale, record.upright_turns)
    problem = depth_problem(depth)
    if problem:
        raise FrameError(problem, record.depth_path)
    if depth.shape != (record.depth_size[1], record.depth_size[0]):
        raise FrameError(
            f"depth image is {depth.shape[1]}x{depth.shape[0]}, the table says {record.depth_size[0]}x{record.depth_size[1]}",
            record.depth_path,
        )
    instance_boxes = None
    if config.boxes_from_instance_masks and record.instance_path is not None:
        instance_labels = read_instance_labels(record.instance_path, record.upright_turns)
        if instance_labels.shape != (record.color_size[1], record.color_size[0]):
            raise FrameError(
                f"instance mask is {instance_labels.shape[1]}x{instance_labels.shape[0]}, the colour image is "
                f"{record.color_size[0]}x{record.color_size[1]}",
                record.instance_path,
            )
        instance_boxes = label_boxes(instance_labels)
    results = []
    if mesh is not None:
        width, height = record.color_size
        grid = ray_grid(record.color_intrinsics, width, height, config.mesh_rays_per_frame)
        summaries = cast_frame(
            mesh,
            grid,
            camera_pose,
            depth,
            record.depth_intrinsics,
            config.depth_tolerance_m,
            config.depth_tolerance_relative,
        )
        for obj in prepared.objects:
            rays = summaries.get(obj.object_id)
            seen = None
            if rays is not None:
                seen = object_in_frame_from_rays(
                    obj, rays, grid.stride, camera_pose, record, instance_boxes, config
                )
            if seen is not None:
                results.append(seen)
        return results
    for obj in prepared.objects:
        seen = object_in_frame(obj, prepared, camera_pose, record, depth, instance_boxes, config)
        if seen is not None:
            results.append(seen)
    return results


def _scene_mesh(
    geometry: ScanGeometry,
    scene: Mapping[str, Any] | None,
    config: VisibilitySettings,
    quarantine: QuarantineLog | None,
) -> SceneMesh | None:
    """The scan's mesh for ray casting, or None (no mesh, switched off, or unusable: logged)."""
    if not config.visibility_from_mesh or scene is None:
        return None
    paths = [scene.get("mesh_path"), scene.get("segs_path"), scene.get("aggregation_path")]
    if not all(path is not None and Path(path).is_file() for path in paths):
        return None
    try:
        return SceneMesh.from_scan(scene, geometry.world_to_gravity)
    except MeshSegmentationError as error:
        logger.warning("scene %s: %s; visibility from object points", geometry.scene_id, error)
        if quarantine is not None:
            quarantine.add(
                f"{geometry.scene_id}/mesh", f"unusable mesh segmentation: {error}", source_file=paths[0]
            )
        return None


def build_frame_visibility(
    geometry: ScanGeometry,
    frames: pl.DataFrame,
    config: VisibilitySettings = DEFAULT_VISIBILITY_SETTINGS,
    quarantine: QuarantineLog | None = None,
    progress: bool = False,
    scene: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """The ``frame_visibility`` rows of one scene: every used frame against every measured object.

    Frames that fail now (a file changed since the geometry was built) go to ``quarantine``.
    ``scene`` is the scan's ``rgbd_scenes`` row: when it names a usable segmented mesh (and
    ``visibility_from_mesh``), visibility comes from ray casting against it.
    """
    records = [
        record
        for record in frame_records(frames.filter(pl.col("scene_id") == geometry.scene_id), quarantine)
        if record.frame_index in set(geometry.used_frames)
    ]
    poses = camera_poses_in_gravity(geometry, records)
    prepared = PreparedObjects(geometry.objects)
    mesh = _scene_mesh(geometry, scene, config, quarantine)
    rows = []
    for record in tqdm(records, desc=f"visibility {geometry.scene_id}", disable=not progress, leave=False):
        camera_pose = poses[record.frame_index]
        try:
            seen = frame_visibility(record, camera_pose, prepared, config, mesh)
        except FrameError as error:
            if quarantine is not None:
                quarantine.add(record.record_id, error.reason, source_file=error.source_file)
            logger.warning("skipping frame %s: %s", record.record_id, error.reason)
            continue
        width, height = record.color_size
        for item in seen:
            rows.append(
                {
                    "scene_id": geometry.scene_id,
                    **item.as_row(),
                    "image_width": width,
                    "image_height": height,
                    "camera_position": camera_pose[:3, 3].tolist(),
                    "camera_pose": camera_pose.reshape(-1).tolist(),
                }
            )
    return pl.DataFrame(rows, schema=polars_schema(FrameVisibility))
