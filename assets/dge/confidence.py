"""How well each object was measured: observed views, coverage of its box, depth noise and uncertainties.

The scene's cameras are checked against a coarse depth buffer of the scene cloud (gravity frame):

- ``observed_views``: the frames in which at least ``min_visible_points`` (and ``min_visible_share``)
  of the object's points project into the image unoccluded (no nearer surface in the buffer);
- ``extent_coverage``: the share of the box's five exposed sides (four vertical sides in the box's
  yaw frame and the top; the bottom rests on the floor) that some frame saw: the side faces that
  camera (the camera is on its outer side) and most of a 3 x 3 grid of points on it project into
  the image unoccluded. One view sees at most three sides, so an object seen once has coverage of
  at most 0.6 and an object seen from all around has 1;
- ``depth_noise_m``: the larger of a Kinect-style depth noise model
  ``sigma(z) = base + quadratic * (z - offset)**2`` at the median depth of the object in the frames
  that saw it, and the measured spread of the object's points about their local planes (noisy
  fused points only; the mesh's points have none);
- ``cut_off_views``: the observing frames whose image border cuts the object (its instance mask
  touches the border, or some of its points project outside the image or within
  ``border_margin_share`` of its width from the border);
- ``support_gap_m``: how far the bottom of its box floats above what it stands on (:func:`support_gap`:
  the highest surface of the scene cloud under and just around its footprint, or the floor);
- ``position_uncertainty_m = depth_noise_m / sqrt(max(observed_views, 1)) + (1 - extent_coverage) * size_m / 8
  + boundary_blur_m / 2 + unseen_m / 2``
- ``size_uncertainty_m = 2 * depth_noise_m / sqrt(max(observed_views, 1)) + (1 - extent_coverage) * size_m / 4
  + boundary_blur_m + unseen_m``

where ``boundary_blur_m`` is how spread the ends of a noisy object's box are where they have no
face (:func:`assets.dge.objects.face_refined_box`; 0 for mesh samples), since depth noise and
mixed pixels blur the silhouette of a curved or thin object fused from depth frames, and
``unseen_m`` is what the frames may have missed of the object: ``max(size_m, truncated_unseen_m)`` for
an object cut by the border of every frame that observed it (its points are only the part inside the
images, so its box is a lower bound of unknown size), at least the support gap when that is above
``max_support_gap_m`` (the frames saw its top but not what it stands on: a chair whose lower half a
table hid in the one view that showed it whole), and 0 otherwise,

so an object seen in one frame, or never, or only cut off, gets a large uncertainty rather than a
confident size. The coverage term's coefficients (1/8 and 1/4) are calibrated against the generator's truth
on the realistic worlds the DGE tests build (10 worlds, 400 objects from the masks): twice these, as before,
withheld questions of which none would have been wrong; an object's unseen sides are mostly bounded by what it
stands against and by its seen top. Objects cut off or floating keep their whole unseen term, and the questions
add what an object's masks show beyond its box (:func:`assets.dge.tasks.facts.mask_shortfall_m`).

Points sampled on a segmented mesh (``complete=True``) are the whole object whatever the frames saw:
its coverage is 1, no frame cuts it off, nothing of it is unseen, and only the depth noise at its
distance remains.

>>> round(kinect_depth_sigma(2.0, ConfidenceSettings()), 5)
0.00606
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pydantic
from pydantic import ConfigDict
from scipy.spatial import cKDTree


class ConfidenceSettings(pydantic.BaseModel):
    """How the measurement confidence of objects is estimated.

    It has no run configuration of its own: its ``ClassVar`` attributes are the method's constants (depth
    buffer, visibility counts, the Kinect-style noise model), read as ``settings.depth_noise_base_m``; a test
    that needs other values passes an instance of a subclass that overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Constants of the method (not run configuration; a test may override them in a subclass).
    confidence_buffer_voxel_m: ClassVar[float] = 0.1
    """Voxel size of the copy of the scene cloud splatted into the depth buffers (each point covers its
    voxel's projected size)."""
    confidence_buffer_width: ClassVar[int] = 64
    """Width in cells of the coarse depth buffer each frame's visibility test uses (the height follows the
    image's aspect ratio)."""
    confidence_occlusion_tolerance_m: ClassVar[float] = 0.05
    """A point is unoccluded when its depth is at most the buffer's nearest depth plus this plus
    confidence_occlusion_tolerance_relative times its depth."""
    confidence_occlusion_tolerance_relative: ClassVar[float] = 0.03
    """Share of the depth added to confidence_occlusion_tolerance_m."""
    confidence_sample_points: ClassVar[int] = 200
    """Object points (seeded subsample) tested per frame for observed_views."""
    min_visible_points: ClassVar[int] = 5
    """Least unoccluded points in the image for a frame to count as observing an object."""
    min_visible_share: ClassVar[float] = 0.03
    """Least share of the tested points unoccluded in the image for a frame to count as observing an object."""
    min_side_points: ClassVar[int] = 5
    """Least points of a side's 3 x 3 grid unoccluded in the image for the side to be seen."""
    depth_noise_base_m: ClassVar[float] = 0.0012
    """Constant term of the depth noise model sigma(z), metres."""
    depth_noise_quadratic: ClassVar[float] = 0.0019
    """Quadratic coefficient of the depth noise model sigma(z), 1/metre."""
    depth_noise_offset_m: ClassVar[float] = 0.4
    """Depth at which the quadratic term of sigma(z) vanishes, metres."""
    border_margin_share: ClassVar[float] = 0.015
    """An object's points within this share of the image width from the border (or outside the image) mean the
    frame cuts it off (2 pixels of a 160-pixel depth image)."""
    truncated_unseen_m: ClassVar[float] = 0.5
    support_margin_m: ClassVar[float] = 0.1
    """What an object stands on is looked for under its footprint widened by this on each side (a table's top
    around a mug's base)."""
    support_own_distance_m: ClassVar[float] = 0.03
    """Cloud points this close to an object's points are its own surface, not what it stands on; what it stands
    on may be this much above its bottom."""
    max_support_gap_m: ClassVar[float] = 0.1
    """An object whose bottom floats more than this above what it stands on was not seen down to its base: the
    gap counts as unseen (see the module docstring)."""
    """An object cut off by every frame that observed it may reach at least this far (or its seen size, when
    larger) beyond what the frames saw: its position and size uncertainty grow by this (half of it for the
    position), which withholds it from every size, distance and direction question."""


