"""Where "up" comes from, and camera turns near a half turn, checked against the independent oracle.

A one-frame capture whose frame shows too little floor for a plane: with the scan's axis alignment (its ScanNet
meta file) "up" is the scan's own and every question is asked and right; without it (and without cameras that
turned) "up" would be the camera's guess, so no question that depends on it is asked, with the reason. A look-around
capture (one turn on the spot, 6 frames 60 degrees apart): frames 180 degrees apart could come from a turn either
way, so camera_motion never asks about them or offers a turn as a distractor there; with neither a floor plane nor
an axis alignment, the cameras' common up axis is gravity. Truth is the generator's scene description
(``tests/dge/oracle.py``), which knows nothing of the scan's meta file.
"""

import json
import logging

import numpy as np
import pytest

from assets.dge.floor import common_up_from_poses, scan_gravity, up_from_axis_alignment
from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.tasks import GenerationReport, build_scene_tasks
from assets.dge.tasks.facts import UP_UNKNOWN
from assets.dge.visibility import build_frame_visibility
from tests.dge.conftest import generated_world, truth_by_scene
from tests.dge.oracle import AccuracyTable, SceneTruth
from tests.dge.scans import read_sample_scans

logger = logging.getLogger(__name__)

NEEDS_UP = {
    "object_size",
    "attribute_measurement",
    "room_size",
    "relative_direction_scene",
    "camera_object_position",
    "camera_camera_position",
    "camera_camera_elevation",
    "camera_motion",
}
"""Task types whose answer depends on the gravity direction (written out from their wording)."""
HALF_TURN_MARGIN_DEG = 30.0
"""camera_motion asks about no pair of views whose headings differ by more than 180 minus this."""


class NoFloorPlane(SceneGeometrySettings):
    """No plane has the support a floor needs: the floor comes from the scan's gravity, or is a guess."""

    floor_min_support_fraction = 1.01


def _tasks(tables, scene: dict, settings: SceneGeometrySettings, report: GenerationReport):
    geometry = build_scan_geometry(tables.frames, scene, settings)
    visibility = build_frame_visibility(geometry, tables.frames, scene=scene)
    return geometry, build_scene_tasks(geometry.to_row(), visibility, tables.frames, report=report)


def _tilt_deg(world_to_gravity: np.ndarray) -> float:
    """Angle between the gravity frame's z axis and the sample world's true up (its z)."""
    return float(np.degrees(np.arccos(np.clip(world_to_gravity[2, 2], -1.0, 1.0))))


@pytest.fixture(scope="module")
def one_frame_world(tmp_path_factory):
    """Tables and truth of 9 one-frame captures along the loop (256 x 192)."""
    root = generated_world(
        tmp_path_factory,
        "dge_one_frame",
        seed=0,
        num_scenes=9,
        views_per_scene=1,
        width=256,
        height=192,
        camera_path="loop",
    )
    return read_sample_scans(root / "scannet" / "scans"), truth_by_scene(root)


def test_the_scans_meta_file_gives_the_axis_alignment(one_frame_world):
    tables, _ = one_frame_world
    for scene in tables.scenes.iter_rows(named=True):
        assert np.allclose(np.asarray(scene["axis_alignment"]).reshape(4, 4), np.eye(4)), scene["scene_id"]


