"""The partial, look-around and mixed camera paths: what part of a room each capture covers, and how they mix."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from assets.sample_world.config import MIXED_CAMERA_PATHS, SampleWorldConfig
from assets.sample_world.scene import (
    CAMERA_OBJECT_CLEARANCE,
    clear_of_objects,
    sample_scene,
    sample_views,
    scene_camera_path,
)

SCENES = 4


def _config(path: str, views: int = 6) -> SampleWorldConfig:
    return SampleWorldConfig(
        root=Path("unused"), num_scenes=SCENES, views_per_scene=views, camera_path=path, show_progress=False
    )


def _heading_degrees(view) -> float:
    return math.degrees(math.atan2(view.rotation[1, 2], view.rotation[0, 2]))


def _turn(first: float, second: float) -> float:
    return (second - first + 180.0) % 360.0 - 180.0


@pytest.mark.parametrize("scene_index", range(SCENES))
def test_a_partial_capture_walks_a_third_of_the_loop(scene_index):
    """The partial path's cameras stand on a third of the loop around the room (seen from its centre)."""
    config = _config("partial", views=12)
    scene = sample_scene(config, scene_index)
    angles = [
        math.degrees(math.atan2(*(view.position[:2] - scene.room.centre[:2])[::-1]))
        for view in sample_views(config, scene)
    ]
    steps = [_turn(first, second) for first, second in zip(angles[:-1], angles[1:], strict=True)]
    assert abs(sum(steps)) <= 130.0 and all(step > 0 for step in steps), steps


@pytest.mark.parametrize("scene_index", range(SCENES))
def test_a_look_around_turns_once_around_on_the_spot(scene_index):
    """The look-around's cameras stand within a few centimetres of one spot clear of the objects, each turned
    360 / views degrees the same way from the one before."""
    config = _config("lookaround")
    scene = sample_scene(config, scene_index)
    views = sample_views(config, scene)
    positions = np.array([view.position[:2] for view in views])
    assert np.linalg.norm(positions - positions.mean(axis=0), axis=1).max() <= 0.15
    assert all(clear_of_objects(scene, point, CAMERA_OBJECT_CLEARANCE) for point in positions)
    turns = [
        _turn(_heading_degrees(first), _heading_degrees(second))
        for first, second in zip(views[:-1], views[1:], strict=True)
    ]
    assert (
        all(abs(abs(turn) - 60.0) <= 1e-6 for turn in turns) and len({np.sign(turn) for turn in turns}) == 1
    )


def test_a_mixed_world_takes_the_paths_in_turn():
    """Scene i of a mixed world has the views the i-th path of MIXED_CAMERA_PATHS gives it."""
    mixed = _config("mixed")
    for scene_index in range(SCENES):
        path = scene_camera_path(mixed, scene_index)
        assert path == MIXED_CAMERA_PATHS[scene_index % len(MIXED_CAMERA_PATHS)]
        scene = sample_scene(mixed, scene_index)
        alone = sample_views(_config(path), scene)
        assert all(
            np.array_equal(a.pose, b.pose) for a, b in zip(sample_views(mixed, scene), alone, strict=True)
        )
    assert set(MIXED_CAMERA_PATHS) == {"loop", "handheld", "partial", "lookaround"}
