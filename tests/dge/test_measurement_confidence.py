"""Measurement confidence per object: observed views, coverage of the box, depth noise and uncertainties.

The synthetic checks use a unit cube and cameras placed by hand, so the expected views and sides
follow from the placement; the scene checks build the sample world from all of its frames and from
a single one.
"""

import math

import numpy as np
import pytest

from assets.dge.confidence import (
    CameraView,
    ConfidenceSettings,
    DepthBuffer,
    kinect_depth_sigma,
    measurement_confidence,
)
from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.tasks import ObjectFact, TaskSettings
from assets.dge.tasks.answers import size_problem

INTRINSICS = np.array([[200.0, 0.0, 160.0], [0.0, 200.0, 120.0], [0.0, 0.0, 1.0]])


def _look_at(eye, target) -> np.ndarray:
    """Camera-to-world pose of a camera at ``eye`` looking at ``target`` (x right, y down, z forward)."""
    forward = np.asarray(target, float) - np.asarray(eye, float)
    forward /= np.linalg.norm(forward)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, 0], pose[:3, 1], pose[:3, 2], pose[:3, 3] = right, down, forward, eye
    return pose


def _cube_scene() -> tuple[np.ndarray, np.ndarray]:
    """Points on a unit cube standing on the floor at the origin, and the floor around it."""
    grid = np.linspace(-0.5, 0.5, 21)
    a, b = (values.ravel() for values in np.meshgrid(grid, grid))
    faces = [
        np.column_stack([np.full_like(a, 0.5), a, b + 0.5]),
        np.column_stack([np.full_like(a, -0.5), a, b + 0.5]),
        np.column_stack([a, np.full_like(a, 0.5), b + 0.5]),
        np.column_stack([a, np.full_like(a, -0.5), b + 0.5]),
        np.column_stack([a, b, np.full_like(a, 1.0)]),
    ]
    cube = np.vstack(faces)
    floor_grid = np.linspace(-4, 4, 81)
    fx, fy = (values.ravel() for values in np.meshgrid(floor_grid, floor_grid))
    floor = np.column_stack([fx, fy, np.zeros_like(fx)])
    return cube, np.vstack([cube, floor])


def _confidence(eyes):
    cube, cloud = _cube_scene()
    config = ConfidenceSettings()
    views = [CameraView(i, _look_at(eye, [0, 0, 0.5]), INTRINSICS, 320, 240) for i, eye in enumerate(eyes)]
    buffers = [DepthBuffer.build(view, cloud, config.confidence_buffer_width, 0.05) for view in views]
    centre, extents = np.array([0.0, 0.0, 0.5]), np.array([1.0, 1.0, 1.0])
    return measurement_confidence(cube, centre, extents, 0.0, buffers, 0.0, 0, config)


def test_one_view_sees_the_sides_facing_it():
    confidence = _confidence([(3.0, 0.0, 2.5)])
    assert confidence.observed_views == 1
    assert confidence.extent_coverage == pytest.approx(2 / 5)  # the +x side and the top
    pose = _look_at((3.0, 0.0, 2.5), [0, 0, 0.5])
    corners = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (0.0, 1.0)])
    depths = (corners - pose[:3, 3]) @ pose[:3, 2]
    config = ConfidenceSettings()
    assert kinect_depth_sigma(depths.min(), config) <= confidence.depth_noise_m
    assert confidence.depth_noise_m <= kinect_depth_sigma(depths.max(), config)
    # the 3 unseen sides of a 1 m cube: (1 - 2/5) x 1 m / 4 in size, / 8 in position
    assert confidence.size_uncertainty_m == pytest.approx(2 * confidence.depth_noise_m + 0.6 / 4)
    assert confidence.position_uncertainty_m == pytest.approx(confidence.depth_noise_m + 0.6 / 8)


def test_views_from_all_around_cover_every_side():
    eyes = [(3.0, 0.0, 2.5), (-3.0, 0.0, 2.5), (0.0, 3.0, 2.5), (0.0, -3.0, 2.5)]
    confidence = _confidence(eyes)
    assert confidence.observed_views == 4
    assert confidence.extent_coverage == 1.0
    assert confidence.size_uncertainty_m == pytest.approx(2 * confidence.depth_noise_m / 2)
    assert confidence.size_uncertainty_m < 0.02


