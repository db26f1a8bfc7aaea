"""Visibility by ray casting against the scan's segmented mesh (open3d ``RaycastingScene``).

When a scan has a segmented mesh (ScanNet ``*_vh_clean_2.ply`` with its segments and aggregation),
every triangle whose three vertices belong to one object carries that object's id. Per frame,
one ``list_intersections`` call casts an even grid of rays through the image and a coarser ring
of rays around it (the image plane extended by one image size on each side) and returns every
surface each ray crosses. From that single cast:

- a ray's *first* surface is what its pixel shows; an object is *visible* at the pixel when it is
  first and the frame's measured depth does not show something nearer that the mesh lacks;
- every object a ray crosses at all would cover the pixel if nothing else were in the way, so
  *visibility ratio* = visible area / area the object would cover alone inside the image;
- *in-frame ratio* = area it would cover alone inside the image / inside plus the ring.

Nothing depends on the sign of stored normals or on the density of object points, so floors,
walls, benches and thin parts are decided like anything else.

>>> grid = ray_grid(np.array([[100.0, 0, 32], [0, 100.0, 24], [0, 0, 1]]), 64, 48, 3072)
>>> grid.stride, int(grid.inside.sum()), float(grid.area[0])
(1, 3072, 1.0)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from assets.dge.camera import rotate_vectors, transform_points
from assets.dge.objects import read_mesh_segmentation

if TYPE_CHECKING:
    import open3d as o3d

# open3d is imported inside the functions that use it: importing it loads its dash/plotly UI (seconds).
logger = logging.getLogger(__name__)

RING_STRIDE_FACTOR = 4
"""The ring around the image is sampled this many times coarser than the image (per side)."""


def _open3d_tensor(array: np.ndarray) -> o3d.core.Tensor:
    """``array`` copied into an open3d tensor of the same dtype on the CPU."""
    import open3d as o3d

    # open3d's stubs declare the constructor's dtype and device as required; at run time both are optional.
    return o3d.core.Tensor(array)  # type: ignore[call-overload]


class SceneMesh:
    """A scan's segmented mesh in the gravity frame, ready for ray casting, with each triangle's object id."""

    def __init__(self, vertices: np.ndarray, triangles: np.ndarray, triangle_objects: np.ndarray):
        import open3d as o3d

        self.triangle_objects = np.append(np.asarray(triangle_objects, dtype=np.int64), -1)
        self.scene = o3d.t.geometry.RaycastingScene()
        self.scene.add_triangles(
            _open3d_tensor(np.ascontiguousarray(vertices, dtype=np.float32)),
            _open3d_tensor(np.ascontiguousarray(triangles, dtype=np.uint32)),
        )

    @classmethod
    def from_scan(cls, scene: Mapping[str, Any], world_to_gravity: np.ndarray) -> SceneMesh:
        """The scan's mesh and segmentation (raises ``MeshSegmentationError`` when unusable)."""
        vertices, triangles, vertex_objects, _ = read_mesh_segmentation(
            scene["mesh_path"], scene["segs_path"], scene["aggregation_path"]
        )
        owners = vertex_objects[triangles]
        same = (owners[:, 0] == owners[:, 1]) & (owners[:, 1] == owners[:, 2])
        return cls(transform_points(world_to_gravity, vertices), triangles, np.where(same, owners[:, 0], -1))

    def object_of(self, primitive_ids: np.ndarray) -> np.ndarray:
        """Object id of each hit triangle (-1: unannotated or no hit)."""
        # INVALID_ID (the largest id) lands on the -1 appended after the triangles.
        return self.triangle_objects[np.minimum(primitive_ids, len(self.triangle_objects) - 1)]


@dataclass(frozen=True)
class RayGrid:
    """The rays of one camera model: camera-frame directions (z = 1), pixel positions, area per ray."""

    stride: int
    directions: np.ndarray  # (N, 3), z = 1: the hit distance along a ray is the hit's depth
    pixels: np.ndarray  # (N, 2) colour pixel (u, v) of each ray
    inside: np.ndarray  # (N,) the ray passes through the image
    area: np.ndarray  # (N,) image area (pixels) each ray stands for


