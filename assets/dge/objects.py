"""Per-object geometry: points from instance segmentation, cleaning, 3D boxes, centroid and size.

Object points come from one of three sources:

- the scan's mesh segmentation (ScanNet ``*_vh_clean_2.ply`` + ``*.segs.json`` +
  ``*.aggregation.json``, ScanNet++ ``mesh_aligned_0.05.ply`` + ``segments.json`` + ``segments_anno.json``):
  the triangles whose vertices all belong to one object's segments, sampled uniformly by area, so every
  surface of the object is covered;
- the frames' instance masks (:mod:`assets.dge.fusion`): the fused points labelled with the object,
  which cover only what the cameras saw;
- annotated oriented boxes (ARKitScenes): the points of the mesh (sampled by area near each box) or of the
  fused cloud inside each box (:func:`points_in_box`), without the surfaces that only pass through it: a
  floor or support under the object, a wall beside it.

Either way the points are cleaned (open3d statistical outlier removal, then every DBSCAN cluster
that holds a fair share of the points, so disconnected parts of one object stay) and measured in the gravity-aligned frame: the axis-aligned box, a yaw-only oriented box
(full height; its yaw follows the object's vertical faces, or the footprint's minimum-area
rectangle when they have no clear orientation), the centroid (the oriented box's
centre), the size (its largest extent) and the point count. Each stored point carries the surface
area it stands for (``point_areas``), which lets visibility weigh points by projected area.

>>> import numpy as np
>>> centre, extents, yaw = yaw_oriented_box(np.array([[0, 0, 0], [2, 0, 0], [2, 1, 1], [0, 1, 1.0]]))
>>> centre.round(3).tolist(), extents.round(3).tolist(), round(yaw, 3)
([1.0, 0.5, 0.5], [2.0, 1.0, 1.0], 0.0)
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pydantic
import scipy.sparse
from pydantic import ConfigDict, Field
from scipy import ndimage
from scipy.spatial import ConvexHull, QhullError, cKDTree

# open3d is imported inside the functions that use it: importing it loads its dash/plotly UI (seconds).
logger = logging.getLogger(__name__)

OBJECT_QUERY_WORKERS = 1
"""Threads of the KD-tree queries on one object's points. An object holds at most some 50,000 points, where
scipy's thread pool costs more CPU time than it saves (every thread's time counts on shared cores); scenes run
in parallel processes instead."""


class ObjectSettings(pydantic.BaseModel):
    """How object points are sampled, cleaned and stored.

    The fields are run configuration (``scene_geometry``'s launchpad). The ``ClassVar`` attributes are the
    method's constants (mesh sampling, outlier test, DBSCAN, settling, faces, curved ends, mask tops): not run
    configuration, but read the same way (``settings.face_band_m``); a test or benchmark that needs other values
    passes an instance of a subclass that overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_object_points: int = Field(
        default=30, description="Objects with fewer points after cleaning are quarantined."
    )
    max_stored_points: int = Field(
        default=6000,
        description="Stored points per object (a seeded subsample beyond that; the per-point area grows to keep "
        "the total).",
    )
    seed: int = Field(default=0, description="Seed of mesh sampling and subsampling.")

    # Constants of the method (not run configuration; a test may override them in a subclass).
    mesh_sample_spacing_m: ClassVar[float] = 0.015
    """Mean spacing of the points sampled on mesh triangles (one point per spacing**2 of area), within
    mesh_min_samples and mesh_max_samples per object."""
    mesh_min_samples: ClassVar[int] = 3000
    """Least points sampled per mesh object (finer spacing for small objects, so thin parts such as handles
    survive cleaning)."""
    mesh_max_samples: ClassVar[int] = 12000
    """Most points sampled per mesh object (coarser spacing for large objects, which keeps cleaning fast)."""
    object_outlier_neighbors: ClassVar[int] = 16
    """Neighbours of the statistical outlier test of object points."""
    object_outlier_std_ratio: ClassVar[float] = 2.5
    """Object points farther than this many standard deviations above the mean neighbour distance are
    outliers."""
    dbscan_eps_m: ClassVar[float] = 0.08
    """DBSCAN radius of object cleaning."""
    dbscan_min_points: ClassVar[int] = 2
    """DBSCAN core-point size (counted in voxels of half the radius, see clean_point_indices)."""
    min_cluster_share: ClassVar[float] = 0.02
    """After outlier removal, DBSCAN clusters holding at least this share of an object's points are all kept
    (an object is the union of its parts: a lamp's pole and shade, a shelf's boards, segments that do not
    touch); smaller clusters are stray points."""
    keep_parts_below: ClassVar[bool] = True
    """Smaller clusters than min_cluster_share are kept too when they lie wholly below the kept clusters and
    within their footprint (a chair's legs under its seat, see parts_below)."""
    extent_trim_share: ClassVar[float] = 0.005
    """Objects fused from noisy depth frames (instance masks) are measured without this share of their points
    at each end of the box's length and width axes and at its top: the extremes of a noisy cloud are its
    noise (a cabinet 3 m away grows by 10 cm at both ends otherwise). The bottom is not trimmed (a chair's
    legs are few points; nothing is measured below the floor). Mesh samples are not trimmed."""
    settle_neighbors: ClassVar[int] = 16
    """Noisy objects: each point moves along its normal to the mean of its this many nearest points before the
    box is measured (see settle_on_surface); 0 leaves the points where they are."""
    settle_iterations: ClassVar[int] = 3
    """Noisy objects: rounds of settle_on_surface (each halves what is left of the noise)."""
    surface_neighbors: ClassVar[int] = 48
    """Neighbours of the local planes whose spread is a noisy (instance-mask) object's measured depth noise
    (see surface_spread)."""
    face_band_m: ClassVar[float] = 0.25
    """Noisy objects: a vertical face is looked for within this distance of each end of the box's length and
    width axes (at most 40% of the extent)."""
    face_slab_m: ClassVar[float] = 0.04
    """Noisy objects: thickness of the slab that holds a face (registration error between frames and depth
    noise spread a face's points over a few centimetres)."""
    face_min_share: ClassVar[float] = 0.25
    """Noisy objects: a slab is a face when it holds at least this share of the points near its end; the box
    side then runs through the median of the face's points instead of the points' trimmed extreme."""
    face_max_inset_m: ClassVar[float] = 0.1
    """Noisy objects: a face lies at most this far inside the box's trimmed side (farther in, the slab is an
    inner part, such as a monitor's screen in front of its stand)."""
    face_min_cover: ClassVar[float] = 0.5
    """Noisy objects: a face's points fill at least this share of a 6 x 6 grid over the box's side (its other
    horizontal extent by its height), so a table top's edge, a row of legs or a lamp's shade is no face."""
    face_max_beyond_share: ClassVar[float] = 0.1
    """Noisy objects: the points beyond a face (outside its slab) number at most this share of the face's own
    points."""
    face_min_aligned_share: ClassVar[float] = 0.4
    """Noisy objects: at least this share of a face's points have normals within 37 degrees of the axis the
    face closes."""
    face_outward_min_alignment: ClassVar[float] = 0.8
    """Noisy objects: a face's side runs through the median of its points whose normal's component along the
    axis, pointing out of the end, is at least this (within 37 degrees of the axis; see face_refined_box),
    so a board's inner face a few centimetres in front of its outer one (a chair's backrest) does not pull
    the side in. Fewer than curved_end_min_points such points leave the side at the median of the whole
    slab."""
    face_max_shrink_share: ClassVar[float] = 0.5
    """Noisy objects: faces that would shorten an axis of the box by more than this share are inner parts (a
    monitor's screen above a deeper stand): the axis keeps its trimmed extremes."""
    curved_end_band_m: ClassVar[float] = 0.03
    """Noisy objects: an end of the box without a face (a lamp's round shade, a chair's seat edge) runs
    through the object's outward-facing points within this distance inside its trimmed side (see
    outward_surface_edge); it never moves farther in."""
    curved_end_min_alignment: ClassVar[float] = 0.9
    """Noisy objects: a point faces out of an end without a face when its normal's component along the axis,
    pointing out, is at least this (within 26 degrees of the axis)."""
    curved_end_min_points: ClassVar[int] = 20
    """Noisy objects: an end without a face moves only when at least this many outward-facing points lie
    within curved_end_band_m of it (a side seen by few frames keeps its trimmed extreme)."""
    curved_end_quantile: ClassVar[float] = 0.9
    """Noisy objects: the side of an end without a face runs through this quantile of its outward-facing
    points along the axis (registration error between frames blurs a curved surface by about a centimetre)."""
    boundary_quantile: ClassVar[float] = 0.05
    """Noisy objects: an end of the box without a face is blurred by its distance to this quantile of the
    points along the axis (see face_refined_box); the blur enters the size uncertainty."""
    mask_top_min_frames: ClassVar[int] = 3
    """Objects from instance masks: the top of the box is raised to what the masks show (see
    raise_top_to_masks) only when at least this many frames' mask tops cross the object's footprint."""
    mask_top_quantile: ClassVar[float] = 0.25
    """Objects from instance masks: the quantile of the frames' mask-top heights taken as the top (see
    raise_top_to_masks)."""
    mask_top_min_raise_m: ClassVar[float] = 0.02
    """Objects from instance masks: the top of the box is raised only when the masks put it at least this much
    higher than the fused points do."""
    box_face_band_m: ClassVar[float] = 0.05
    """Annotated boxes: a surface parallel to a box face and within this distance inside it (the box's looseness)
    is tested for passing through the box."""
    box_shell_m: ClassVar[float] = 0.1
    """Annotated boxes: a surface passes through the box when it continues at most this far outside its sides."""
    box_plane_tolerance_m: ClassVar[float] = 0.01
    """Annotated boxes: face-parallel points are grouped into planes by their position along the face's axis in steps
    of this size (a plane takes its step and the two beside it)."""
    box_surface_cell_m: ClassVar[float] = 0.04
    """Annotated boxes: a face-parallel plane's points are connected when they lie in touching squares of this size."""
    box_parallel_min_cos: ClassVar[float] = 0.9
    """Annotated boxes: a surface is parallel to a box face when its normal is within about 25 degrees of the face's
    (cosine)."""


DEFAULT_OBJECT_SETTINGS = ObjectSettings()


class ObjectRejectedError(ValueError):
    """An object that cannot be measured (too few points after cleaning)."""


@dataclass
class ObjectGeometry:
    """One object's measured geometry (gravity-aligned frame, metres)."""

    object_id: int
    label: str
    point_count: int
    centroid: np.ndarray
    aabb_min: np.ndarray
    aabb_max: np.ndarray
    obb_center: np.ndarray
    obb_extents: np.ndarray  # length along the yaw axis, width across it, height
    obb_yaw: float  # radians in [0, pi): direction of the length axis from +x
    points: np.ndarray  # (N, 3) stored (possibly subsampled) points
    normals: np.ndarray  # (N, 3), NaN where unknown
    point_areas: np.ndarray  # (N,) surface area each stored point stands for, m^2
    point_spread_m: float = 0.0  # spread of the points about their local planes (0 for mesh samples)
    boundary_blur_m: float = (
        0.0  # how spread the box's unfaced ends are (face_refined_box; 0 for mesh samples)
    )
    # Measurement confidence (assets.dge.confidence), filled in by the scene build; the defaults mean
    # "never observed".
    observed_views: int = 0
    extent_coverage: float = 0.0
    depth_noise_m: float = 0.0
    position_uncertainty_m: float = math.inf
    size_uncertainty_m: float = math.inf
    cut_off_views: int = 0
    support_gap_m: float = 0.0

    @property
    def size(self) -> float:
        """The largest extent of the oriented box (metres)."""
        return float(np.max(self.obb_extents))


def min_area_rectangle(points_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """Minimum-area enclosing rectangle of 2D points: ``(centre, (length, width), yaw)``.

    ``length >= width``; ``yaw`` in ``[0, pi)`` is the direction of the length side from +x.

    >>> c, e, yaw = min_area_rectangle(np.array([[0, 0], [2, 2], [1.5, 2.5], [-0.5, 0.5]]))
    >>> c.round(6).tolist(), e.round(6).tolist(), round(math.degrees(yaw), 3)
    ([0.75, 1.25], [2.828427, 0.707107], 45.0)
    """
    rounded = np.round(np.asarray(points_xy, dtype=np.float64), 9)
    hull = _hull_points(rounded)  # duplicates are no matter to the hull: de-duplicate only when it fails
    if hull is None:
        unique = np.unique(rounded, axis=0)
        hull = _hull_points(unique)
        if hull is None:  # fewer than 3 distinct points, or all on one line
            return _degenerate_rectangle(unique)
    edges = np.diff(np.vstack([hull, hull[:1]]), axis=0)
    angles = np.unique(np.mod(np.arctan2(edges[:, 1], edges[:, 0]), math.pi / 2))
    best = None
    for angle in angles:
        cos_a, sin_a = math.cos(angle), math.sin(angle)
        rotation = np.array([[cos_a, sin_a], [-sin_a, cos_a]])  # world -> box frame
        local = hull @ rotation.T
        low, high = local.min(axis=0), local.max(axis=0)
        area = float(np.prod(high - low))
        if best is None or area < best[0] - 1e-12:
            best = (area, angle, low, high, rotation)
    assert best is not None  # a hull of 3 or more points has edges, hence angles
    _, angle, low, high, rotation = best
    centre = rotation.T @ ((low + high) / 2.0)
    extents = high - low
    if extents[1] > extents[0]:
        extents = extents[::-1]
        angle += math.pi / 2
    return centre, extents, float(np.mod(angle, math.pi))


def _hull_points(points_xy: np.ndarray) -> np.ndarray | None:
    """The convex hull's vertices (counter-clockwise), or None for fewer than 3 points or a flat hull."""
    if len(points_xy) < 3:
        return None
    try:
        return points_xy[ConvexHull(points_xy).vertices]
    except QhullError:
        return None


def _degenerate_rectangle(points_xy: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    if len(points_xy) == 0:
        return np.zeros(2), np.zeros(2), 0.0
    low, high = points_xy.min(axis=0), points_xy.max(axis=0)
    span = high - low
    yaw = float(np.mod(math.atan2(span[1], span[0]), math.pi)) if np.any(span > 0) else 0.0
    return (low + high) / 2.0, np.array([float(np.linalg.norm(span)), 0.0]), yaw


def dominant_wall_yaw(normals: np.ndarray, weights: np.ndarray | None = None) -> tuple[float, float]:
    """Dominant orientation (modulo 90 degrees) of the near-vertical surfaces: ``(yaw in [0, pi/2), strength)``.

    Each normal whose horizontal part dominates votes with angle ``4 * atan2(n_y, n_x)`` (faces
    90 degrees apart agree); ``strength`` is the length of the weighted mean vote (1 for a box,
    about 0 for a cylinder).

    >>> yaw, strength = dominant_wall_yaw(np.array([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0]]))
    >>> round(yaw, 6), round(strength, 6)
    (0.0, 1.0)
    """
    normals = np.nan_to_num(np.asarray(normals, dtype=np.float64), nan=0.0)
    horizontal = np.hypot(normals[:, 0], normals[:, 1]) if len(normals) else np.zeros(0)
    vertical_surface = horizontal > 0.7
    if not vertical_surface.any():
        return 0.0, 0.0
    w = horizontal[vertical_surface] * (1.0 if weights is None else np.asarray(weights)[vertical_surface])
    angles = 4.0 * np.arctan2(normals[vertical_surface, 1], normals[vertical_surface, 0])
    vote = np.sum(w * np.exp(1j * angles)) / max(float(np.sum(w)), 1e-12)
    yaw = float(np.mod(np.angle(vote) / 4.0, math.pi / 2))
    if math.pi / 2 - yaw < 1e-9:
        yaw = 0.0
    return yaw, float(abs(vote))


def rectangle_at_yaw(points_xy: np.ndarray, yaw: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Enclosing rectangle of 2D points with sides along ``yaw``: ``(centre, (length, width), yaw)``, length first.

    >>> c, e, yaw = rectangle_at_yaw(np.array([[0, 0], [1, 0], [1, 3], [0, 3.0]]), 0.0)
    >>> c.tolist(), e.tolist(), round(math.degrees(yaw), 3)
    ([0.5, 1.5], [3.0, 1.0], 90.0)
    """
    cos_a, sin_a = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[cos_a, sin_a], [-sin_a, cos_a]])
    local = points_xy @ rotation.T
    low, high = local.min(axis=0), local.max(axis=0)
    centre = rotation.T @ ((low + high) / 2.0)
    extents = high - low
    if extents[1] > extents[0]:
        extents = extents[::-1]
        yaw += math.pi / 2
    return centre, extents, float(np.mod(yaw, math.pi))


def yaw_oriented_box(
    points: np.ndarray,
    normals: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    min_wall_strength: float = 0.05,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Gravity-aligned oriented box of points: ``(centre (3,), extents (length, width, height), yaw)``.

    The yaw follows the object's vertical faces (:func:`dominant_wall_yaw`) when their orientation
    is clear (``strength >= min_wall_strength``), as furniture and handles have; otherwise it is the
    footprint's minimum-area rectangle.
    """
    strength = 0.0
    if normals is not None and len(normals) == len(points):
        yaw, strength = dominant_wall_yaw(normals, weights)
    if strength >= min_wall_strength:
        centre_xy, extents_xy, yaw = rectangle_at_yaw(points[:, :2], yaw)
    else:
        centre_xy, extents_xy, yaw = min_area_rectangle(points[:, :2])
    z_low, z_high = float(points[:, 2].min()), float(points[:, 2].max())
    centre = np.array([centre_xy[0], centre_xy[1], (z_low + z_high) / 2.0])
    return centre, np.array([extents_xy[0], extents_xy[1], z_high - z_low]), yaw


def statistical_inliers(
    points: np.ndarray, neighbors: int, std_ratio: float, workers: int = -1
) -> np.ndarray:
    """Indices of the points whose mean distance to their ``neighbors`` nearest points (the point itself included)
    is below the mean of those distances plus ``std_ratio`` standard deviations: open3d's
    ``remove_statistical_outlier``, with scipy's KD-tree (``workers`` threads; -1: every core).

    >>> grid = np.stack(np.meshgrid(np.arange(10.0), np.arange(10.0), [0.0]), axis=-1).reshape(-1, 3)
    >>> kept = statistical_inliers(np.vstack([grid, [[50.0, 50.0, 0.0]]]), 4, 2.0)
    >>> len(kept), int(kept.max())
    (100, 99)
    """
    return _statistical_test(points, neighbors, std_ratio, workers)[0]


def _statistical_test(
    points: np.ndarray, neighbors: int, std_ratio: float, workers: int
) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`statistical_inliers` and every point's ``neighbors`` nearest points (None when it has too few)."""
    if len(points) <= neighbors:
        return np.arange(len(points)), None
    distances, index = cKDTree(points).query(points, k=neighbors, workers=workers)
    mean_distance = distances.mean(axis=1)
    threshold = mean_distance.mean() + std_ratio * mean_distance.std(ddof=1)
    return np.flatnonzero(mean_distance < threshold), index


def clean_point_indices(points: np.ndarray, config: ObjectSettings = DEFAULT_OBJECT_SETTINGS) -> np.ndarray:
    """Indices of the points kept by statistical outlier removal, then every DBSCAN cluster that holds at least
    ``min_cluster_share`` of the points (open3d).

    Keeping every substantial cluster, not only the largest, keeps the parts of one object that do
    not touch (a shelf's separate segments, a lamp's shade above a pole that depth barely resolves).
    DBSCAN runs on the centres of voxels of half its radius (each voxel takes its centre's cluster),
    which gives the same clusters on dense clouds at a fraction of the cost.

    >>> rng = np.random.default_rng(0)
    >>> blob = rng.normal(0, 0.02, (300, 3))
    >>> stray = np.array([[3.0, 3.0, 3.0], [3.01, 3.0, 3.0]])
    >>> kept = clean_point_indices(np.vstack([blob, stray]))
    >>> len(kept) > 250, bool(kept.max() < 300)
    (True, True)
    """
    return _clean_points(points, config)[0]


def _clean_points(points: np.ndarray, config: ObjectSettings) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`clean_point_indices` and every point's ``object_outlier_neighbors`` nearest points among all of them
    (None when the outlier test did not run)."""
    import open3d as o3d

    everything = np.arange(len(points))
    if len(points) < max(config.object_outlier_neighbors, config.dbscan_min_points) + 1:
        return everything, None
    kept, neighbours = _statistical_test(
        np.asarray(points, dtype=np.float64),
        config.object_outlier_neighbors,
        config.object_outlier_std_ratio,
        OBJECT_QUERY_WORKERS,
    )
    if len(kept) < config.dbscan_min_points:
        return kept, neighbours
    voxel = config.dbscan_eps_m / 2.0
    keys = np.floor(points[kept] / voxel).astype(np.int64)
    keys -= keys.min(axis=0)
    # One integer per voxel, in the order of its (x, y, z) keys: the same voxels, in the same order, as np.unique
    # of the key rows, for a fraction of the cost.
    _, voxel_of_point = np.unique(
        np.ravel_multi_index(keys.T, tuple(keys.max(axis=0) + 1)), return_inverse=True
    )
    voxel_of_point = voxel_of_point.reshape(-1)
    counts = np.bincount(voxel_of_point)
    centres = (
        np.stack([np.bincount(voxel_of_point, weights=points[kept, axis]) for axis in range(3)], axis=1)
        / counts[:, None]
    )
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(centres))
    labels = np.asarray(cloud.cluster_dbscan(eps=config.dbscan_eps_m, min_points=config.dbscan_min_points))
    clustered = labels >= 0
    if not clustered.any():
        return kept[:0], neighbours
    sizes = np.bincount(labels[clustered], weights=counts[clustered])
    substantial = sizes >= config.min_cluster_share * sizes.sum()
    if config.keep_parts_below and not substantial.all():
        substantial |= parts_below(centres[clustered], labels[clustered], substantial, config.dbscan_eps_m)
    return kept[np.isin(labels[voxel_of_point], np.flatnonzero(substantial))], neighbours


def parts_below(
    points: np.ndarray, labels: np.ndarray, substantial: np.ndarray, margin_m: float
) -> np.ndarray:
    """Which clusters are parts of the object below its body: a cluster that lies wholly below the lowest point of the
    ``substantial`` clusters (the body) and whose centre lies within the body's footprint (its minimum-area rectangle,
    ``margin_m`` wider on every side). The substantial clusters are marked too.

    ``labels`` give each point's cluster (0 .. ``len(substantial) - 1``). A chair's legs under its seat are a few
    points each where depth barely resolves them, so each is a cluster too small to count as a part by its share
    of the points; what lies under the seat within its footprint is the chair's, a stray point beside or above
    the object is not.

    >>> seat = np.column_stack([np.repeat(np.linspace(0, 0.5, 11), 11), np.tile(np.linspace(0, 0.5, 11), 11), np.full(121, 0.45)])
    >>> leg = np.column_stack([np.full(5, 0.02), np.full(5, 0.02), np.linspace(0.0, 0.2, 5)])
    >>> stray = np.array([[1.2, 0.2, 0.1], [0.2, 0.2, 0.9]])
    >>> labels = np.concatenate([np.zeros(121, np.int64), np.ones(5, np.int64), [2, 3]])
    >>> parts_below(np.vstack([seat, leg, stray]), labels, np.array([True, False, False, False]), 0.08).tolist()
    [True, True, False, False]
    """
    count = len(substantial)
    body = substantial[labels]
    if not body.any():
        return substantial.copy()
    centre, extents, yaw = min_area_rectangle(points[body, :2])
    cluster_points = np.bincount(labels, minlength=count).astype(np.float64)
    means = (
        np.stack([np.bincount(labels, weights=points[:, axis], minlength=count) for axis in range(2)], axis=1)
        / np.maximum(cluster_points, 1.0)[:, None]
    )
    tops = np.full(count, -np.inf)
    np.maximum.at(tops, labels, points[:, 2])
    cos_a, sin_a = math.cos(yaw), math.sin(yaw)
    local = (means - centre) @ np.array([[cos_a, sin_a], [-sin_a, cos_a]]).T
    inside = np.all(np.abs(local) <= extents / 2.0 + margin_m, axis=1)
    return substantial | (inside & (tops < points[body, 2].min()) & (cluster_points > 0))


def neighbours_among_kept(
    kept: np.ndarray,
    neighbours: np.ndarray | None,
    kept_points: np.ndarray,
    k: int,
    tree: cKDTree | None = None,
) -> np.ndarray:
    """Each kept point's ``k`` nearest kept points (itself first), as positions in ``kept``: ``(len(kept), k)``.

    ``neighbours`` are every point's nearest points among all of them (``(N, >= k)``, nearest first) or None;
    where a kept point's ``k`` nearest were all kept they are its nearest kept points too, so only the others
    are queried again (on ``tree``, the KD-tree of ``kept_points``, built when not given).

    >>> points = np.array([[0.0, 0, 0], [1, 0, 0], [3, 0, 0], [3.5, 0, 0]])
    >>> neighbours = cKDTree(points).query(points, k=2)[1]
    >>> neighbours_among_kept(np.array([0, 1, 3]), neighbours, points[[0, 1, 3]], 2).tolist()
    [[0, 1], [1, 0], [2, 1]]
    >>> rng = np.random.default_rng(0)
    >>> cloud = rng.uniform(0, 1, (500, 3))
    >>> kept = np.flatnonzero(rng.uniform(size=500) > 0.1)
    >>> reused = neighbours_among_kept(kept, cKDTree(cloud).query(cloud, k=8)[1], cloud[kept], 8)
    >>> bool(np.array_equal(reused, cKDTree(cloud[kept]).query(cloud[kept], k=8)[1]))
    True
    """
    k = min(k, len(kept))
    if neighbours is None or neighbours.shape[1] < k:
        incomplete = np.arange(len(kept))
        rows = np.zeros((len(kept), k), dtype=np.int64)
    else:
        position = np.full(len(neighbours), -1, dtype=np.int64)
        position[kept] = np.arange(len(kept))
        rows = position[neighbours[kept, :k]]
        incomplete = np.flatnonzero((rows < 0).any(axis=1))
    if len(incomplete):
        tree = cKDTree(kept_points) if tree is None else tree
        _, rows[incomplete] = tree.query(kept_points[incomplete], k=k, workers=OBJECT_QUERY_WORKERS)
    return rows.reshape(len(kept), k)


def surface_spread(
    points: np.ndarray,
    neighbors: int,
    min_planarity: float = 3.0,
    max_queries: int = 2000,
    seed: int = 0,
    tree: cKDTree | None = None,
) -> float:
    """Spread of points about the planes fitted to their ``neighbors`` nearest points: the noise of a scanned surface.

    The median standard deviation across their planes of the planar neighbourhoods (second
    covariance eigenvalue at least ``min_planarity`` times the smallest; a small curved object
    narrower than a neighbourhood is no plane), corrected for the three fitted degrees of freedom.
    At most ``max_queries`` points (seeded subsample) are the neighbourhoods' centres; ``tree`` is the
    points' KD-tree when the caller has one.

    >>> rng = np.random.default_rng(0)
    >>> flat = np.column_stack([rng.uniform(0, 1, (2000, 2)), rng.normal(0, 0.01, 2000)])
    >>> round(surface_spread(flat, 24), 2)
    0.01
    """
    points = np.asarray(points, dtype=np.float64)
    k = min(neighbors, len(points))
    if k < 4:
        return 0.0
    queries = points
    if len(points) > max_queries:
        queries = points[np.random.default_rng(seed).choice(len(points), size=max_queries, replace=False)]
    tree = cKDTree(points) if tree is None else tree
    _, index = tree.query(queries, k=k, workers=OBJECT_QUERY_WORKERS)
    neighbourhood = points[index]
    centred = neighbourhood - neighbourhood.mean(axis=1)[:, None, :]
    eigenvalues = np.linalg.eigvalsh(np.einsum("nki,nkj->nij", centred, centred) / k)
    planar = eigenvalues[:, 1] >= min_planarity * np.maximum(eigenvalues[:, 0], 1e-12)
    if not planar.any():
        return 0.0
    return math.sqrt(max(float(np.median(eigenvalues[planar, 0])), 0.0) * k / (k - 3))


def dense_slab_position(
    coordinates: np.ndarray,
    side: int,
    band_m: float = 0.5,
    bin_m: float = 0.02,
    slab_m: float = 0.06,
    min_share: float = 0.2,
    min_points: int = 30,
) -> float | None:
    """Position of a plane (a wall, an object's face) across one end of an axis, or None when none stands out.

    ``coordinates`` are the points' coordinates along the axis; ``side`` is +1 for the high end,
    -1 for the low end. Among the points within ``band_m`` of the end (its 0.1% quantile), the
    densest ``slab_m``-thick slab is the wall when it holds at least ``min_share`` of them (and
    ``min_points``); its position is the median of the slab's points, refined on a slab
    centred there (twice its thickness) until it settles.

    >>> rng = np.random.default_rng(0)
    >>> wall = rng.normal(4.0, 0.03, 3000)
    >>> inside = rng.uniform(0.0, 3.9, 3000)
    >>> found = dense_slab_position(np.concatenate([wall, inside]), +1)
    >>> round(found, 2), dense_slab_position(inside, +1) is None
    (4.0, True)
    """
    values = np.asarray(coordinates, dtype=np.float64) * side
    if len(values) < min_points:
        return None
    end = float(np.quantile(values, 0.999))
    band = values[values >= end - band_m]
    edges = np.arange(end - band_m, end + bin_m, bin_m)
    counts, _ = np.histogram(band, bins=edges)
    window = max(1, round(slab_m / bin_m))
    slabs = np.convolve(counts, np.ones(window), mode="valid")
    best = int(np.argmax(slabs))
    if slabs[best] < max(min_points, min_share * len(band)):
        return None
    low = edges[best]
    position = float(np.median(band[(band >= low) & (band <= low + window * bin_m)]))
    for _ in range(5):
        refined = band[np.abs(band - position) <= slab_m]
        previous, position = position, float(np.median(refined))
        if abs(position - previous) < 1e-4:
            break
    return position * side


def face_cover(
    across: np.ndarray, heights: np.ndarray, width: float, center_z: float, height: float, cells: int = 6
) -> float:
    """Share of a box side's ``cells x cells`` grid (its width across, centred on 0, by its height) that points hold.

    >>> xs, zs = np.meshgrid(np.linspace(-0.5, 0.5, 30), np.linspace(0, 1, 30))
    >>> face_cover(xs.ravel(), zs.ravel(), 1.0, 0.5, 1.0), face_cover(np.array([-0.45, 0.45]), np.array([0.5, 0.5]), 1.0, 0.5, 1.0)
    (1.0, 0.05555555555555555)
    """
    if width <= 0 or height <= 0 or len(across) == 0:
        return 0.0
    column = np.clip(((across / width) + 0.5) * cells, 0, cells - 1).astype(np.int64)
    row = np.clip(((heights - center_z) / height + 0.5) * cells, 0, cells - 1).astype(np.int64)
    return len(np.unique(row * cells + column)) / cells**2


def outward_surface_edge(
    coordinates: np.ndarray, outward: np.ndarray, end: float, band_m: float, min_points: int, quantile: float
) -> float | None:
    """Where the surface that faces out of an axis' high end lies: the ``quantile`` of the coordinates of the
    ``outward``-facing points within ``band_m`` below ``end``, or None when fewer than ``min_points`` are there.

    The silhouette of a round object seen by one or two frames leaves points outside it (flying
    pixels between it and the background, mask labels on background depth); their normals are
    missing (a depth jump) or do not face along the axis, while the object's own surface there does.

    >>> angles = np.linspace(0, 2 * np.pi, 720, endpoint=False)
    >>> ring = np.column_stack([0.17 * np.cos(angles), 0.17 * np.sin(angles)])
    >>> tail = np.column_stack([np.linspace(0.18, 0.22, 20), np.zeros(20)])
    >>> points = np.vstack([ring, tail])
    >>> facing = np.concatenate([np.cos(angles) >= 0.9, np.zeros(20, dtype=bool)])
    >>> round(outward_surface_edge(points[:, 0], facing, 0.19, 0.03, 20, 0.9), 3)
    0.17
    """
    near = outward & (coordinates >= end - band_m)
    if np.count_nonzero(near) < min_points:
        return None
    return float(np.quantile(coordinates[near], quantile))


def outward_face_position(
    coordinates: np.ndarray, outward: np.ndarray, position: float, slab_m: float, min_points: int
) -> float:
    """Where a face found at ``position`` (across an axis' high end) lies: the median of the ``outward``-facing
    points from ``slab_m`` inside ``position`` outwards, or ``position`` itself when fewer than ``min_points``
    are there.

    A face's slab is a few centimetres thick (noise and registration error), so it can hold two parallel
    surfaces: a chair's backrest seen from both sides shows its inner face 5 cm in front of its outer one,
    and the slab's median lies between them. Only the outer surface faces out of the end.

    >>> rng = np.random.default_rng(0)
    >>> inner, outer = rng.normal(0.20, 0.005, 600), rng.normal(0.25, 0.005, 300)
    >>> coordinates = np.concatenate([inner, outer])
    >>> outward = np.concatenate([np.zeros(600, dtype=bool), np.ones(300, dtype=bool)])
    >>> round(float(np.median(coordinates)), 2), round(outward_face_position(coordinates, outward, 0.21, 0.04, 20), 2)
    (0.2, 0.25)
    """
    surface = outward & (coordinates >= position - slab_m)
    if np.count_nonzero(surface) < min_points:
        return position
    return float(np.median(coordinates[surface]))


def _face_side(
    local: np.ndarray,
    local_normals: np.ndarray,
    points: np.ndarray,
    center: np.ndarray,
    extents: np.ndarray,
    axis: int,
    side: int,
    band: float,
    bound: float,
    config: ObjectSettings,
) -> float | None:
    """Where the box's ``side`` (-1: low, +1: high) end along ``axis`` moves to when a face lies there, else None.

    ``local`` and ``local_normals`` are the points' xy and normals in the box frame, ``bound`` the end's
    position; the face's tests are :func:`face_refined_box`'s.
    """
    position = dense_slab_position(
        local[:, axis], side, band, 0.01, config.face_slab_m, config.face_min_share, 20
    )
    if position is None or abs(position - bound) > config.face_max_inset_m:
        return None
    on_face = np.abs(local[:, axis] - position) <= config.face_slab_m
    beyond = np.count_nonzero(side * (local[:, axis] - position) > config.face_slab_m)
    aligned = np.abs(local_normals[on_face, axis]) >= 0.8
    if (
        beyond <= config.face_max_beyond_share * np.count_nonzero(on_face)
        and aligned.mean() >= config.face_min_aligned_share
        and face_cover(local[on_face, 1 - axis], points[on_face, 2], extents[1 - axis], center[2], extents[2])
        >= config.face_min_cover
    ):
        return (
            outward_face_position(
                side * local[:, axis],
                side * local_normals[:, axis] >= config.face_outward_min_alignment,
                side * position,
                config.face_slab_m,
                config.curved_end_min_points,
            )
            * side
        )
    return None


def _unfaced_side(
    coordinates: np.ndarray, normals: np.ndarray, side: int, bound: float, config: ObjectSettings
) -> float:
    """An end without a face moved in to the surface that faces out of it (:func:`outward_surface_edge`), or kept.

    ``coordinates`` and ``normals`` are the points' positions and normals' components along the end's axis,
    ``side`` -1 for the low end and +1 for the high end, ``bound`` the end's position.
    """
    edge = outward_surface_edge(
        side * coordinates,
        side * normals >= config.curved_end_min_alignment,
        side * bound,
        config.curved_end_band_m,
        config.curved_end_min_points,
        config.curved_end_quantile,
    )
    if edge is not None and edge < side * bound:
        return side * edge
    return bound


def face_refined_box(
    points: np.ndarray,
    normals: np.ndarray,
    center: np.ndarray,
    extents: np.ndarray,
    yaw: float,
    config: ObjectSettings,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """A yaw-oriented box whose vertical sides run through the object's faces where it has them.

    For each end of the length and width axes, a dense slab of points near the end
    (:func:`dense_slab_position`) is a face, and the side moves to the median of its points: frames
    fused with small registration errors and depth noise spread a face over several centimetres,
    and its extreme points lie outside the face. Ends with no face (chair legs, a lamp's shade)
    keep their side: a face lies within ``face_max_inset_m`` of the side, few points lie beyond it
    (``face_max_beyond_share`` of its own; a monitor's screen is not the back of its stand),
    ``face_min_aligned_share`` of its normals point along the axis (a ball has no face) and its
    points fill ``face_min_cover`` of the side (:func:`face_cover`). An end without a face (a round
    shade, a seat's edge) moves in to the surface that faces out of it (:func:`outward_surface_edge`,
    at most ``curved_end_band_m``): the points a silhouette leaves outside a curved object (a lamp's
    shade seen by one or two frames) do not face along the axis.

    Returns ``(centre, extents, yaw, boundary blur)``. The blur is how far an end without a face is
    from the bulk of the points: the distance from the side to the ``boundary_quantile`` of the
    points along the axis, summed over the axis' two ends (0 for a face), the larger of the two
    axes, measured from the trimmed sides (before an unfaced end moves to its outward surface). Depth
    noise and mixed pixels on a curved or thin object's silhouette spread its ends, which the blur
    measures, so it enters the object's size uncertainty.

    >>> rng = np.random.default_rng(0)
    >>> face = np.column_stack([rng.normal(1.0, 0.015, 2000), rng.uniform(-0.5, 0.5, 2000), rng.uniform(0, 1, 2000)])
    >>> top = np.column_stack([rng.uniform(-1.0, 1.0, 2000), rng.uniform(-0.5, 0.5, 2000), np.ones(2000)])
    >>> points = np.vstack([face, top])
    >>> normals = np.vstack([np.tile([1.0, 0, 0], (2000, 1)), np.tile([0, 0, 1.0], (2000, 1))])
    >>> box = np.array([0.02, 0, 0.5]), np.array([2.08, 1.0, 1.0])
    >>> centre, extents, yaw, blur = face_refined_box(points, normals, *box, 0.0, ObjectSettings())
    >>> round(float(centre[0] + extents[0] / 2), 2), yaw
    (1.0, 0.0)
    """
    cos_a, sin_a = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[cos_a, sin_a], [-sin_a, cos_a]])  # gravity xy -> box frame
    local = (points[:, :2] - center[:2]) @ rotation.T
    local_normals = np.nan_to_num(np.asarray(normals, dtype=np.float64)[:, :2], nan=0.0) @ rotation.T
    low, high = -extents[:2] / 2.0, extents[:2] / 2.0
    faced = np.zeros((2, 2), dtype=bool)  # axis, (low end, high end)
    for axis in range(2):
        band = min(config.face_band_m, 0.4 * float(extents[axis]))
        if band < 2 * config.face_slab_m:
            continue
        for side, bounds in ((-1, low), (+1, high)):
            face = _face_side(
                local, local_normals, points, center, extents, axis, side, band, bounds[axis], config
            )
            if face is not None:
                bounds[axis] = face
                faced[axis, (side + 1) // 2] = True
    blur = 0.0
    for axis in range(2):
        if high[axis] - low[axis] < (1.0 - config.face_max_shrink_share) * extents[axis]:
            low[axis], high[axis] = -extents[axis] / 2.0, extents[axis] / 2.0  # inner parts, not the faces
            faced[axis] = False
        inner = np.quantile(local[:, axis], [config.boundary_quantile, 1.0 - config.boundary_quantile])
        ends = (0.0 if faced[axis, 0] else inner[0] - low[axis]) + (
            0.0 if faced[axis, 1] else high[axis] - inner[1]
        )
        blur = max(blur, float(ends))
        for end, bounds in ((0, low), (1, high)):
            if not faced[axis, end]:
                side = 2 * end - 1  # -1: the low end, +1: the high end
                bounds[axis] = _unfaced_side(
                    local[:, axis], local_normals[:, axis], side, bounds[axis], config
                )
    new_extents = np.array([high[0] - low[0], high[1] - low[1], extents[2]])
    shift = rotation.T @ ((low + high) / 2.0)
    new_center = np.array([center[0] + shift[0], center[1] + shift[1], center[2]])
    if new_extents[1] > new_extents[0]:
        swapped = np.array([new_extents[1], new_extents[0], new_extents[2]])
        return new_center, swapped, float(np.mod(yaw + math.pi / 2, math.pi)), blur
    return new_center, new_extents, yaw, blur


def voxel_point_areas(normals: np.ndarray, voxel_size: float) -> np.ndarray:
    """Surface area per voxel-downsampled point: ``voxel**2 / |n|_1`` (``voxel**2`` without a normal).

    A plane with unit normal ``n`` crosses about ``|n_x| + |n_y| + |n_z|`` voxels per ``voxel**2``
    of its area, so a voxel's point stands for ``voxel**2 / |n|_1``.

    >>> voxel_point_areas(np.array([[0.0, 0.0, 1.0], [np.nan, np.nan, np.nan]]), 0.1).round(4).tolist()
    [0.01, 0.01]
    """
    l1 = np.sum(np.abs(np.nan_to_num(normals, nan=0.0)), axis=1)
    return np.where(l1 > 0.5, voxel_size**2 / np.maximum(l1, 1.0), voxel_size**2)


def settle_on_surface(
    points: np.ndarray,
    normals: np.ndarray,
    neighbors: int,
    iterations: int,
    neighbour_index: np.ndarray | None = None,
) -> np.ndarray:
    """Points moved along their normals onto the mean of their ``neighbors`` nearest points, ``iterations`` times
    (the neighbours are found once, among the points as given, unless ``neighbour_index`` gives them:
    ``(N, neighbors)`` positions in ``points``, see :func:`neighbours_among_kept`).

    Depth noise scatters a scanned surface's points across it (along each camera's rays), so the
    extremes of a noisy cloud lie outside the object; the mean of a point's neighbours along its
    normal is the surface with the noise averaged away. Points without a normal stay.

    >>> rng = np.random.default_rng(0)
    >>> flat = np.column_stack([rng.uniform(0, 1, (3000, 2)), rng.normal(0, 0.01, 3000)])
    >>> normals = np.tile([0.0, 0.0, 1.0], (3000, 1))
    >>> settled = settle_on_surface(flat, normals, 32, 3)
    >>> bool(np.abs(settled[:, 2]).max() < 0.3 * np.abs(flat[:, 2]).max()), bool(np.allclose(settled[:, :2], flat[:, :2]))
    (True, True)
    """
    settled = np.asarray(points, dtype=np.float64).copy()
    k = min(neighbors, len(settled))
    if k < 2 or iterations <= 0:
        return settled
    unit = np.nan_to_num(np.asarray(normals, dtype=np.float64), nan=0.0)
    unit = np.where((np.linalg.norm(unit, axis=1) > 0.5)[:, None], unit, 0.0)
    index = neighbour_index
    if index is None:
        _, index = cKDTree(settled).query(settled, k=k, workers=OBJECT_QUERY_WORKERS)
    index = np.asarray(index)[:, :k]
    count = len(settled)
    # The mean of each point's neighbours as one sparse product (k entries of 1/k per row).
    neighbour_mean = scipy.sparse.csr_matrix(
        (np.full(index.size, 1.0 / k), index.ravel(), np.arange(0, index.size + 1, k)), shape=(count, count)
    )
    for _ in range(iterations):
        offset = np.einsum("ij,ij->i", settled - neighbour_mean @ settled, unit)
        settled -= unit * offset[:, None]
    return settled


def trimmed_box_points(points: np.ndarray, yaw: float, share: float) -> np.ndarray:
    """Which points lie inside the ``share`` and ``1 - share`` quantiles along the yaw box's length and width axes
    and below the ``1 - share`` quantile of height (the bottom is not trimmed).

    >>> points = np.column_stack([np.linspace(0, 1, 101), np.zeros(101), np.linspace(0, 1, 101)])
    >>> kept = trimmed_box_points(points, 0.0, 0.05)
    >>> int(kept.sum()), bool(kept[0]), bool(kept[-1])
    (91, False, False)
    """
    cos_a, sin_a = math.cos(yaw), math.sin(yaw)
    local = points[:, :2] @ np.array([[cos_a, sin_a], [-sin_a, cos_a]]).T
    low, high = np.quantile(local, [share, 1.0 - share], axis=0)
    top = np.quantile(points[:, 2], 1.0 - share)
    return np.all((local >= low) & (local <= high), axis=1) & (points[:, 2] <= top)


def measure_object(
    object_id: int,
    label: str,
    points: np.ndarray,
    normals: np.ndarray,
    point_areas: np.ndarray,
    config: ObjectSettings = DEFAULT_OBJECT_SETTINGS,
    noisy: bool = False,
) -> ObjectGeometry:
    """Clean and measure one object's gravity-frame points; raise :class:`ObjectRejectedError` if too few remain.

    ``point_areas`` is the area each input point stands for (same length as ``points``). ``noisy``
    points (fused from depth frames) are settled onto their surface (:func:`settle_on_surface`) and
    measured without their extremes (``extent_trim_share``, :func:`trimmed_box_points`); the stored
    points stay as fused.
    """
    kept, neighbours = _clean_points(points, config)
    if len(kept) < config.min_object_points:
        raise ObjectRejectedError(
            f"too few points after cleaning: {len(kept)} of {len(points)} kept, need {config.min_object_points}"
        )
    cleaned, cleaned_normals = points[kept], np.asarray(normals)[kept]
    cleaned_areas = np.asarray(point_areas)[kept]
    spread = 0.0
    if noisy:
        tree = cKDTree(cleaned)
        spread = surface_spread(cleaned, config.surface_neighbors, tree=tree)
        settle_index = None
        if config.settle_neighbors >= 2 and config.settle_iterations > 0:
            settle_index = neighbours_among_kept(kept, neighbours, cleaned, config.settle_neighbors, tree)
        cleaned = settle_on_surface(
            cleaned, cleaned_normals, config.settle_neighbors, config.settle_iterations, settle_index
        )
        if config.extent_trim_share > 0:
            _, _, rough_yaw = yaw_oriented_box(cleaned, cleaned_normals, cleaned_areas)
            inner = trimmed_box_points(cleaned, rough_yaw, config.extent_trim_share)
            cleaned, cleaned_normals, cleaned_areas = (
                cleaned[inner],
                cleaned_normals[inner],
                cleaned_areas[inner],
            )
        if cleaned[:, 2].min() < 0.0 < cleaned[:, 2].max():
            # Nothing stands below the floor (z = 0): those points are the floor's depth noise under the object.
            cleaned[:, 2] = np.maximum(cleaned[:, 2], 0.0)
    aabb_min, aabb_max = cleaned.min(axis=0), cleaned.max(axis=0)
    obb_center, obb_extents, obb_yaw = yaw_oriented_box(cleaned, cleaned_normals, cleaned_areas)
    blur = 0.0
    if noisy:
        obb_center, obb_extents, obb_yaw, blur = face_refined_box(
            cleaned, cleaned_normals, obb_center, obb_extents, obb_yaw, config
        )
    stored = kept
    areas = np.asarray(point_areas, dtype=np.float64)[kept]
    if len(kept) > config.max_stored_points:
        rng = np.random.default_rng([config.seed, object_id])
        stored = kept[np.sort(rng.choice(len(kept), size=config.max_stored_points, replace=False))]
        areas = np.full(len(stored), float(areas.sum()) / len(stored))
    return ObjectGeometry(
        object_id=object_id,
        label=label,
        point_count=len(kept),
        centroid=obb_center.copy(),
        aabb_min=aabb_min,
        aabb_max=aabb_max,
        obb_center=obb_center,
        obb_extents=obb_extents,
        obb_yaw=obb_yaw,
        points=points[stored],
        normals=normals[stored],
        point_areas=areas,
        point_spread_m=spread,
        boundary_blur_m=blur,
    )


def ray_footprint_low_z(
    ray: np.ndarray, center_xy: np.ndarray, extents_xy: np.ndarray, yaw: float
) -> float | None:
    """The lowest height of a ray (``[origin, direction]``, gravity frame) inside a box's footprint.

    The footprint is the rectangle of ``extents_xy`` (length along ``yaw``, width across it) about
    ``center_xy``. None when the ray does not cross it ahead of its origin, or runs vertically
    through it (no lowest height).

    >>> ray = np.array([[-2.0, 0.0, 2.0], [1.0, 0.0, -0.5]])  # down 0.5 m per metre ahead
    >>> round(ray_footprint_low_z(ray, np.zeros(2), np.array([0.2, 0.2]), 0.0), 6)  # crosses x = -0.1 .. 0.1
    0.95
    >>> ray_footprint_low_z(ray, np.array([0.0, 1.0]), np.array([0.2, 0.2]), 0.0) is None
    True
    """
    origin, direction = np.asarray(ray[0], dtype=np.float64), np.asarray(ray[1], dtype=np.float64)
    cos, sin = math.cos(yaw), math.sin(yaw)
    to_box = np.array([[cos, sin], [-sin, cos]])
    start = to_box @ (origin[:2] - center_xy)
    step = to_box @ direction[:2]
    enter, leave = 0.0, math.inf
    for axis in range(2):
        half = float(extents_xy[axis]) / 2.0
        if abs(step[axis]) < 1e-12:
            if abs(start[axis]) > half:
                return None
            continue
        first, second = (-half - start[axis]) / step[axis], (half - start[axis]) / step[axis]
        enter, leave = max(enter, min(first, second)), min(leave, max(first, second))
    if enter > leave or not math.isfinite(leave):
        return None
    return float(origin[2] + min(enter * direction[2], leave * direction[2]))


def raise_top_to_masks(obj: ObjectGeometry, top_rays: list[np.ndarray], config: ObjectSettings) -> float:
    """Raise an instance-mask object's box top to where its masks show it reaches; returns the raise (metres).

    Depth too thin to be fused (a bottle's neck, 1-2 depth pixels wide) leaves the fused points short
    of the object's top, while the colour-resolution masks still cover it. Each frame's mask top
    (:func:`assets.dge.fusion.mask_top_rays`, gravity frame) is a point of the object somewhere on
    the ray inside the box's footprint, so the object reaches at least the ray's lowest height
    there (:func:`ray_footprint_low_z`). With at least ``mask_top_min_frames`` such heights, their
    ``mask_top_quantile`` (a low one: a footprint measured a little small, or a pose a little off,
    puts a ray's lowest height above the object), when it is ``mask_top_min_raise_m`` or more above
    the box, becomes the top: the height, the box's centre and the centroid follow.
    """
    lows = [
        low
        for ray in top_rays
        if (low := ray_footprint_low_z(ray, obj.obb_center[:2], obj.obb_extents[:2], obj.obb_yaw)) is not None
    ]
    if len(lows) < config.mask_top_min_frames:
        return 0.0
    top = float(obj.obb_center[2] + obj.obb_extents[2] / 2.0)
    raise_m = float(np.quantile(lows, config.mask_top_quantile)) - top
    if raise_m < config.mask_top_min_raise_m:
        return 0.0
    obj.obb_extents = obj.obb_extents + np.array([0.0, 0.0, raise_m])
    obj.obb_center = obj.obb_center + np.array([0.0, 0.0, raise_m / 2.0])
    obj.centroid = obj.obb_center.copy()
    obj.aabb_max = np.maximum(obj.aabb_max, np.array([-math.inf, -math.inf, top + raise_m]))
    return raise_m


# --------------------------------------------------------------------------------------------------
# Mesh segmentation (ScanNet layout)
# --------------------------------------------------------------------------------------------------


@dataclass
class MeshObjectSamples:
    """Points sampled on one object's triangles (world frame)."""

    object_id: int
    label: str
    points: np.ndarray
    normals: np.ndarray
    area: float


class MeshSegmentationError(ValueError):
    """The mesh, segment or aggregation file cannot be read or does not fit together."""


def read_mesh_segmentation(
    mesh_path: str | Path, segs_path: str | Path, aggregation_path: str | Path
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, str]]:
    """Read a ScanNet mesh with its segmentation: ``(vertices, triangles, vertex object ids, labels)``.

    Vertex object ids are the aggregation's 0-based ``objectId`` (-1 for unannotated vertices).
    """
    import open3d as o3d

    mesh = o3d.io.read_triangle_mesh(Path(mesh_path))
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    triangles = np.asarray(mesh.triangles, dtype=np.int64)
    if len(vertices) == 0 or len(triangles) == 0:
        raise MeshSegmentationError(f"mesh {mesh_path} has no triangles")
    try:
        seg_indices = np.asarray(json.loads(Path(segs_path).read_text())["segIndices"], dtype=np.int64)
        groups = json.loads(Path(aggregation_path).read_text())["segGroups"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as error:
        raise MeshSegmentationError(
            f"cannot read segmentation {segs_path} / {aggregation_path}: {error}"
        ) from error
    if len(seg_indices) != len(vertices):
        raise MeshSegmentationError(
            f"{segs_path} has {len(seg_indices)} segment indices for {len(vertices)} mesh vertices"
        )
    segment_object: dict[int, int] = {}
    labels: dict[int, str] = {}
    for group in groups:
        object_id = int(group.get("objectId", group.get("id")))
        labels[object_id] = str(group.get("label", ""))
        for segment in group.get("segments", []):
            segment_object[int(segment)] = object_id
    lookup_keys = np.array(sorted(segment_object), dtype=np.int64)
    lookup_values = np.array([segment_object[k] for k in lookup_keys], dtype=np.int64)
    vertex_objects = np.full(len(vertices), -1, dtype=np.int64)
    if len(lookup_keys):
        position = np.clip(np.searchsorted(lookup_keys, seg_indices), 0, len(lookup_keys) - 1)
        found = lookup_keys[position] == seg_indices
        vertex_objects[found] = lookup_values[position[found]]
    return vertices, triangles, vertex_objects, labels


def sample_triangles(
    vertices: np.ndarray,
    triangles: np.ndarray,
    spacing: float,
    rng: np.random.Generator,
    min_points: int = 1,
    max_points: int = 200_000,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Sample points uniformly by area on triangles: ``(points, triangle normals, total area)``.

    The number of points is ``area / spacing**2`` clipped to ``[min_points, max_points]``. Normals
    follow the triangles' winding (outward for counter-clockwise faces).

    >>> square = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0.0]])
    >>> pts, normals, area = sample_triangles(square, np.array([[0, 1, 2], [0, 2, 3]]), 0.1, np.random.default_rng(0))
    >>> len(pts), normals[0].tolist(), area
    (100, [0.0, 0.0, 1.0], 1.0)
    """
    corners = vertices[triangles]
    cross = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    double_area = np.linalg.norm(cross, axis=1)
    total = float(double_area.sum() / 2.0)
    usable = double_area > 1e-12
    if not usable.any():
        return np.zeros((0, 3)), np.zeros((0, 3)), 0.0
    count = int(min(max_points, max(round(total / spacing**2), min_points, 1)))
    probabilities = np.where(usable, double_area, 0.0) / double_area[usable].sum()
    chosen = rng.choice(len(triangles), size=count, p=probabilities)
    r1 = np.sqrt(rng.uniform(size=count))
    r2 = rng.uniform(size=count)
    a, b, c = corners[chosen, 0], corners[chosen, 1], corners[chosen, 2]
    points = (1 - r1)[:, None] * a + (r1 * (1 - r2))[:, None] * b + (r1 * r2)[:, None] * c
    normals = cross[chosen] / double_area[chosen][:, None]
    return points, normals, total


def mesh_object_samples(
    mesh_path: str | Path,
    segs_path: str | Path,
    aggregation_path: str | Path,
    config: ObjectSettings = DEFAULT_OBJECT_SETTINGS,
) -> list[MeshObjectSamples]:
    """Sample every annotated object of a segmented mesh (world frame), in object id order.

    Triangles belong to an object when all three vertices do (an object is the union of its
    aggregation segments). Normals follow the triangles' winding as stored; nothing is decided from
    their sign (a flat object such as the floor has no inside to point away from), visibility comes
    from ray casting against the mesh (:mod:`assets.dge.visibility`).
    """
    vertices, triangles, vertex_objects, labels = read_mesh_segmentation(
        mesh_path, segs_path, aggregation_path
    )
    triangle_objects = vertex_objects[triangles]
    same = (triangle_objects[:, 0] == triangle_objects[:, 1]) & (
        triangle_objects[:, 1] == triangle_objects[:, 2]
    )
    owner = np.where(same, triangle_objects[:, 0], -1)
    results = []
    for object_id in sorted(labels):
        own = triangles[owner == object_id]
        if len(own) == 0:
            results.append(
                MeshObjectSamples(object_id, labels[object_id], np.zeros((0, 3)), np.zeros((0, 3)), 0.0)
            )
            continue
        rng = np.random.default_rng([config.seed, object_id])
        points, normals, area = sample_triangles(
            vertices, own, config.mesh_sample_spacing_m, rng, config.mesh_min_samples, config.mesh_max_samples
        )
        results.append(MeshObjectSamples(object_id, labels[object_id], points, normals, area))
    return results


# --------------------------------------------------------------------------------------------------
# Annotated oriented boxes (ARKitScenes)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnnotatedBox:
    """An annotated oriented box in the world frame: centre, unit axes (rows) and full lengths along them."""

    object_id: int
    label: str
    centroid: np.ndarray
    axes: np.ndarray
    lengths: np.ndarray

    @classmethod
    def from_struct(cls, object_id: int, label: str, box: dict) -> AnnotatedBox:
        """From ``rgbd_scenes.objects[*].box`` (``{centroid, axes, lengths}``)."""
        return cls(
            object_id,
            label,
            np.asarray(box["centroid"], dtype=np.float64),
            np.asarray(box["axes"], dtype=np.float64).reshape(3, 3),
            np.asarray(box["lengths"], dtype=np.float64),
        )

    def local(self, points: np.ndarray) -> np.ndarray:
        """Points in the box's frame: coordinates along its axes from its centre."""
        return (np.asarray(points, dtype=np.float64) - self.centroid) @ self.axes.T

    def bounds(self, margin: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The world-axis-aligned bounds of the box grown by ``margin`` on every side."""
        half = np.abs(self.axes.T) @ (self.lengths / 2.0 + margin)
        return self.centroid - half, self.centroid + half


def _connected_to_outside(
    sheet: np.ndarray, outside: np.ndarray, plane_coordinates: np.ndarray, cell: float
) -> np.ndarray:
    """Which ``sheet`` points (indices into ``plane_coordinates``) share an 8-connected cluster of ``cell``-sized
    squares of the plane with an ``outside`` point."""
    members = np.concatenate([sheet, outside])
    squares = np.floor(plane_coordinates[members] / cell).astype(np.int64)
    squares -= squares.min(axis=0)
    grid = np.zeros(squares.max(axis=0) + 1, dtype=bool)
    grid[squares[:, 0], squares[:, 1]] = True
    labels, _ = ndimage.label(grid, structure=np.ones((3, 3), dtype=bool))
    point_labels = labels[squares[:, 0], squares[:, 1]]
    reached = np.unique(point_labels[len(sheet) :])
    return sheet[np.isin(point_labels[: len(sheet)], reached)]


def points_in_box(
    points: np.ndarray, normals: np.ndarray, box: AnnotatedBox, up: np.ndarray, config: ObjectSettings
) -> np.ndarray:
    """Which of ``points`` are the annotated object's: inside the box, and not on a surface that only passes
    through it.

    An annotated box is a little loose, so it also holds slices of what surrounds the object: the floor or a
    table top under it, a wall beside it. Such a surface is parallel to a box face, lies within
    ``box_face_band_m`` inside it, and continues outside the box's sides (within ``box_shell_m``): its points
    inside, and the points outside on the same plane (within ``box_plane_tolerance_m``), form one connected sheet
    (squares of ``box_surface_cell_m``). Those points are left out. The face under the box is the one facing down
    along ``up`` (the support), the side faces are tested against surfaces continuing sideways (a wall), so an
    object's own faces, which end at its box, stay; so does a surface of the object at another height than its
    support, even where something outside lies at that height.

    >>> box = AnnotatedBox(0, "box", np.array([0.0, 0.0, 0.5]), np.eye(3), np.array([1.0, 1.0, 1.04]))
    >>> grid = np.stack(np.meshgrid(np.linspace(-1, 1, 81), np.linspace(-1, 1, 81)), -1).reshape(-1, 2)
    >>> floor = np.column_stack([grid, np.zeros(len(grid))])  # the floor runs under and around the box
    >>> top = np.column_stack([grid[(np.abs(grid) <= 0.4).all(1)], np.full(((np.abs(grid) <= 0.4).all(1).sum()), 1.0)])
    >>> points = np.vstack([floor, top]); normals = np.tile([0.0, 0.0, 1.0], (len(points), 1))
    >>> inside = points_in_box(points, normals, box, np.array([0.0, 0.0, 1.0]), ObjectSettings())
    >>> int(inside[: len(floor)].sum()), int(inside[len(floor):].sum()) == len(top)
    (0, True)
    """
    local = box.local(points)
    half = box.lengths / 2.0
    inside = np.all(np.abs(local) <= half, axis=1)
    if not inside.any():
        return inside
    shell = np.all(np.abs(local) <= half + config.box_shell_m, axis=1) & ~inside
    unit = np.nan_to_num(np.asarray(normals, dtype=np.float64), nan=0.0)
    along = unit @ box.axes.T  # each normal's cosine with each box axis
    up = np.asarray(up, dtype=np.float64) / np.linalg.norm(up)
    vertical = int(np.argmax(np.abs(box.axes @ up)))
    sign_up = 1.0 if box.axes[vertical] @ up > 0 else -1.0
    tolerance = config.box_plane_tolerance_m
    passing = np.zeros(len(points), dtype=bool)
    for axis in range(3):
        lateral = [other for other in range(3) if other != axis and (axis == vertical or other != vertical)]
        in_plane = [other for other in range(3) if other != axis]
        parallel = np.abs(along[:, axis]) >= config.box_parallel_min_cos
        outside = np.flatnonzero(shell & parallel & np.any(np.abs(local[:, lateral]) > half[lateral], axis=1))
        if not len(outside):
            continue
        outside_bins = np.floor(local[outside, axis] / tolerance).astype(np.int64)
        faces = (-sign_up,) if axis == vertical else (-1.0, 1.0)
        for face in faces:  # the bottom face (the support), or both side faces (walls)
            band = np.flatnonzero(
                inside & parallel & (half[axis] - face * local[:, axis] <= config.box_face_band_m)
            )
            if not len(band):
                continue
            band_bins = np.floor(local[band, axis] / tolerance).astype(np.int64)
            for plane in np.unique(band_bins):
                near_outside = outside[np.abs(outside_bins - plane) <= 1]
                if not len(near_outside):
                    continue
                sheet = band[np.abs(band_bins - plane) <= 1]
                reached = _connected_to_outside(
                    sheet, near_outside, local[:, in_plane], config.box_surface_cell_m
                )
                passing[reached[np.floor(local[reached, axis] / tolerance).astype(np.int64) == plane]] = True
    return inside & ~passing


def read_mesh(mesh_path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """A mesh's ``(vertices, triangles)``; raises :class:`MeshSegmentationError` when it has no triangle."""
    import open3d as o3d

    mesh = o3d.io.read_triangle_mesh(Path(mesh_path))
    vertices = np.asarray(mesh.vertices, dtype=np.float64)
    triangles = np.asarray(mesh.triangles, dtype=np.int64)
    if len(vertices) == 0 or len(triangles) == 0:
        raise MeshSegmentationError(f"mesh {mesh_path} has no triangles")
    return vertices, triangles


def mesh_samples_near_box(
    vertices: np.ndarray, triangles: np.ndarray, box: AnnotatedBox, config: ObjectSettings
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points sampled by area on the triangles near a box (whose bounds meet the box grown by ``box_shell_m``),
    as ``(points, normals, the area each point stands for)``."""
    low, high = box.bounds(config.box_shell_m)
    corners = vertices[triangles]
    near = np.all(corners.max(axis=1) >= low, axis=1) & np.all(corners.min(axis=1) <= high, axis=1)
    if not near.any():
        return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0)
    rng = np.random.default_rng([config.seed, box.object_id])
    points, normals, area = sample_triangles(
        vertices,
        triangles[near],
        config.mesh_sample_spacing_m,
        rng,
        config.mesh_min_samples,
        4 * config.mesh_max_samples,
    )
    return points, normals, np.full(len(points), area / max(len(points), 1))
