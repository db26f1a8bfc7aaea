"""The gravity direction of a scan, the floor plane (seeded RANSAC) and the gravity-aligned frame built on them.

Gravity comes from the scan where it has it (:func:`scan_gravity`): ScanNet's ``axisAlignment`` (the meta
file's transform that turns the scan z-up), else the cameras' common up axis (the axis every camera's
horizontal ``x`` axis is perpendicular to, when the cameras turned enough to pin it down, see
:func:`common_up_from_poses`). Without either, the mean of the cameras' "up" axes (``-y`` of an OpenCV
camera) is only a prior: a camera looking down tilts it by its pitch. Among the points whose normals agree
with the gravity direction or the prior (floors, table tops, seats), planes are found one after another by a
seeded RANSAC
(:func:`ransac_plane_inliers`: the same cloud and seed give the same plane in any process; open3d's
multi-threaded ``segment_plane`` does not); the floor
is the lowest of the well-supported planes within ``max_tilt_deg`` of the prior. The plane is
refined by least squares on its inliers, then settled in the middle of the floor's points
(:func:`settle_plane`): on a noisy scan the floor is a slab thicker than the RANSAC distance,
RANSAC splits it, and the lowest piece lies a centimetre or two below the floor.

When no plane qualifies, a scan with a gravity direction puts the floor at the lowest points along it
(``floor_source`` names where "up" came from: ``world_up``, ``axis_alignment`` or ``camera_poses``); a scan
with none
has only the cameras' guess (``fallback``), and every question that depends on "up" is withheld.

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
    gravity_min_turn_deg: ClassVar[float] = 30.0
    """The cameras' common up axis pins gravity down only when their headings spread over at least this much (two
    cameras this far apart, or the equivalent spread of many; see common_up_from_poses)."""
    gravity_max_roll_deg: ClassVar[float] = 3.0
    """... and when their horizontal axes lie within this root-mean-square angle of one plane (cameras held without
    roll)."""
    gravity_max_prior_angle_deg: ClassVar[float] = 60.0
    """... and when the axis is within this angle of the cameras' mean up (upright cameras)."""


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


GRAVITY_FROM_WORLD_UP = "world_up"  # the data set's own up axis (rgbd_scenes.world_up)
GRAVITY_FROM_AXIS_ALIGNMENT = "axis_alignment"
GRAVITY_FROM_CAMERA_POSES = "camera_poses"


def up_from_axis_alignment(alignment: np.ndarray) -> np.ndarray:
    """The world frame's "up" of a scan whose ``axisAlignment`` turns it z-up: the aligned ``z`` axis in world terms.

    The alignment maps world points to aligned ones (``aligned = A @ world``), so aligned ``z`` is the third row
    of its rotation.

    >>> turned = np.array([[0.0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 0], [0, 0, 0, 1]])  # world x is up
    >>> up_from_axis_alignment(turned).tolist()
    [1.0, 0.0, 0.0]
    """
    up = np.asarray(alignment, dtype=np.float64).reshape(4, 4)[2, :3]
    return up / np.linalg.norm(up)


def common_up_from_poses(
    poses: list[np.ndarray], config: FloorSettings = DEFAULT_FLOOR_SETTINGS
) -> np.ndarray | None:
    """The axis all cameras' horizontal ``x`` axes are perpendicular to (gravity, for cameras held without roll).

    Each upright camera's ``x`` axis (image right) lies in the horizontal plane, whatever its pitch, so the
    plane through the ``x`` axes of cameras that turned is the horizon and its normal is up (the smallest
    singular vector of the stacked axes). None when the cameras did not turn by ``gravity_min_turn_deg`` (the
    second singular value of n axes spread over a turn of t degrees is about sqrt(n) sin(t / 2)), when the
    axes are further than ``gravity_max_roll_deg`` from one plane, or when the axis is more than
    ``gravity_max_prior_angle_deg`` from the cameras' mean up.

    >>> def camera(yaw_deg, pitch_deg):
    ...     yaw, pitch = np.radians(yaw_deg), np.radians(pitch_deg)
    ...     forward = np.array([np.cos(yaw) * np.cos(pitch), np.sin(yaw) * np.cos(pitch), np.sin(pitch)])
    ...     right = np.array([np.sin(yaw), -np.cos(yaw), 0.0])
    ...     pose = np.eye(4); pose[:3, :3] = np.column_stack([right, np.cross(forward, right), forward])
    ...     return pose
    >>> up = common_up_from_poses([camera(0, -30), camera(50, -20), camera(120, -35)])
    >>> np.round(up, 6).tolist()
    [0.0, 0.0, 1.0]
    >>> common_up_from_poses([camera(0, -30)]) is None, common_up_from_poses([camera(0, -30), camera(10, -20)]) is None
    (True, True)
    """
    if len(poses) < 2:
        return None
    axes = np.stack([np.asarray(pose, dtype=np.float64)[:3, 0] for pose in poses])
    _, singular, vt = np.linalg.svd(axes, full_matrices=False)
    count = math.sqrt(len(poses))
    if singular[1] / count < math.sin(math.radians(config.gravity_min_turn_deg) / 2):
        return None
    if singular[2] / count > math.sin(math.radians(config.gravity_max_roll_deg)):
        return None
    up = vt[2] / np.linalg.norm(vt[2])
    prior = up_prior_from_poses(poses)
    if up @ prior < 0:
        up = -up
    if up @ prior < math.cos(math.radians(config.gravity_max_prior_angle_deg)):
        return None
    return up


def scan_gravity(
    axis_alignment: np.ndarray | None, poses: list[np.ndarray], config: FloorSettings = DEFAULT_FLOOR_SETTINGS
) -> tuple[np.ndarray | None, str]:
    """The scan's own "up" and where it came from (``axis_alignment``, ``camera_poses``), or ``(None, "")``."""
    if axis_alignment is not None:
        return up_from_axis_alignment(axis_alignment), GRAVITY_FROM_AXIS_ALIGNMENT
    up = common_up_from_poses(poses, config)
    if up is not None:
        return up, GRAVITY_FROM_CAMERA_POSES
    return None, ""


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
            f"no plane within {config.floor_max_tilt_deg} degrees of the up direction has "
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