DEFAULT_CONFIDENCE_SETTINGS = ConfidenceSettings()


def kinect_depth_sigma(depth_m: float, config: ConfidenceSettings = DEFAULT_CONFIDENCE_SETTINGS) -> float:
    """Standard deviation of a structured-light depth reading at ``depth_m`` (Kinect-style quadratic model)."""
    return (
        config.depth_noise_base_m
        + config.depth_noise_quadratic * (depth_m - config.depth_noise_offset_m) ** 2
    )


@dataclass(frozen=True)
class CameraView:
    """One used frame's depth camera in the gravity frame."""

    frame_index: int
    camera_to_gravity: np.ndarray  # (4, 4)
    intrinsics: np.ndarray  # (3, 3) depth intrinsics
    width: int
    height: int

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        """Gravity-frame points in this camera's frame."""
        rotation, centre = self.camera_to_gravity[:3, :3], self.camera_to_gravity[:3, 3]
        return (np.asarray(points, dtype=np.float64) - centre) @ rotation

    @property
    def centre(self) -> np.ndarray:
        """The camera's position (gravity frame)."""
        return self.camera_to_gravity[:3, 3]


@dataclass(frozen=True)
class DepthBuffer:
    """The nearest depth of the scene cloud per coarse image cell of one view."""

    view: CameraView
    scale: float  # image pixels per buffer cell
    depth: np.ndarray  # (rows, cols), inf where the cloud has no point

    @classmethod
    def build(
        cls,
        view: CameraView,
        cloud: np.ndarray,
        width_cells: int,
        voxel_size_m: float,
        max_splat_cells: int = 3,
    ) -> DepthBuffer:
        """Splat the cloud (voxel-downsampled at ``voxel_size_m``) into the buffer, nearest depth per cell.

        Each point covers the cells of its voxel's projected size (up to ``max_splat_cells`` either
        side), so a sparse cloud seen from close by leaves no gaps between its points.
        """
        scale = max(view.width / max(width_cells, 1), 1.0)
        shape = (max(1, math.ceil(view.height / scale)), max(1, math.ceil(view.width / scale)))
        camera = view.to_camera(cloud)
        z = camera[:, 2]
        front = z > 1e-3
        camera, z = camera[front], z[front]
        u = (view.intrinsics[0, 0] * camera[:, 0] / z + view.intrinsics[0, 2]) / scale
        v = (view.intrinsics[1, 1] * camera[:, 1] / z + view.intrinsics[1, 2]) / scale
        radius = np.clip(
            np.floor(0.5 * voxel_size_m * view.intrinsics[0, 0] / (z * scale) + 0.5), 0, max_splat_cells
        ).astype(np.int64)
        cols, rows = np.floor(u).astype(np.int64), np.floor(v).astype(np.int64)
        near = (rows >= -radius) & (rows < shape[0] + radius) & (cols >= -radius) & (cols < shape[1] + radius)
        rows, cols, z, radius = rows[near], cols[near], z[near], radius[near]
        buffer = np.full(shape[0] * shape[1], np.inf)
        for size in range(int(radius.max(initial=0)) + 1):
            chosen = radius >= size
            chosen_rows, chosen_cols, chosen_z = rows[chosen], cols[chosen], z[chosen]
            # The ring of cells at Chebyshev distance ``size`` around each point with a radius of at least ``size``.
            for d_row in range(-size, size + 1):
                for d_col in range(-size, size + 1):
                    if max(abs(d_row), abs(d_col)) != size:
                        continue
                    r, c = chosen_rows + d_row, chosen_cols + d_col
                    inside = (r >= 0) & (r < shape[0]) & (c >= 0) & (c < shape[1])
                    np.minimum.at(buffer, r[inside] * shape[1] + c[inside], chosen_z[inside])
        buffer = buffer.reshape(shape)
        return cls(view, scale, buffer)

    def unoccluded(self, points: np.ndarray, config: ConfidenceSettings) -> tuple[np.ndarray, np.ndarray]:
        """Which points project into the image with no nearer surface in the buffer, and their depths."""
        camera = self.view.to_camera(points)
        z = camera[:, 2]
        front = z > 1e-3
        safe_z = np.where(front, z, 1.0)
        u = (self.view.intrinsics[0, 0] * camera[:, 0] / safe_z + self.view.intrinsics[0, 2]) / self.scale
        v = (self.view.intrinsics[1, 1] * camera[:, 1] / safe_z + self.view.intrinsics[1, 2]) / self.scale
        rows, cols = self.depth.shape
        inside = front & (u >= 0) & (u < cols) & (v >= 0) & (v < rows)
        nearest = np.full(len(points), -np.inf)
        nearest[inside] = self.depth[
            np.floor(v[inside]).astype(np.int64), np.floor(u[inside]).astype(np.int64)
        ]
        tolerance = (
            config.confidence_occlusion_tolerance_m + config.confidence_occlusion_tolerance_relative * z
        )
        return inside & (z <= nearest + tolerance), z