def test_a_camera_behind_a_wall_does_not_observe():
    cube, cloud = _cube_scene()
    wall_grid = np.linspace(-2, 2, 81)
    wy, wz = (values.ravel() for values in np.meshgrid(wall_grid, wall_grid + 2))
    wall = np.column_stack([np.full_like(wy, 1.5), wy, wz])
    config = ConfidenceSettings()
    view = CameraView(0, _look_at((3.0, 0.0, 2.5), [0, 0, 0.5]), INTRINSICS, 320, 240)
    buffer = DepthBuffer.build(view, np.vstack([cloud, wall]), config.confidence_buffer_width, 0.05)
    confidence = measurement_confidence(
        cube, np.array([0, 0, 0.5]), np.ones(3), 0.0, [buffer], 0.0, 0, config
    )
    assert confidence.observed_views == 0
    assert confidence.extent_coverage == 0.0
    # no side seen: a quarter of its 1 m size, and no size question (too few views, no coverage)
    assert confidence.size_uncertainty_m >= 0.25
    fact = ObjectFact(0, "cube", np.array([0, 0, 0.5]), np.ones(3), **_confidence_fields(confidence))
    assert size_problem(fact, 1.0, TaskSettings()) == "too few views of the object"


def test_an_object_seen_in_a_single_frame_is_flagged_uncertain(scannet_tables):
    """A scene built from one depth frame gives every object fused from its instance masks low coverage and a large
    size uncertainty: no size question is asked about it."""
    scene = next(iter(scannet_tables.scenes.iter_rows(named=True)))
    frames = scannet_tables.frames.filter(scannet_tables.frames["scene_id"] == scene["scene_id"])
    settings = SceneGeometrySettings(object_points_source="instance_masks")
    full = {obj.object_id: obj for obj in build_scan_geometry(frames, scene, settings).objects}
    single = build_scan_geometry(frames.head(1), scene, settings)
    assert single.objects
    for obj in single.objects:
        assert obj.observed_views <= 1
        assert obj.extent_coverage <= 0.6
        assert obj.size_uncertainty_m >= 0.1 * obj.size
        assert obj.position_uncertainty_m >= 0.05 * obj.size
        assert size_problem(_fact(obj), obj.size, TaskSettings())
    assert any(obj.observed_views >= 3 and obj.extent_coverage == 1.0 for obj in full.values())
    for obj in single.objects:
        assert full[obj.object_id].observed_views > obj.observed_views
        assert full[obj.object_id].size_uncertainty_m < obj.size_uncertainty_m
    assert math.isfinite(max(obj.size_uncertainty_m for obj in single.objects))


def test_a_mesh_object_is_whole_whatever_the_frames_saw(scannet_tables):
    """Points sampled on the segmented mesh are the whole object: from one frame as from all of them, its coverage is
    1, no frame cuts it off and its uncertainty is the depth noise at its distance."""
    scene = next(iter(scannet_tables.scenes.iter_rows(named=True)))
    frames = scannet_tables.frames.filter(scannet_tables.frames["scene_id"] == scene["scene_id"])
    single = build_scan_geometry(frames.head(1), scene, SceneGeometrySettings(object_points_source="mesh"))
    assert single.objects
    for obj in single.objects:
        assert obj.extent_coverage == 1.0 and obj.cut_off_views == 0 and obj.support_gap_m == 0.0
        assert obj.position_uncertainty_m == pytest.approx(
            obj.depth_noise_m / math.sqrt(max(obj.observed_views, 1))
        )
        assert obj.size_uncertainty_m == pytest.approx(2 * obj.position_uncertainty_m)


def _confidence_fields(confidence) -> dict:
    return {
        "observed_views": confidence.observed_views,
        "extent_coverage": confidence.extent_coverage,
        "depth_noise_m": confidence.depth_noise_m,
        "position_uncertainty_m": confidence.position_uncertainty_m,
        "size_uncertainty_m": confidence.size_uncertainty_m,
    }


def _fact(obj) -> ObjectFact:
    return ObjectFact(obj.object_id, obj.label, obj.centroid, obj.obb_extents, **_confidence_fields(obj))
