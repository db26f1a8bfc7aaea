"""Per-object geometry: points from instance segmentation, cleaning, 3D boxes, centroid and size.

Object points come from one of two sources:

- the scan's mesh segmentation (ScanNet ``*_vh_clean_2.ply`` + ``*.segs.json`` +
  ``*.aggregation.json``): the triangles whose vertices all belong to one object's segments,
  sampled uniformly by area, so every surface of the object is covered;
- the frames' instance masks (:mod:`assets.dge.fusion`): the fused points labelled with the object,
  which cover only what the cameras saw.

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

import numpy as np
import open3d as o3d
import pydantic
from pydantic import ConfigDict, Field
from scipy.spatial import ConvexHull, QhullError, cKDTree

logger = logging.getLogger(__name__)


class ObjectSettings(pydantic.BaseModel):
    """How object points are sampled, cleaned and stored."""

    model_config = ConfigDict(frozen=True)

    mesh_sample_spacing_m: float = Field(
        default=0.015,
        description="Mean spacing of the points sampled on mesh triangles (one point per spacing**2 of area), "
        "within mesh_min_samples and mesh_max_samples per object.",
    )
    mesh_min_samples: int = Field(
        default=3000,
        description="Least points sampled per mesh object (finer spacing for small objects, so thin parts such "
        "as handles survive cleaning).",
    )
    mesh_max_samples: int = Field(
        default=12000,
        description="Most points sampled per mesh object (coarser spacing for large objects, which keeps "
        "cleaning fast).",
    )
    object_outlier_neighbors: int = Field(
        default=16, description="Neighbours of the statistical outlier test of object points."
    )
    object_outlier_std_ratio: float = Field(
        default=2.5,
        description="Object points farther than this many standard deviations above the mean neighbour "
        "distance are outliers.",
    )
    dbscan_eps_m: float = Field(default=0.08, description="DBSCAN radius of object cleaning.")
    dbscan_min_points: int = Field(
        default=2,
        description="DBSCAN core-point size (counted in voxels of half the radius, see clean_point_indices).",
    )
    min_cluster_share: float = Field(
        default=0.02,
        description="After outlier removal, DBSCAN clusters holding at least this share of an object's points "
        "are all kept (an object is the union of its parts: a lamp's pole and shade, a shelf's boards, "
        "segments that do not touch); smaller clusters are stray points.",
    )
    extent_trim_share: float = Field(
        default=0.003,
        description="Objects fused from noisy depth frames (instance masks) are measured without this share of "
        "their points at each end of each gravity-frame axis: the extremes of a noisy cloud are its noise "
        "(a cabinet 3 m away grows by 10 cm at both ends otherwise). Mesh samples are not trimmed.",
    )
    surface_neighbors: int = Field(
        default=24,
        description="Neighbours of the local plane fitted around each point of a noisy (instance-mask) object: "
        "the point is measured at its projection onto that plane, which removes the depth noise across the "
        "surface (a face seen head-on is spread along the view ray, which made boxes 5-10% too large), and the "
        "spread about the planes is the object's measured depth noise.",
    )
    min_object_points: int = Field(
        default=30, description="Objects with fewer points after cleaning are quarantined."
    )
    max_stored_points: int = Field(
        default=6000,
        description="Stored points per object (a seeded subsample beyond that; the per-point area grows to keep "
        "the total).",
    )
    object_seed: int = Field(default=0, description="Seed of mesh sampling and subsampling.")


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
    # Measurement confidence (assets.dge.confidence), filled in by the scene build; the defaults mean
    # "never observed".
    observed_views: int = 0
    extent_coverage: float = 0.0
    depth_noise_m: float = 0.0
    position_uncertainty_m: float = math.inf
    size_uncertainty_m: float = math.inf

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
    unique = np.unique(np.round(points_xy, 9), axis=0)
    if len(unique) < 3:
        return _degenerate_rectangle(unique)
    try:
        hull = unique[ConvexHull(unique).vertices]
    except QhullError:
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
    _, angle, low, high, rotation = best
    centre = rotation.T @ ((low + high) / 2.0)
    extents = high - low
    if extents[1] > extents[0]:
        extents = extents[::-1]
        angle += math.pi / 2
    return centre, extents, float(np.mod(angle, math.pi))


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
    everything = np.arange(len(points))
    if len(points) < max(config.object_outlier_neighbors, config.dbscan_min_points) + 1:
        return everything
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(np.asarray(points, dtype=np.float64)))
    _, kept = cloud.remove_statistical_outlier(
        nb_neighbors=config.object_outlier_neighbors, std_ratio=config.object_outlier_std_ratio
    )
    kept = np.asarray(kept, dtype=np.int64)
    if len(kept) < config.dbscan_min_points:
        return kept
    voxel = config.dbscan_eps_m / 2.0
    keys = np.floor(points[kept] / voxel).astype(np.int64)
    _, voxel_of_point = np.unique(keys, axis=0, return_inverse=True)
    voxel_of_point = voxel_of_point.reshape(-1)
    counts = np.bincount(voxel_of_point)
    centres = np.stack([np.bincount(voxel_of_point, weights=points[kept, axis]) for axis in range(3)], axis=1)
    centres /= counts[:, None]
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(centres))
    labels = np.asarray(cloud.cluster_dbscan(eps=config.dbscan_eps_m, min_points=config.dbscan_min_points))
    clustered = labels >= 0
    if not clustered.any():
        return kept[:0]
    sizes = np.bincount(labels[clustered], weights=counts[clustered])
    substantial = np.flatnonzero(sizes >= config.min_cluster_share * sizes.sum())
    return kept[np.isin(labels[voxel_of_point], substantial)]


def local_plane_projection(
    points: np.ndarray, neighbors: int, min_planarity: float = 4.0
) -> tuple[np.ndarray, float]:
    """Each point projected onto the plane fitted to its ``neighbors`` nearest points, and the spread about them.

    Only planar neighbourhoods move (their second covariance eigenvalue at least ``min_planarity``
    times the smallest): a small curved object (a bottle, a ball) narrower than a neighbourhood
    keeps its points. The spread is the median standard deviation of the planar neighbourhoods
    across their planes (corrected for the three fitted degrees of freedom): the noise of a surface
    scanned with noisy depth.

    >>> rng = np.random.default_rng(0)
    >>> flat = np.column_stack([rng.uniform(0, 1, (2000, 2)), rng.normal(0, 0.01, 2000)])
    >>> projected, spread = local_plane_projection(flat, 24)
    >>> bool(np.std(projected[:, 2]) < 0.004), round(spread, 2)
    (True, 0.01)
    """
    points = np.asarray(points, dtype=np.float64)
    k = min(neighbors, len(points))
    if k < 4:
        return points.copy(), 0.0
    _, index = cKDTree(points).query(points, k=k)
    neighbourhood = points[index]
    mean = neighbourhood.mean(axis=1)
    centred = neighbourhood - mean[:, None, :]
    covariance = np.einsum("nki,nkj->nij", centred, centred) / k
    eigenvalues, eigenvectors = np.linalg.eigh(covariance)
    normal = eigenvectors[:, :, 0]
    offset = np.einsum("ni,ni->n", points - mean, normal)
    planar = eigenvalues[:, 1] >= min_planarity * np.maximum(eigenvalues[:, 0], 1e-12)
    spread = math.sqrt(
        max(float(np.median(eigenvalues[planar, 0])) if planar.any() else 0.0, 0.0) * k / (k - 3)
    )
    return points - np.where(planar, offset, 0.0)[:, None] * normal, spread


def voxel_point_areas(normals: np.ndarray, voxel_size: float) -> np.ndarray:
    """Surface area per voxel-downsampled point: ``voxel**2 / |n|_1`` (``voxel**2`` without a normal).

    A plane with unit normal ``n`` crosses about ``|n_x| + |n_y| + |n_z|`` voxels per ``voxel**2``
    of its area, so a voxel's point stands for ``voxel**2 / |n|_1``.

    >>> voxel_point_areas(np.array([[0.0, 0.0, 1.0], [np.nan, np.nan, np.nan]]), 0.1).round(4).tolist()
    [0.01, 0.01]
    """
    l1 = np.sum(np.abs(np.nan_to_num(normals, nan=0.0)), axis=1)
    return np.where(l1 > 0.5, voxel_size**2 / np.maximum(l1, 1.0), voxel_size**2)


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
    points (fused from depth frames) are measured without their extremes (``extent_trim_share``).
    """
    kept = clean_point_indices(points, config)
    if len(kept) < config.min_object_points:
        raise ObjectRejectedError(
            f"too few points after cleaning: {len(kept)} of {len(points)} kept, need {config.min_object_points}"
        )
    measured = kept
    surface = points[kept]
    spread = 0.0
    if noisy:
        surface, spread = local_plane_projection(points[kept], config.surface_neighbors)
    if noisy and config.extent_trim_share > 0:
        low = np.quantile(surface, config.extent_trim_share, axis=0)
        high = np.quantile(surface, 1.0 - config.extent_trim_share, axis=0)
        inside = np.all((surface >= low) & (surface <= high), axis=1)
        measured, surface = kept[inside], surface[inside]
    cleaned = surface
    aabb_min, aabb_max = cleaned.min(axis=0), cleaned.max(axis=0)
    obb_center, obb_extents, obb_yaw = yaw_oriented_box(
        cleaned, normals[measured], np.asarray(point_areas)[measured]
    )
    stored = kept
    areas = np.asarray(point_areas, dtype=np.float64)[kept]
    if len(kept) > config.max_stored_points:
        rng = np.random.default_rng([config.object_seed, object_id])
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
    )


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
    mesh = o3d.io.read_triangle_mesh(str(mesh_path))
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
        rng = np.random.default_rng([config.object_seed, object_id])
        points, normals, area = sample_triangles(
            vertices, own, config.mesh_sample_spacing_m, rng, config.mesh_min_samples, config.mesh_max_samples
        )
        results.append(MeshObjectSamples(object_id, labels[object_id], points, normals, area))
    return results