@lru_cache(maxsize=16)
def _ray_grid(intrinsics: tuple[float, ...], width: int, height: int, rays: int) -> RayGrid:
    stride = max(1, round(math.sqrt(width * height / max(rays, 1))))
    us = np.arange((stride - 1) / 2.0, width, stride)
    vs = np.arange((stride - 1) / 2.0, height, stride)
    grid_u, grid_v = (axis.ravel() for axis in np.meshgrid(us, vs))
    coarse = stride * RING_STRIDE_FACTOR
    ring_u, ring_v = (
        axis.ravel()
        for axis in np.meshgrid(
            np.arange(-width + coarse / 2.0, 2 * width, coarse),
            np.arange(-height + coarse / 2.0, 2 * height, coarse),
        )
    )
    outside = (ring_u < -0.5) | (ring_u > width - 0.5) | (ring_v < -0.5) | (ring_v > height - 0.5)
    u = np.concatenate([grid_u, ring_u[outside]])
    v = np.concatenate([grid_v, ring_v[outside]])
    inside = np.arange(len(u)) < len(grid_u)
    k = np.asarray(intrinsics, dtype=np.float64).reshape(3, 3)
    directions = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], axis=1)
    area = np.where(inside, float(stride**2), float(coarse**2))
    return RayGrid(stride, directions, np.stack([u, v], axis=1), inside, area)


def ray_grid(intrinsics: np.ndarray, width: int, height: int, rays: int) -> RayGrid:
    """The rays of a camera with these colour intrinsics and image size (about ``rays`` through the image)."""
    return _ray_grid(
        tuple(float(v) for v in np.asarray(intrinsics).ravel()), int(width), int(height), int(rays)
    )


@dataclass
class ObjectRays:
    """What one frame's cast says about one object (areas in pixels)."""

    visible_area: float
    inside_area: float  # the area it would cover alone inside the image
    outside_area: float  # ... and on the ring around it
    visible_pixels: np.ndarray  # (M, 2) pixel positions of its visible rays

    @property
    def visibility_ratio(self) -> float:
        """Visible over what it would cover alone inside the image."""
        return self.visible_area / self.inside_area if self.inside_area > 0 else 0.0

    @property
    def in_frame_ratio(self) -> float:
        """Share of the silhouette inside the image."""
        total = self.inside_area + self.outside_area
        return self.inside_area / total if total > 0 else 0.0


def cast_frame(
    mesh: SceneMesh,
    grid: RayGrid,
    camera_pose: np.ndarray,
    measured_depth: np.ndarray | None,
    depth_intrinsics: np.ndarray,
    tolerance_m: float,
    tolerance_relative: float,
) -> dict[int, ObjectRays]:
    """Cast the grid's rays from a camera (camera-to-gravity pose) and summarise every object they meet.

    ``measured_depth`` (metres, 0/NaN missing) marks rays whose first mesh surface lies behind
    something the sensor saw nearer (by more than the tolerance): the object there is occluded by
    something the mesh lacks.
    """
    rays = np.empty((len(grid.directions), 6), dtype=np.float32)
    rays[:, :3] = camera_pose[:3, 3]
    rays[:, 3:] = rotate_vectors(camera_pose, grid.directions)
    hits = mesh.scene.list_intersections(_open3d_tensor(rays))
    ray_ids = hits["ray_ids"].numpy().astype(np.int64)
    t_hit = hits["t_hit"].numpy().astype(np.float64)
    objects = mesh.object_of(hits["primitive_ids"].numpy())
    count = len(grid.area)
    first_object = np.full(count, -1, dtype=np.int64)
    first_depth = np.full(count, np.inf)
    first_of_ray = first_hits(ray_ids, t_hit)
    first_object[ray_ids[first_of_ray]] = objects[first_of_ray]
    first_depth[ray_ids[first_of_ray]] = t_hit[first_of_ray]
    if measured_depth is not None:
        first_object = np.where(
            _sees_nearer(
                grid, measured_depth, depth_intrinsics, first_depth, tolerance_m, tolerance_relative
            ),
            -1,
            first_object,
        )
    visible = grid.inside & (first_object >= 0)
    # Every (ray, object) pair once: the pixels each object would cover alone.
    annotated = np.flatnonzero(objects >= 0)
    slots = int(objects.max(initial=0)) + 1
    crossed = np.zeros(count * slots, dtype=bool)  # (ray, object) flattened row by row
    crossed[ray_ids[annotated] * slots + objects[annotated]] = True
    pair_rays, pair_objects = np.divmod(np.flatnonzero(crossed), slots)
    pair_inside = grid.inside[pair_rays]
    # Areas are whole pixels, so these sums are exact in any order.
    inside_area = np.bincount(
        pair_objects[pair_inside], weights=grid.area[pair_rays[pair_inside]], minlength=slots
    )
    outside_area = np.bincount(
        pair_objects[~pair_inside], weights=grid.area[pair_rays[~pair_inside]], minlength=slots
    )
    visible_rays = np.flatnonzero(visible)
    visible_area = np.bincount(first_object[visible_rays], weights=grid.area[visible_rays], minlength=slots)
    # Each object's visible rays in ray order: a stable sort by object.
    by_object = visible_rays[np.argsort(first_object[visible_rays], kind="stable")]
    visible_count = np.bincount(first_object[visible_rays], minlength=slots)
    ends = np.cumsum(visible_count)
    summaries = {}
    for object_id in np.flatnonzero(np.bincount(pair_objects, minlength=slots)):
        own_visible = by_object[ends[object_id] - visible_count[object_id] : ends[object_id]]
        summaries[int(object_id)] = ObjectRays(
            visible_area=float(visible_area[object_id]),
            inside_area=float(inside_area[object_id]),
            outside_area=float(outside_area[object_id]),
            visible_pixels=grid.pixels[own_visible],
        )
    return summaries


