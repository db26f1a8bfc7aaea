"""Scene sampling: rooms, object placement, supports, camera views, config validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assets.sample_world import SampleWorldConfig
from assets.sample_world.catalogue import CATALOGUE, COLOURS
from assets.sample_world.scene import (
    CAMERA_OBJECT_CLEARANCE,
    FLOOR_CLEARANCE,
    camera_intrinsics,
    rectangles_overlap,
    sample_scene,
    sample_views,
)

CONFIG = SampleWorldConfig(
    root=Path("unused"), num_scenes=8, views_per_scene=6, camera_path="loop", show_progress=False
)
SCENES = [sample_scene(CONFIG, index) for index in range(CONFIG.num_scenes)]


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.scene_id)
def test_objects_fit_the_room_and_do_not_overlap(scene):
    assert CONFIG.min_objects <= len(scene.objects) <= CONFIG.max_objects
    room = scene.room
    floor_objects = [item for item in scene.objects if item.support_id is None]
    for item in floor_objects:
        footprint = item.footprint
        assert footprint[:, 0].min() >= CONFIG.object_wall_margin - 1e-9
        assert footprint[:, 0].max() <= room.width - CONFIG.object_wall_margin + 1e-9
        assert footprint[:, 1].min() >= CONFIG.object_wall_margin - 1e-9
        assert footprint[:, 1].max() <= room.depth - CONFIG.object_wall_margin + 1e-9
        assert item.aabb[0][2] == pytest.approx(0.0, abs=1e-9)
    for index, first in enumerate(floor_objects):
        for second in floor_objects[index + 1 :]:
            assert not rectangles_overlap(first.footprint, second.footprint, FLOOR_CLEARANCE - 1e-6)


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.scene_id)
def test_supported_objects_stand_on_their_support(scene):
    for item in scene.objects:
        if item.support_id is None:
            continue
        support = scene.objects[item.support_id]
        assert support.template.is_support
        assert item.aabb[0][2] == pytest.approx(support.aabb[1][2], abs=1e-9)
        corners = (np.c_[item.footprint, np.zeros(4)] - support.position) @ support.rotation
        assert (corners[:, :2] >= support.local_min[:2] - 1e-9).all()
        assert (corners[:, :2] <= support.local_max[:2] + 1e-9).all()


def test_some_scenes_have_objects_on_supports():
    assert any(item.support_id is not None for scene in SCENES for item in scene.objects)


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.scene_id)
def test_names_are_unique_and_from_the_catalogue(scene):
    names = [item.name for item in scene.objects]
    assert len(names) == len(set(names))
    for item in scene.objects:
        assert item.category in CATALOGUE
        assert item.colour in COLOURS and item.colour in item.template.colours


def test_scene_depends_only_on_seed_and_index():
    larger = SampleWorldConfig(root=Path("unused"), num_scenes=30)
    again = sample_scene(larger, 3)
    assert [item.name for item in again.objects] == [item.name for item in SCENES[3].objects]
    assert np.array_equal(again.objects[0].position, SCENES[3].objects[0].position)
    other_seed = sample_scene(SampleWorldConfig(root=Path("unused"), seed=1), 3)
    assert [item.name for item in other_seed.objects] != [
        item.name for item in SCENES[3].objects
    ] or not np.array_equal(other_seed.objects[0].position, SCENES[3].objects[0].position)


@pytest.mark.parametrize("scene", SCENES, ids=lambda scene: scene.scene_id)
def test_views_are_rigid_inside_the_room_and_vary_in_height(scene):
    views = sample_views(CONFIG, scene)
    assert [view.frame_index for view in views] == list(range(CONFIG.views_per_scene))
    heights = []
    for view in views:
        rotation = view.rotation
        assert np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-9)
        assert np.linalg.det(rotation) == pytest.approx(1.0)
        assert np.array_equal(view.pose[3], [0.0, 0.0, 0.0, 1.0])
        position = view.position
        assert 0 < position[0] < scene.room.width and 0 < position[1] < scene.room.depth
        low, high = CONFIG.camera_height_range
        assert low <= position[2] <= high
        # Camera x axis is horizontal (no roll) and the camera looks down or level at the furniture.
        assert abs(rotation[2, 0]) < 1e-9
        assert rotation[2, 2] <= 1e-9
        heights.append(position[2])
    assert max(heights) - min(heights) > 0.3


def test_depth_intrinsics_match_the_downsampled_grid():
    color, depth = camera_intrinsics(CONFIG)
    scale = CONFIG.depth_downsample
    assert depth[0, 0] == pytest.approx(color[0, 0] / scale)
    # The centre of depth pixel (0, 0) sees the same ray as colour position ((scale - 1) / 2, (scale - 1) / 2).
    colour_position = (scale - 1) / 2.0
    assert (0.0 - depth[0, 2]) / depth[0, 0] == pytest.approx((colour_position - color[0, 2]) / color[0, 0])
    assert (0.0 - depth[1, 2]) / depth[1, 1] == pytest.approx((colour_position - color[1, 2]) / color[1, 1])


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_scenes": 0},
        {"width": 321, "depth_downsample": 2},
        {"min_objects": 5, "max_objects": 4},
        {"max_objects": 17},
        {"room_width_range": (2.0, 3.0)},
        {"camera_height_range": (0.5, 2.9)},
        {"jpeg_quality": 0},
        {"min_question_visibility": 1.5},
    ],
)
def test_invalid_configs_are_rejected(overrides):
    with pytest.raises(ValueError):
        SampleWorldConfig(root=Path("unused"), **overrides)


HANDHELD = SampleWorldConfig(
    root=Path("unused"), num_scenes=4, views_per_scene=24, camera_path="handheld", show_progress=False
)


def _floor_heading_degrees(view) -> float:
    return float(np.degrees(np.arctan2(view.rotation[1, 2], view.rotation[0, 2])))


def _signed_difference(first: float, second: float) -> float:
    return (second - first + 180.0) % 360.0 - 180.0


@pytest.mark.parametrize("scene_index", range(HANDHELD.num_scenes))
def test_handheld_path_pans_in_place_and_walks_so_cameras_stand_behind_each_other(scene_index):
    scene = sample_scene(HANDHELD, scene_index)
    views = sample_views(HANDHELD, scene)
    assert len(views) == HANDHELD.views_per_scene
    pans = behind = 0
    for earlier, later in zip(views[:-1], views[1:], strict=True):
        moved = float(np.linalg.norm(later.position[:2] - earlier.position[:2]))
        turned = abs(_signed_difference(_floor_heading_degrees(earlier), _floor_heading_degrees(later)))
        pans += moved < 0.1 and turned >= 30.0
    for index, later in enumerate(views):
        for earlier in views[:index]:
            offset = earlier.position[:2] - later.position[:2]
            if np.linalg.norm(offset) < 0.5:
                continue
            direction = float(np.degrees(np.arctan2(offset[1], offset[0])))
            behind += abs(_signed_difference(_floor_heading_degrees(later), direction)) >= 150.0
    assert pans >= 3 and behind >= 3, (pans, behind)


@pytest.mark.parametrize("scene_index", range(HANDHELD.num_scenes))
def test_handheld_cameras_keep_clear_of_objects_and_inside_the_room(scene_index):
    scene = sample_scene(HANDHELD, scene_index)
    low, high = HANDHELD.camera_height_range
    for view in sample_views(HANDHELD, scene):
        x, y, z = view.position
        assert HANDHELD.camera_wall_margin - 0.1 <= x <= scene.room.width - HANDHELD.camera_wall_margin + 0.1
        assert HANDHELD.camera_wall_margin - 0.1 <= y <= scene.room.depth - HANDHELD.camera_wall_margin + 0.1
        assert low <= z <= high
        point = np.array([[x, y], [x + 1e-3, y], [x + 1e-3, y + 1e-3], [x, y + 1e-3]])
        for item in scene.objects:
            assert not rectangles_overlap(point, item.footprint, CAMERA_OBJECT_CLEARANCE - 1e-6), item.name


def test_handheld_path_is_deterministic_and_differs_from_the_loop():
    scene = sample_scene(HANDHELD, 0)
    first = [view.pose for view in sample_views(HANDHELD, scene)]
    second = [view.pose for view in sample_views(HANDHELD, scene)]
    assert all(np.array_equal(a, b) for a, b in zip(first, second, strict=True))
    loop = SampleWorldConfig(
        root=Path("unused"), num_scenes=4, views_per_scene=24, camera_path="loop", show_progress=False
    )
    assert not np.allclose(first[1], sample_views(loop, scene)[1].pose)


def test_unknown_camera_path_is_rejected():
    with pytest.raises(ValueError, match="camera_path"):
        SampleWorldConfig(root=Path("unused"), camera_path="spiral")