@dataclass(frozen=True)
class MeasurementConfidence:
    """How well one object was measured (see the module docstring for the formulas)."""

    observed_views: int
    extent_coverage: float
    depth_noise_m: float
    position_uncertainty_m: float
    size_uncertainty_m: float
    cut_off_views: int = 0
    support_gap_m: float = 0.0


def box_sides(center: np.ndarray, extents: np.ndarray, yaw: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """The five exposed sides of a yaw-oriented box: ``(3 x 3 grid of points on the side, outward normal)``.

    The four vertical sides (along and across the length axis) and the top, each sampled at 1/6,
    1/2 and 5/6 of its two dimensions.

    >>> sides = box_sides(np.zeros(3), np.array([2.0, 1.0, 1.0]), 0.0)
    >>> [normal.round(6).tolist() for _, normal in sides][-1], sides[0][0][:, 0].round(6).tolist()[:3]
    ([0.0, 0.0, 1.0], [1.0, 1.0, 1.0])
    """
    length_axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
    width_axis = np.array([-math.sin(yaw), math.cos(yaw), 0.0])
    up = np.array([0.0, 0.0, 1.0])
    half = np.asarray(extents, dtype=np.float64) / 2.0
    fractions = np.array([-2.0 / 3.0, 0.0, 2.0 / 3.0])
    a, b = np.meshgrid(fractions, fractions, indexing="ij")
    a, b = a.ravel()[:, None], b.ravel()[:, None]
    sides = []
    for axis, offset, (first, first_half), (second, second_half) in (
        (length_axis, half[0], (width_axis, half[1]), (up, half[2])),
        (-length_axis, half[0], (width_axis, half[1]), (up, half[2])),
        (width_axis, half[1], (length_axis, half[0]), (up, half[2])),
        (-width_axis, half[1], (length_axis, half[0]), (up, half[2])),
        (up, half[2], (length_axis, half[0]), (width_axis, half[1])),
    ):
        grid = center + axis * offset + a * first * first_half + b * second * second_half
        sides.append((grid, axis))
    return sides


def measurement_confidence(
    points: np.ndarray,
    center: np.ndarray,
    extents: np.ndarray,
    yaw: float,
    buffers: list[DepthBuffer],
    point_spread_m: float,
    object_id: int,
    config: ConfidenceSettings = DEFAULT_CONFIDENCE_SETTINGS,
    seed: int = 0,
    boundary_blur_m: float = 0.0,
    complete: bool = False,
    cut_off_frames: Collection[int] = (),
    support_gap_m: float = 0.0,
) -> MeasurementConfidence:
    """One object's :class:`MeasurementConfidence` from its points and box (gravity frame) and the views' buffers.

    ``point_spread_m`` is the measured spread of its points about their local planes and
    ``boundary_blur_m`` the blur of its box's unfaced ends (both 0 for mesh samples). ``complete``: the points
    are the whole object (sampled on a segmented mesh), so neither the sides the frames saw nor the image
    borders limit what was measured. ``cut_off_frames``: the frames whose instance mask of the object touches the
    image border (they cut it off even where its fused points stop short of the border: a lamp's thin pole).
    ``support_gap_m``: how far its bottom floats above what it stands on (:func:`support_gap`).
    """
    points = np.asarray(points, dtype=np.float64)
    all_points = points
    if len(points) > config.confidence_sample_points:
        rng = np.random.default_rng([seed, object_id])
        points = points[rng.choice(len(points), size=config.confidence_sample_points, replace=False)]
    needed = max(config.min_visible_points, math.ceil(config.min_visible_share * len(points)))
    sides = box_sides(center, extents, yaw)
    seen_sides = np.zeros(len(sides), dtype=bool)
    views = cut_off_views = 0
    observed_depths: list[float] = []
    all_depths: list[float] = []
    for buffer in buffers:
        visible, depth = buffer.unoccluded(points, config)
        centre_depth = float(buffer.view.to_camera(center[None, :])[0, 2])
        all_depths.append(centre_depth)
        if int(visible.sum()) < needed:
            continue
        views += 1
        cut_off_views += int(
            not complete
            and (
                buffer.view.frame_index in cut_off_frames
                or cut_by_border(buffer.view, all_points, config.border_margin_share)
            )
        )
        observed_depths.append(float(np.median(depth[visible])))
        camera = buffer.view.centre
        for index, (grid, normal) in enumerate(sides):
            if seen_sides[index] or float(np.dot(camera - grid[4], normal)) <= 0.0:
                continue
            side_visible, _ = buffer.unoccluded(grid, config)
            seen_sides[index] = int(side_visible.sum()) >= config.min_side_points
    coverage = 1.0 if complete else float(seen_sides.mean()) if views else 0.0
    depths = observed_depths or [d for d in all_depths if d > 0] or [config.depth_noise_offset_m]
    noise = max(kinect_depth_sigma(float(np.median(depths)), config), float(point_spread_m))
    size = float(np.max(extents)) if len(extents) else 0.0
    unseen = max(size, config.truncated_unseen_m) if views and cut_off_views == views else 0.0
    if not complete and support_gap_m > config.max_support_gap_m:
        unseen = max(unseen, support_gap_m)
    root_views = math.sqrt(max(views, 1))
    return MeasurementConfidence(
        observed_views=views,
        extent_coverage=coverage,
        depth_noise_m=noise,
        position_uncertainty_m=noise / root_views
        + (1.0 - coverage) * size / 8.0
        + boundary_blur_m / 2.0
        + unseen / 2.0,
        size_uncertainty_m=2.0 * noise / root_views
        + (1.0 - coverage) * size / 4.0
        + boundary_blur_m
        + unseen,
        cut_off_views=cut_off_views,
        support_gap_m=0.0 if complete else float(support_gap_m),
    )


def support_gap(
    points: np.ndarray,
    center: np.ndarray,
    extents: np.ndarray,
    yaw: float,
    cloud: np.ndarray,
    config: ConfidenceSettings = DEFAULT_CONFIDENCE_SETTINGS,
) -> float:
    """How far the bottom of an object's box floats above what it stands on (metres, gravity frame, floor z = 0).

    What it stands on is the highest point of the scene ``cloud`` at most ``support_own_distance_m`` above the
    box's bottom, under the footprint widened by ``support_margin_m`` on each side, that is not the object's own
    surface (farther than ``support_own_distance_m`` from its ``points``), or the floor when there is none: a
    table's top around a mug, the floor under a chair's legs.

    >>> xs, ys = np.meshgrid(np.linspace(-1, 1, 41), np.linspace(-1, 1, 41))
    >>> cloud = np.stack([xs.ravel(), ys.ravel(), np.zeros(xs.size)], axis=1)  # the floor
    >>> box = np.array([[0.0, 0.0, 0.4], [0.1, 0.1, 0.8]])  # an object's points, 0.4 m above the floor
    >>> round(support_gap(box, np.array([0.05, 0.05, 0.6]), np.array([0.1, 0.1, 0.4]), 0.0, cloud), 3)
    0.4
    >>> table = cloud + [0, 0, 0.4]
    >>> round(support_gap(box, np.array([0.05, 0.05, 0.6]), np.array([0.1, 0.1, 0.4]), 0.0, np.vstack([cloud, table])), 3)
    0.0
    """
    bottom = float(center[2] - extents[2] / 2.0)
    cloud = np.asarray(cloud, dtype=np.float64)
    cos_a, sin_a = math.cos(yaw), math.sin(yaw)
    offset = cloud[:, :2] - np.asarray(center[:2], dtype=np.float64)
    along = offset[:, 0] * cos_a + offset[:, 1] * sin_a
    across = -offset[:, 0] * sin_a + offset[:, 1] * cos_a
    near = (
        (np.abs(along) <= extents[0] / 2.0 + config.support_margin_m)
        & (np.abs(across) <= extents[1] / 2.0 + config.support_margin_m)
        & (cloud[:, 2] <= bottom + config.support_own_distance_m)
    )
    candidates = cloud[near]
    if len(candidates) and len(points):
        distance, _ = cKDTree(np.asarray(points, dtype=np.float64)).query(candidates, k=1)
        candidates = candidates[distance > config.support_own_distance_m]
    support = max(float(candidates[:, 2].max()), 0.0) if len(candidates) else 0.0
    return max(bottom - support, 0.0)


def cut_by_border(view: CameraView, points: np.ndarray, margin_share: float) -> bool:
    """Whether the image border cuts the object off: some of its points project outside the image, behind the
    camera, or within ``margin_share`` of the image width from the border.

    >>> view = CameraView(0, np.eye(4), np.array([[100.0, 0, 80], [0, 100, 60], [0, 0, 1]]), 160, 120)
    >>> inside = np.array([[0.0, 0, 2], [0.2, 0.1, 2]])
    >>> cut_by_border(view, inside, 0.015), cut_by_border(view, inside + [1.5, 0, 0], 0.015)
    (False, True)
    """
    camera = view.to_camera(points)
    z = camera[:, 2]
    if (z <= 1e-3).any():
        return True
    u = view.intrinsics[0, 0] * camera[:, 0] / z + view.intrinsics[0, 2]
    v = view.intrinsics[1, 1] * camera[:, 1] / z + view.intrinsics[1, 2]
    margin = margin_share * view.width
    return bool(
        (u < margin - 0.5).any()
        or (u > view.width - 0.5 - margin).any()
        or (v < margin - 0.5).any()
        or (v > view.height - 0.5 - margin).any()
    )