def first_hits(ray_ids: np.ndarray, t_hit: np.ndarray) -> np.ndarray:
    """Index of each hit ray's nearest hit (the earliest listed of equally near ones), in ray order.

    >>> first_hits(np.array([2, 0, 0, 0, 2]), np.array([3.0, 2.0, 1.0, 1.0, 0.5])).tolist()
    [2, 4]
    """
    if len(ray_ids) == 0:
        return np.zeros(0, dtype=np.int64)
    # list_intersections lists the hits ray by ray: then no sort is needed.
    by_ray = None if np.all(ray_ids[1:] >= ray_ids[:-1]) else np.argsort(ray_ids, kind="stable")
    sorted_rays = ray_ids if by_ray is None else ray_ids[by_ray]
    sorted_t = t_hit if by_ray is None else t_hit[by_ray]
    starts = np.flatnonzero(np.r_[True, sorted_rays[1:] != sorted_rays[:-1]])
    nearest = np.minimum.reduceat(sorted_t, starts)
    ray_of_hit = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(sorted_rays)]))
    candidates = np.flatnonzero(sorted_t == nearest[ray_of_hit])
    first = candidates[np.r_[True, ray_of_hit[candidates[1:]] != ray_of_hit[candidates[:-1]]]]
    return first if by_ray is None else by_ray[first]


def _sees_nearer(
    grid: RayGrid,
    depth_m: np.ndarray,
    depth_intrinsics: np.ndarray,
    mesh_depth: np.ndarray,
    tolerance_m: float,
    tolerance_relative: float,
) -> np.ndarray:
    """Rays whose measured depth is valid and nearer than the mesh's first surface by more than the tolerance."""
    height, width = depth_m.shape
    cols = np.round(depth_intrinsics[0, 0] * grid.directions[:, 0] + depth_intrinsics[0, 2]).astype(np.int64)
    rows = np.round(depth_intrinsics[1, 1] * grid.directions[:, 1] + depth_intrinsics[1, 2]).astype(np.int64)
    usable = (
        grid.inside & (cols >= 0) & (cols < width) & (rows >= 0) & (rows < height) & np.isfinite(mesh_depth)
    )
    measured = np.zeros(len(mesh_depth))
    measured[usable] = depth_m[rows[usable], cols[usable]]
    with np.errstate(invalid="ignore"):
        valid = usable & np.isfinite(measured) & (measured > 0)
        return valid & (measured < mesh_depth - tolerance_m - tolerance_relative * mesh_depth)
