"""The DGE on the realistic sample world, checked against the independent oracle (``tests/dge/oracle.py``).

The scans carry depth noise and holes, pose registration errors and an over-segmented mesh with
annotated room surfaces; truth is the generator's exact scene description. Both object sources
are checked: the segmented mesh and the instance masks.
"""

import logging

import numpy as np
import pytest

from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.tasks import GenerationReport
from assets.dge.tasks.answers import size_problem
from assets.dge.tasks.settings import TaskSettings
from tests.dge.conftest import generated_world, object_fact, scene_tasks, truth_by_scene
from tests.dge.oracle import COVERED, AccuracyTable, SceneTruth
from tests.dge.scans import read_sample_scans

logger = logging.getLogger(__name__)

THIN_TOLERANCE = 0.05
MAX_WRONG_SHARE = {"mesh": 0.05, "instance_masks": 0.15}
SIZE_TYPES = ("object_size", "attribute_measurement", "room_size")
"""Answers measured from the fused geometry's extents (held to MAX_WRONG_SHARE and the room-size test)."""
GENERATION_REPORTS: dict = {}
"""Per object source, the generation report (candidates, withheld by reason) of ``realistic_run``."""


@pytest.fixture(scope="module", params=["mesh", "instance_masks"])
def realistic_run(request, realistic_world):
    """Per object source: geometry, visibility and tasks of every realistic scene, with the truth."""
    source = request.param
    tables = read_sample_scans(realistic_world / "scannet" / "scans")
    scenes = {}
    report = GenerationReport()
    for scene in tables.scenes.iter_rows(named=True):
        scenes[scene["scene_id"]] = scene_tasks(tables.frames, scene, source, report)
    GENERATION_REPORTS[source] = report
    return source, scenes, truth_by_scene(realistic_world)


THIN_CATEGORIES = ("lamp", "chair", "shelf")
"""Objects with thin parts: a 3 cm lamp pole under its shade, chair legs under the seat, a shelf's boards."""


def _true_extents(item: dict) -> np.ndarray:
    """The generator's own box of an object: (longer, shorter horizontal extent, height)."""
    extents = np.asarray(item["extents"], dtype=np.float64)
    return np.array([max(extents[:2]), min(extents[:2]), extents[2]])


def test_thin_objects_measure_within_5_percent(realistic_run):
    """Lamps, chairs (legs) and shelves against the generator's boxes: every extent within 5% from both sources (from
    the instance masks a round shade's silhouette leaves stray points outside it, which the box's unfaced ends
    leave out, see assets.dge.objects.outward_surface_edge)."""
    source, scenes, truth = realistic_run
    errors = {}
    for scene_id, (geometry, _, _) in scenes.items():
        measured = {obj.object_id: obj for obj in geometry.objects}
        for item in truth[scene_id]["objects"]:
            if item["category"] not in THIN_CATEGORIES:
                continue
            obj = measured[item["object_id"]]
            extents = np.array([max(obj.obb_extents[:2]), min(obj.obb_extents[:2]), obj.obb_extents[2]])
            errors[(scene_id, item["name"])] = (extents - _true_extents(item)) / _true_extents(item)
    logger.info(
        "%s thin objects, relative error (length, width, height):\n%s",
        source,
        "\n".join(f"{name}: {np.round(100 * error, 1).tolist()} %" for name, error in errors.items()),
    )
    assert {name.split()[-1] for _, name in errors} == set(THIN_CATEGORIES)
    for (scene_id, name), error in errors.items():
        assert np.all(np.abs(error) <= THIN_TOLERANCE), (source, scene_id, name, error)


def test_the_floor_and_the_walls_appear_in_frame_visibility(realistic_run):
    source, scenes, _ = realistic_run
    if source != "mesh":
        pytest.skip("the instance masks do not label the room's surfaces")
    for geometry, visibility, _ in scenes.values():
        labels = {obj.object_id: obj.label for obj in geometry.objects}
        seen = {labels[object_id] for object_id in visibility["object_id"]}
        assert {"floor", "wall"} <= seen
        floor_rows = visibility.filter(visibility["label"] == "floor")
        assert floor_rows.height >= len(geometry.used_frames) // 2
        assert float(floor_rows["visibility_ratio"].max()) > 0.5


def _table(realistic_run) -> tuple[str, AccuracyTable]:
    source, scenes, truth = realistic_run
    table = AccuracyTable()
    for scene_id, (_, _, tasks) in scenes.items():
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene_id]))
    table.add_withheld(GENERATION_REPORTS[source].withheld)
    logger.info("%s\n%s", source, table.markdown())
    return source, table


