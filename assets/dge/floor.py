"""The floor plane (seeded RANSAC) and the gravity-aligned frame built on it.

The cameras of a scan are held roughly upright, so the mean of their "up" axes (``-y`` of an
OpenCV camera) is a prior for gravity. Among the points whose normals agree with that prior
(floors, table tops, seats), planes are found one after another by a seeded RANSAC
(:func:`ransac_plane_inliers`: the same cloud and seed give the same plane in any process; open3d's
multi-threaded ``segment_plane`` does not); the floor
is the lowest of the well-supported planes within ``max_tilt_deg`` of the prior. The plane is
refined by least squares on its inliers, then settled in the middle of the floor's points
(:func:`settle_plane`): on a noisy scan the floor is a slab thicker than the RANSAC distance,
RANSAC splits it, and the lowest piece lies a centimetre or two below the floor.

The gravity-aligned frame has ``z`` along the floor normal (up), the floor at ``z = 0`` and ``x``
along the world ``x`` axis projected onto the floor, so for a scan whose world frame already has
``z`` up and the floor at 0 (ScanNet, the sample world) the transform is the identity.

>>> import numpy as np
>>> plane = FloorPlane(normal=np.array([0.0, 0.0, 1.0]), offset=0.0, inlier_count=100, inlier_rmse=0.0)
>>> gravity_transform(plane).round(6).tolist() == np.eye(4).tolist()
True
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pydantic
from pydantic import ConfigDict, Field

logger = logging.getLogger(__name__)


class FloorSettings(pydantic.BaseModel):
    """How the floor is found (the constants' names start with ``floor_`` because scene settings hold them beside
    others).

    ``seed`` is run configuration; the ``ClassVar`` attributes are the method's constants (RANSAC distance and
    iterations, tilt, support, settling window): not run configuration, read the same way; a test that needs
    other values passes an instance of a subclass that overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int = Field(
        default=0, description="Random seed of the RANSAC (the same seed gives the same floor)."
    )

    # Constants of the method (not run configuration; a test may override them in a subclass).
    floor_distance_threshold_m: ClassVar[float] = 0.02
    """RANSAC inlier distance of the floor plane."""
    floor_ransac_iterations: ClassVar[int] = 500
    """RANSAC iterations per plane."""
    floor_max_tilt_deg: ClassVar[float] = 30.0
    """Largest angle between a floor candidate's normal and the cameras' up prior."""
    floor_max_planes: ClassVar[int] = 5
    """Planes extracted before choosing the floor."""
    floor_min_support_fraction: ClassVar[float] = 0.05
    """A plane needs at least this share of the upward-facing points to be a floor candidate."""
    floor_settle_window_m: ClassVar[float] = 0.06
    """The floor plane is settled in the middle of the upward-facing points within this distance of it (see
    settle_plane)."""


DEFAULT_FLOOR_SETTINGS = FloorSettings()


class FloorNotFoundError(ValueError):
    """No plane in the cloud qualifies as the floor."""


@dataclass(frozen=True)
class FloorPlane:
    """A plane ``normal . x + offset = 0`` in world coordinates, ``normal`` a unit vector pointing up."""

    normal: np.ndarray
    offset: float
    inlier_count: int
    inlier_rmse: float

    def height(self, points: np.ndarray) -> np.ndarray:
        """Signed height of world points above the plane."""
        return points @ self.normal + self.offset

    def tilt_deg(self, up: np.ndarray | None = None) -> float:
        """Angle between the plane normal and ``up`` (default: world ``+z``) in degrees.

        >>> FloorPlane(np.array([0.0, 0.0, 1.0]), 0.0, 1, 0.0).tilt_deg()
        0.0
        """
        up = np.array([0.0, 0.0, 1.0]) if up is None else np.asarray(up, dtype=np.float64)
        cosine = float(np.clip(np.dot(self.normal, up) / np.linalg.norm(up), -1.0, 1.0))
        return math.degrees(math.acos(cosine))


def up_prior_from_poses(poses: list[np.ndarray]) -> np.ndarray:
    """Mean "up" direction of upright OpenCV cameras (their ``-y`` axes) in world coordinates.

    >>> up_prior_from_poses([np.diag([1.0, -1.0, -1.0, 1.0])]).tolist()
    [0.0, 1.0, 0.0]
    """
    if not poses:
        return np.array([0.0, 0.0, 1.0])
    ups = np.stack([-pose[:3, 1] for pose in poses])
    mean = ups.mean(axis=0)
    norm = np.linalg.norm(mean)
    return mean / norm if norm > 1e-9 else np.array([0.0, 0.0, 1.0])