@pytest.mark.parametrize("source", ["mesh", "instance_masks"])
def test_one_frame_without_a_floor_plane_asks_by_the_axis_alignment_or_withholds_what_needs_up(
    one_frame_world, source
):
    """The same frames with and without the axis alignment, when no plane qualifies as the floor: with it, "up" is
    exact and the up-dependent questions are asked (from the mesh) and right; without it, none of them is asked."""
    tables, truth = one_frame_world
    settings = NoFloorPlane(object_points_source=source)
    tables_by_alignment = {}
    for aligned in (True, False):
        table, report, asked = AccuracyTable(), GenerationReport(), set()
        for scene in tables.scenes.head(3).iter_rows(named=True):
            scene = scene if aligned else {**scene, "axis_alignment": None}
            geometry, tasks = _tasks(tables, scene, settings, report)
            assert geometry.floor_source == ("axis_alignment" if aligned else "fallback")
            if aligned:
                assert _tilt_deg(geometry.world_to_gravity) < 1e-6
            table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene["scene_id"]]))
            asked |= set(tasks["task_type"])
        table.add_withheld(report.withheld)
        tables_by_alignment[aligned] = table
        logger.info("one frame, %s, axis alignment %s\n%s", source, aligned, table.markdown())
        assert not any(table.wrong.values()), (source, aligned, table.examples)
        if aligned:
            # from the masks one frame measures too little to ask a size or a direction
            assert asked & NEEDS_UP or source == "instance_masks", asked
        else:
            assert not asked & NEEDS_UP, asked & NEEDS_UP
            reasons = {reason for by_reason in report.withheld.values() for reason in by_reason}
            assert UP_UNKNOWN in reasons
    assert sum(tables_by_alignment[True].rows.values()) >= sum(tables_by_alignment[False].rows.values())


def test_a_floorless_one_frame_capture_without_the_alignment_withholds_what_needs_up(one_frame_world):
    """With the default settings some single frames show too little floor for a plane along the camera's up (the
    camera looks down, so its up is tilted); without the axis alignment those scans ask nothing that needs up."""
    tables, truth = one_frame_world
    floorless, report, table = 0, GenerationReport(), AccuracyTable()
    for scene in tables.scenes.slice(5, 4).iter_rows(named=True):  # scenes 6 and 8 show too little floor
        scene = {**scene, "axis_alignment": None}
        geometry, tasks = _tasks(tables, scene, SceneGeometrySettings(), report)
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene["scene_id"]]))
        if geometry.floor_source == "fallback":
            floorless += 1
            assert not set(tasks["task_type"]) & NEEDS_UP, scene["scene_id"]
            assert _tilt_deg(geometry.world_to_gravity) > 5.0  # the guess is off
        else:
            assert geometry.floor_source == "ransac" and _tilt_deg(geometry.world_to_gravity) < 2.0
    assert floorless >= 1
    assert not any(table.wrong.values()), table.examples


@pytest.fixture(scope="module")
def lookaround_world(tmp_path_factory):
    """Tables and truth of 3 look-around captures (6 frames, 60 degrees apart, 256 x 192)."""
    root = generated_world(
        tmp_path_factory,
        "dge_lookaround",
        seed=0,
        num_scenes=3,
        views_per_scene=6,
        width=256,
        height=192,
        camera_path="lookaround",
    )
    return read_sample_scans(root / "scannet" / "scans"), truth_by_scene(root)


@pytest.mark.parametrize("source", ["mesh", "instance_masks"])
def test_lookaround_turns_are_asked_below_a_half_turn_and_agree_with_the_oracle(lookaround_world, source):
    """Every answer agrees with the oracle (which counts a rotation within 20 degrees of a half turn as a turn
    either way); camera_motion asks turns, never about views nearly a half turn apart, and offers a turn as a
    distractor only when the camera clearly did not turn that way."""
    tables, truth = lookaround_world
    table, report, turns = AccuracyTable(), GenerationReport(), []
    for scene in tables.scenes.iter_rows(named=True):
        _, tasks = _tasks(tables, scene, SceneGeometrySettings(object_points_source=source), report)
        scene_truth = SceneTruth.from_truth(truth[scene["scene_id"]])
        table.add(tasks.iter_rows(named=True), scene_truth)
        for row in tasks.filter(tasks["task_type"] == "camera_motion").iter_rows(named=True):
            first, second = json.loads(row["facts"])["spec"]["frames"]
            heading = scene_truth.heading(first)
            other = scene_truth.heading(second)
            turn = float(
                np.degrees(np.arctan2(heading[0] * other[1] - heading[1] * other[0], heading @ other))
            )
            turns.append((turn, row["options"][row["answer_index"]], row["options"]))
    table.add_withheld(report.withheld)
    logger.info("look-around, %s\n%s\nturns: %s", source, table.markdown(), turns)
    assert not any(table.wrong.values()), (source, table.wrong, table.examples)
    assert {gold for _, gold, _ in turns} >= {"turned left", "turned right"}
    for turn, _, options in turns:
        assert abs(turn) <= 180.0 - HALF_TURN_MARGIN_DEG + 1.0, (turn, options)
    assert "the headings differ by nearly a half turn" in " ".join(report.withheld["camera_motion"])