def test_every_answer_but_the_sizes_agrees_with_the_oracle(realistic_run):
    source, table = _table(realistic_run)
    report = GENERATION_REPORTS[source]
    wrong = {
        task_type: count for task_type, count in table.wrong.items() if task_type not in SIZE_TYPES and count
    }
    assert not wrong, (source, wrong, table.examples)
    # Every task type has rows, or the generation names it as missing with the reason.
    missing = report.missing(list(COVERED))
    assert set(COVERED) - set(table.rows) == set(missing), (source, missing)
    assert len(table.rows) >= 13, (source, missing)


def test_answers_agree_with_the_oracle(realistic_run):
    source, table = _table(realistic_run)
    total = sum(count for task_type, count in table.rows.items() if task_type != "room_size")
    wrong = sum(count for task_type, count in table.wrong.items() if task_type != "room_size")
    assert total > 20
    assert wrong <= MAX_WRONG_SHARE[source] * total, table.examples


def test_room_size_agrees_with_the_oracle(realistic_run):
    _, table = _table(realistic_run)
    assert table.rows.get("room_size", 0) > 0 and table.wrong.get("room_size", 0) == 0


def test_sizes_agree_with_the_oracle(realistic_run):
    """Room, object and attribute sizes: no wrong answer from either object source (badly measured objects are
    withheld by their size uncertainty, see assets/dge/confidence.py)."""
    source, table = _table(realistic_run)
    for task_type in SIZE_TYPES:
        assert table.rows.get(task_type, 0) > 0, (source, task_type)
        assert table.wrong.get(task_type, 0) == 0, (source, task_type, table.examples)


def test_centroids_within_5_cm(realistic_run):
    source, scenes, truth = realistic_run
    for scene_id, (geometry, _, _) in scenes.items():
        measured = {obj.object_id: obj for obj in geometry.objects}
        for item in truth[scene_id]["objects"]:
            centre = (
                geometry.world_to_gravity[:3, :3] @ np.asarray(item["centroid"])
                + geometry.world_to_gravity[:3, 3]
            )
            assert np.linalg.norm(measured[item["object_id"]].centroid - centre) <= 0.05, (
                source,
                item["name"],
            )


MORE_WORLD_SEEDS = (1, 2)
"""Two more realistic worlds with the test world's settings, for the thin objects' measurement."""


@pytest.fixture(scope="module", params=MORE_WORLD_SEEDS)
def more_world(request, tmp_path_factory):
    """Root and truth of a realistic world like ``realistic_world`` (two scenes, 12 views), seeded ``request.param``."""
    root = generated_world(
        tmp_path_factory,
        f"dge_realistic_seed{request.param}",
        seed=request.param,
        num_scenes=2,
        views_per_scene=12,
        camera_path="loop",
    )
    return request.param, root, truth_by_scene(root)


@pytest.mark.parametrize("source", ["mesh", "instance_masks"])
def test_thin_objects_on_more_worlds_measure_within_5_percent_or_are_withheld(more_world, source):
    """On two more worlds every thin object from the mesh is within 5% in every extent; from the instance masks each one
    is within 5% or its measurement confidence withholds it from every size question (assets.dge.tasks.answers.
    size_problem with the largest extent, the least strict size), so no size answer rests on a bad box."""
    seed, root, truth = more_world
    tables = read_sample_scans(root / "scannet" / "scans")
    settings = TaskSettings()
    within, withheld = [], []
    for scene in tables.scenes.iter_rows(named=True):
        geometry = build_scan_geometry(
            tables.frames, scene, SceneGeometrySettings(object_points_source=source)
        )
        measured = {obj.object_id: obj for obj in geometry.objects}
        for item in truth[scene["scene_id"]]["objects"]:
            if item["category"] not in THIN_CATEGORIES:
                continue
            obj = measured[item["object_id"]]
            extents = np.array([max(obj.obb_extents[:2]), min(obj.obb_extents[:2]), obj.obb_extents[2]])
            error = (extents - _true_extents(item)) / _true_extents(item)
            if np.all(np.abs(error) <= THIN_TOLERANCE):
                within.append(item["name"])
                continue
            fact = object_fact(obj)
            assert source == "instance_masks", (seed, scene["scene_id"], item["name"], error)
            assert size_problem(fact, float(extents.max()), settings), (
                seed,
                scene["scene_id"],
                item["name"],
                error,
            )
            withheld.append(item["name"])
    logger.info("seed %s, %s: within 5%%: %s; off but withheld: %s", seed, source, within, withheld)
    assert len(within) >= 3 * len(withheld) and within, (seed, source, within, withheld)


NECKED_CATEGORIES = ("bottle",)
"""Objects whose top is too thin for the depth (a bottle's neck, 1-2 depth pixels wide) but not for the masks."""