def refine_plane(points: np.ndarray) -> tuple[np.ndarray, float]:
    """Least-squares plane through points: ``(unit normal, offset)``.

    >>> pts = np.array([[0, 0, 1.0], [1, 0, 1.0], [0, 1, 1.0], [1, 1, 1.0]])
    >>> normal, offset = refine_plane(pts)
    >>> [abs(round(float(v), 6)) for v in normal], round(abs(offset), 6)
    ([0.0, 0.0, 1.0], 1.0)
    """
    centre = points.mean(axis=0)
    _, _, vt = np.linalg.svd(points - centre, full_matrices=False)
    normal = vt[-1]
    normal = normal / np.linalg.norm(normal)
    return normal, float(-normal @ centre)


def settle_plane(
    points: np.ndarray, normal: np.ndarray, offset: float, window_m: float, iterations: int = 5
) -> tuple[np.ndarray, float, np.ndarray]:
    """Move a plane to the middle of the points within ``window_m`` of it: ``(normal, offset, inlier mask)``.

    Each round fits the points within the window by least squares (keeping the normal's side) and
    sets the offset so that their median residual is 0.

    >>> rng = np.random.default_rng(0)
    >>> slab = np.column_stack([rng.uniform(0, 4, (4000, 2)), rng.normal(0.0, 0.02, 4000)])
    >>> normal, offset, _ = settle_plane(slab, np.array([0.0, 0.0, 1.0]), 0.03, 0.06)
    >>> bool(abs(offset) < 0.003), bool(normal[2] > 0.999)
    (True, True)
    """
    inside = np.abs(points @ normal + offset) <= window_m
    for _ in range(iterations):
        if inside.sum() < 3:
            break
        new_normal, _ = refine_plane(points[inside])
        if new_normal @ normal < 0:
            new_normal = -new_normal
        new_offset = -float(np.median(points[inside] @ new_normal))
        moved = abs(new_offset - offset) + float(np.linalg.norm(new_normal - normal))
        normal, offset = new_normal, new_offset
        inside = np.abs(points @ normal + offset) <= window_m
        if moved < 1e-5:
            break
    return normal, offset, inside


RANSAC_SCORING_POINTS = 20_000
"""Hypotheses are scored on a seeded subsample of at most this many points (the winner's inliers are
then taken from every point)."""


def ransac_plane_inliers(
    points: np.ndarray, distance_threshold: float, iterations: int, rng: np.random.Generator
) -> np.ndarray:
    """Indices of the points within ``distance_threshold`` of the best-supported plane through 3 of them.

    Deterministic for a given ``rng`` state. Degenerate (collinear) samples are skipped; ties go to
    the first hypothesis drawn.

    >>> rng = np.random.default_rng(0)
    >>> plane = np.c_[rng.uniform(-1, 1, (300, 2)), np.zeros(300)]
    >>> noise = rng.uniform(-1, 1, (50, 3))
    >>> inliers = ransac_plane_inliers(np.vstack([plane, noise]), 0.01, 100, np.random.default_rng(0))
    >>> bool(set(range(300)) <= set(inliers.tolist())), len(inliers) < 320
    (True, True)
    """
    if len(points) < 3:
        return np.arange(len(points))
    scoring = points
    if len(points) > RANSAC_SCORING_POINTS:
        scoring = points[rng.choice(len(points), size=RANSAC_SCORING_POINTS, replace=False)]
    samples = points[rng.integers(0, len(points), size=(iterations, 3))]
    normals = np.cross(samples[:, 1] - samples[:, 0], samples[:, 2] - samples[:, 0])
    lengths = np.linalg.norm(normals, axis=1)
    valid = lengths > 1e-12
    normals = normals[valid] / lengths[valid, None]
    offsets = -np.einsum("ij,ij->i", normals, samples[valid, 0])
    if not len(normals):
        return np.arange(0)
    # One hypothesis at a time, element-wise on the scoring points' coordinates (a block that stays in cache, and
    # no BLAS threads, which cost more CPU than they save on a product with 3 columns).
    x, y, z = (np.ascontiguousarray(scoring[:, axis], dtype=np.float64) for axis in range(3))
    distance = np.empty(len(scoring))
    term = np.empty(len(scoring))
    support = np.empty(len(normals), dtype=np.int64)
    for index, (normal, offset) in enumerate(zip(normals, offsets, strict=True)):
        np.multiply(x, normal[0], out=distance)
        distance += np.multiply(y, normal[1], out=term)
        distance += np.multiply(z, normal[2], out=term)
        distance += offset
        support[index] = np.count_nonzero(np.abs(distance, out=distance) <= distance_threshold)
    best = int(np.argmax(support))
    return np.flatnonzero(np.abs(points @ normals[best] + offsets[best]) <= distance_threshold)