def test_lookaround_without_a_floor_plane_or_alignment_takes_up_from_the_cameras(lookaround_world):
    """Cameras that turned on the spot: their horizontal axes span the horizon, and its normal is gravity."""
    tables, truth = lookaround_world
    table, report = AccuracyTable(), GenerationReport()
    for scene in tables.scenes.iter_rows(named=True):
        scene = {**scene, "axis_alignment": None}
        geometry, tasks = _tasks(tables, scene, NoFloorPlane(object_points_source="mesh"), report)
        assert geometry.floor_source == "camera_poses"
        assert _tilt_deg(geometry.world_to_gravity) < 1.0  # pose noise is 0.25 degrees
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene["scene_id"]]))
        assert set(tasks["task_type"]) & NEEDS_UP
    logger.info("look-around, gravity from the cameras\n%s", table.markdown())
    assert not any(table.wrong.values()), table.examples


def _camera(yaw_deg: float, pitch_deg: float, roll_deg: float = 0.0) -> np.ndarray:
    """An OpenCV camera-to-world pose (z up world) looking along yaw, pitched (down < 0) and rolled."""
    yaw, pitch, roll = np.radians([yaw_deg, pitch_deg, roll_deg])
    forward = np.array([np.cos(yaw) * np.cos(pitch), np.sin(yaw) * np.cos(pitch), np.sin(pitch)])
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    rolled_right = np.cos(roll) * right + np.sin(roll) * down
    rolled_down = np.cross(forward, rolled_right)
    pose = np.eye(4)
    pose[:3, :3] = np.column_stack([rolled_right, rolled_down, forward])
    return pose


def test_the_cameras_common_up_axis():
    """Pitched cameras that turned give gravity back to within their roll; one camera, cameras that barely turned,
    or rolled cameras give none."""
    rng = np.random.default_rng(0)
    turned = [_camera(yaw, rng.uniform(-35, -5), rng.normal(0, 0.25)) for yaw in np.linspace(0, 300, 6)]
    up = common_up_from_poses(turned)
    assert np.degrees(np.arccos(up @ [0, 0, 1])) < 0.5
    assert common_up_from_poses(turned[:1]) is None
    assert common_up_from_poses([_camera(0, -30), _camera(12, -10), _camera(20, -25)]) is None
    assert common_up_from_poses([_camera(yaw, -20, rng.normal(0, 8)) for yaw in range(0, 360, 45)]) is None
    # a hand-held walk that turned 40 degrees is enough
    walk = [_camera(yaw, -15, rng.normal(0, 0.5)) for yaw in (0, 10, 25, 40)]
    assert np.degrees(np.arccos(common_up_from_poses(walk) @ [0, 0, 1])) < 3.0


def test_the_axis_alignment_wins_over_the_cameras():
    """ScanNet's axisAlignment maps the world to the aligned frame: its third row is the world's up."""
    tilt = np.radians(10.0)
    alignment = np.eye(4)
    alignment[:3, :3] = [[1, 0, 0], [0, np.cos(tilt), -np.sin(tilt)], [0, np.sin(tilt), np.cos(tilt)]]
    up, source = scan_gravity(alignment, [_camera(yaw, -20) for yaw in range(0, 360, 60)])
    assert source == "axis_alignment" and np.allclose(up, [0, np.sin(tilt), np.cos(tilt)])
    # a world point straight above another along that up is straight above it once aligned
    above = alignment[:3, :3] @ (up_from_axis_alignment(alignment) * 2.0)
    assert np.allclose(above, [0, 0, 2.0])
    assert scan_gravity(None, [_camera(0, -20)]) == (None, "")