def _necked_errors(root, truth, source: str) -> dict[str, tuple[float, float]]:
    """Per necked object of a world: (relative height error, centre height error in metres)."""
    tables = read_sample_scans(root / "scannet" / "scans")
    errors = {}
    for scene in tables.scenes.iter_rows(named=True):
        geometry = build_scan_geometry(
            tables.frames, scene, SceneGeometrySettings(object_points_source=source)
        )
        measured = {obj.object_id: obj for obj in geometry.objects}
        for item in truth[scene["scene_id"]]["objects"]:
            if item["category"] in NECKED_CATEGORIES and item["object_id"] in measured:
                obj = measured[item["object_id"]]
                centre = (
                    geometry.world_to_gravity[:3, :3] @ np.asarray(item["centroid"])
                    + geometry.world_to_gravity[:3, 3]
                )
                height = float(item["extents"][2])
                errors[f"{scene['scene_id']} {item['name']}"] = (
                    (float(obj.obb_extents[2]) - height) / height,
                    float(obj.centroid[2] - centre[2]),
                )
    return errors


def _assert_necks_measured(errors: dict[str, tuple[float, float]], where: str) -> None:
    logger.info("%s, necked objects (height error, centre height error m): %s", where, errors)
    for name, (height_error, centre_error) in errors.items():
        assert abs(height_error) <= 0.12 and abs(centre_error) <= 0.02, (
            where,
            name,
            height_error,
            centre_error,
        )


def test_bottle_necks_the_depth_misses_are_measured_from_the_masks(realistic_world):
    """From the instance masks, a bottle's height and centre come from its masks' tops where the fused depth lost
    the neck (before: the test world's bottle 30% short, its centre 3.3 cm low)."""
    errors = _necked_errors(realistic_world, truth_by_scene(realistic_world), "instance_masks")
    assert len(errors) == 1
    _assert_necks_measured(errors, "seed 0")


def test_bottle_necks_on_more_worlds(more_world):
    """As above on the worlds of MORE_WORLD_SEEDS (before: seed 2's bottles 12-25% short, centres 3-4 cm low, and one
    table-to-bottle distance wrong on a third scene)."""
    seed, root, truth = more_world
    errors = _necked_errors(root, truth, "instance_masks")
    if not errors:
        pytest.skip(f"seed {seed}'s rooms have no bottle")
    _assert_necks_measured(errors, f"seed {seed}")


HANDHELD_SEED = 0
"""Seed of the hand-held test world (2 scenes, 24 frames each, 256x192)."""
ANSWERS_ONLY_A_HANDHELD_PATH_ASKS = {
    "camera_motion": {"turned left", "turned right", "moved forward", "moved backward"},
    "camera_camera_position": {"behind"},
}
"""Answer values that the default loop around the walls never asks (no camera turns in place or stands behind another)."""


@pytest.fixture(scope="module")
def handheld_world(tmp_path_factory):
    """Root and truth of a realistic world whose cameras follow the hand-held path (pans in place, walks across)."""
    root = generated_world(
        tmp_path_factory,
        "dge_handheld",
        seed=HANDHELD_SEED,
        num_scenes=2,
        views_per_scene=24,
        width=256,
        height=192,
        camera_path="handheld",
    )
    return root, truth_by_scene(root)


@pytest.mark.parametrize("source", ["mesh", "instance_masks"])
def test_handheld_turns_and_cameras_behind_are_asked_and_agree_with_the_oracle(handheld_world, source):
    """On the hand-held path, camera_motion asks "turned left/right" and camera_camera_position "behind"; every answer
    (sizes included) agrees with the oracle, from both object sources."""
    root, truth = handheld_world
    tables = read_sample_scans(root / "scannet" / "scans")
    table, report = AccuracyTable(), GenerationReport()
    asked: dict[str, set[str]] = {task_type: set() for task_type in ANSWERS_ONLY_A_HANDHELD_PATH_ASKS}
    for scene in tables.scenes.iter_rows(named=True):
        _, _, tasks = scene_tasks(tables.frames, scene, source, report)
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene["scene_id"]]))
        for row in tasks.iter_rows(named=True):
            if row["task_type"] in asked:
                asked[row["task_type"]].add(row["options"][row["answer_index"]])
    table.add_withheld(report.withheld)
    logger.info("hand-held, %s\n%s\nanswer values: %s", source, table.markdown(), asked)
    for task_type, values in ANSWERS_ONLY_A_HANDHELD_PATH_ASKS.items():
        assert values <= asked[task_type], (source, task_type, asked[task_type])
    assert not any(table.wrong.values()), (source, table.wrong, table.examples)
    assert all(table.rows.get(task_type, 0) >= 4 for task_type in ANSWERS_ONLY_A_HANDHELD_PATH_ASKS)