def fit_floor_plane(
    points: np.ndarray,
    normals: np.ndarray | None,
    up_prior: np.ndarray,
    config: FloorSettings = DEFAULT_FLOOR_SETTINGS,
) -> FloorPlane:
    """Find the floor plane of a world-frame cloud (see the module docstring).

    Raises :class:`FloorNotFoundError` when no candidate plane qualifies.
    """
    up_prior = up_prior / np.linalg.norm(up_prior)
    cos_tilt = math.cos(math.radians(config.floor_max_tilt_deg))
    if normals is not None and len(normals) == len(points):
        with np.errstate(invalid="ignore"):
            upward = np.nan_to_num(normals @ up_prior, nan=0.0) > cos_tilt
        candidates = points[upward]
    else:
        candidates = points
    if len(candidates) < 3:
        raise FloorNotFoundError(f"no upward-facing surface among {len(points)} points")
    rng = np.random.default_rng(config.seed)
    remaining = np.asarray(candidates, dtype=np.float64)
    min_support = max(3, int(config.floor_min_support_fraction * len(candidates)))
    planes: list[tuple[float, FloorPlane]] = []
    for _ in range(config.floor_max_planes):
        if len(remaining) < min_support:
            break
        inliers = ransac_plane_inliers(
            remaining, config.floor_distance_threshold_m, config.floor_ransac_iterations, rng
        )
        if len(inliers) < min_support:
            break
        inlier_points = remaining[inliers]
        normal, offset = refine_plane(inlier_points)
        if normal @ up_prior < 0:
            normal, offset = -normal, -offset
        residual = inlier_points @ normal + offset
        keep = np.abs(residual) <= config.floor_distance_threshold_m
        if keep.sum() >= 3:
            normal, offset = refine_plane(inlier_points[keep])
            if normal @ up_prior < 0:
                normal, offset = -normal, -offset
            residual = inlier_points[keep] @ normal + offset
        plane = FloorPlane(
            normal, offset, int(keep.sum()), float(np.sqrt(np.mean(residual**2))) if keep.any() else 0.0
        )
        remaining = np.delete(remaining, inliers, axis=0)
        if normal @ up_prior < cos_tilt:
            continue
        # The plane's height along the prior: the floor is the lowest candidate.
        planes.append((float(-offset), plane))
    if not planes:
        raise FloorNotFoundError(
            f"no plane within {config.floor_max_tilt_deg} degrees of the cameras' up direction has "
            f">= {min_support} supporting points"
        )
    planes.sort(key=lambda item: item[0])
    floor = planes[0][1]
    normal, offset, inside = settle_plane(
        np.asarray(candidates, dtype=np.float64),
        floor.normal,
        floor.offset,
        config.floor_settle_window_m,
    )
    if inside.sum() >= 3:
        residual = np.asarray(candidates)[inside] @ normal + offset
        floor = FloorPlane(normal, offset, int(inside.sum()), float(np.sqrt(np.mean(residual**2))))
    logger.debug(
        "floor plane normal %s offset %.3f (%d inliers)", floor.normal, floor.offset, floor.inlier_count
    )
    return floor


def gravity_transform(plane: FloorPlane) -> np.ndarray:
    """The 4x4 world-to-gravity transform: ``z`` along the floor normal, floor at ``z = 0``.

    ``x`` is the world ``x`` axis projected onto the floor (the world ``y`` axis when ``x`` is
    nearly vertical); ``y = z x x``.
    """
    z_axis = plane.normal / np.linalg.norm(plane.normal)
    reference = np.array([1.0, 0.0, 0.0])
    if abs(reference @ z_axis) > 0.9:
        reference = np.array([0.0, 1.0, 0.0])
    x_axis = reference - (reference @ z_axis) * z_axis
    x_axis /= np.linalg.norm(x_axis)
    y_axis = np.cross(z_axis, x_axis)
    transform = np.eye(4)
    transform[0, :3] = x_axis
    transform[1, :3] = y_axis
    transform[2, :3] = z_axis
    transform[2, 3] = plane.offset / np.linalg.norm(plane.normal)
    return transform
