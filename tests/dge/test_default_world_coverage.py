"""The default world's mixed capture paths ask every DGE task type and every answer value, checked against the oracle.

The default world (``camera_path="mixed"``, the ``sample_world`` asset's default) takes the loop, the hand-held
path, the partial capture and the look-around in turn. Here it is 12 scenes of 6 frames as by default, at 256 x 192
(the default is 320 x 240), with objects from the segmented mesh as the default build has them. The answer values
are written out from the task wording (as the oracle is), not imported from the task code.
"""

import json
import logging
import math
from collections import Counter

import polars as pl
import pytest

from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.tasks import GenerationReport, build_scene_tasks
from assets.dge.visibility import build_frame_visibility
from assets.sample_world.config import DEFAULT_WORLD_CAMERA_PATH, SampleWorldConfig
from assets.sample_world.generator import generate_sample_world
from tests.dge.oracle import COVERED, AccuracyTable, SceneTruth
from tests.dge.scans import read_sample_scans

logger = logging.getLogger(__name__)

DIRECTIONS = {"in front", "behind", "to the left", "to the right"}
ANSWER_VALUES = {
    "camera_object_position": DIRECTIONS,
    "camera_camera_position": DIRECTIONS,
    "camera_motion": {
        "moved forward",
        "moved backward",
        "moved left",
        "moved right",
        "turned left",
        "turned right",
    },
    "relative_direction_scene": {"front-left", "front-right", "back-left", "back-right"},
    "relative_direction_image": {"left", "right"},
    "camera_camera_elevation": {"higher", "lower"},
    "visibility_comparison": {"image 1", "image 2"},
    "camera_region_position": {
        f"{row} {column}" for row in ("top", "middle", "bottom") for column in ("left", "centre", "right")
    },
}
"""Every answer a question of these types can have."""
MAX_ANSWER_SHARE = 0.5
"""Most share of a scene's questions of one type with the same answer value (TaskSettings.max_answer_share)."""


@pytest.fixture(scope="module")
def default_world(tmp_path_factory):
    """The default world's root, truth by scene and tables."""
    root = tmp_path_factory.mktemp("dge_default_world") / "sample_world"
    generate_sample_world(
        SampleWorldConfig(
            root=root, width=256, height=192, camera_path=DEFAULT_WORLD_CAMERA_PATH, show_progress=False
        )
    )
    truth = json.loads((root / "truth" / "world.json").read_text())
    truth = {scene["scene_id"]: scene for scene in truth["scenes"]}
    return truth, read_sample_scans(root / "scannet" / "scans")


def _run(default_world, source: str) -> tuple[pl.DataFrame, AccuracyTable]:
    truth, tables = default_world
    table, report, frames = AccuracyTable(), GenerationReport(), []
    for scene in tables.scenes.iter_rows(named=True):
        geometry = build_scan_geometry(
            tables.frames, scene, SceneGeometrySettings(object_points_source=source)
        )
        visibility = build_frame_visibility(geometry, tables.frames, scene=scene)
        tasks = build_scene_tasks(geometry.to_row(), visibility, tables.frames, report=report)
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene["scene_id"]]))
        frames.append(tasks)
    table.add_withheld(report.withheld)
    logger.info("default world (mixed paths, %s)\n%s", source, table.markdown())
    return pl.concat(frames), table


@pytest.fixture(scope="module")
def default_world_run(default_world):
    """The default world's tasks from the segmented mesh (every scene) with the oracle's table."""
    return _run(default_world, "mesh")


def _answer(row: dict):
    """The answer value a question is balanced over: the gold option, or the count."""
    return row["options"][row["answer_index"]] if row["options"] else row["numeric_answer"]


def test_every_task_type_and_answer_value_is_asked(default_world_run):
    tasks, _ = default_world_run
    assert set(tasks["task_type"]) == set(COVERED)
    asked: dict[str, set] = {}
    for row in tasks.iter_rows(named=True):
        asked.setdefault(row["task_type"], set()).add(_answer(row) if row["options"] else None)
    logger.info("answer values: %s", {name: sorted(asked[name]) for name in ANSWER_VALUES})
    for task_type, values in ANSWER_VALUES.items():
        assert asked[task_type] == values, (task_type, values - asked[task_type])


def test_no_answer_value_holds_more_than_its_share_of_a_scenes_questions(default_world_run):
    """Per scene and task type, no answer value (an option, or a count) holds more than half of the questions
    emitted; measured numbers are not limited."""
    tasks, _ = default_world_run
    groups = 0
    for (scene_id, task_type), rows in tasks.group_by(["scene_id", "task_type"]):
        values = Counter(
            _answer(row) for row in rows.iter_rows(named=True) if row["options"] or not row["unit"]
        )
        if values:
            groups += 1
            assert max(values.values()) <= MAX_ANSWER_SHARE * sum(values.values()), (
                scene_id,
                task_type,
                values,
            )
    assert groups >= 100


def test_every_answer_agrees_with_the_oracle(default_world_run):
    _, table = default_world_run
    assert sum(table.rows.values()) >= 400
    assert not any(table.wrong.values()), (table.wrong, table.examples)


LETTERS = "ABCD"


def test_gold_letters_are_spread_uniformly_per_task_type(default_world_run):
    """Per multiple-choice task type, each letter holds the answer about as often as a uniform placement gives: the
    sum of 1/n over the questions with n options that offer it, within 3 binomial standard deviations (and one
    question); "A" over every type within 3 standard deviations too."""
    tasks, _ = default_world_run
    pooled = [0, 0.0, 0.0]  # answers at "A", expected, variance
    distribution = {}
    for (task_type,), rows in tasks.filter(tasks["options"].list.len() > 1).group_by(["task_type"]):
        observed, expected, variance = Counter(), Counter(), Counter()
        for row in rows.iter_rows(named=True):
            count = len(row["options"])
            observed[row["answer_index"]] += 1
            for letter in range(count):
                expected[letter] += 1 / count
                variance[letter] += (1 / count) * (1 - 1 / count)
        distribution[task_type] = {
            LETTERS[letter]: f"{observed[letter]} ({expected[letter]:.1f})" for letter in sorted(expected)
        }
        for letter in expected:
            bound = 3 * math.sqrt(variance[letter]) + 1
            assert abs(observed[letter] - expected[letter]) <= bound, (task_type, distribution[task_type])
        pooled = [pooled[0] + observed[0], pooled[1] + expected[0], pooled[2] + variance[0]]
    logger.info("gold letters per task type, observed (uniform expectation): %s", distribution)
    assert len(distribution) >= 10
    assert abs(pooled[0] - pooled[1]) <= 3 * math.sqrt(pooled[2]), pooled


def test_every_answer_from_the_instance_masks_agrees_with_the_oracle(default_world):
    """From the instance masks too (a shelf fused from one side panel, its box short of what its masks show, is
    withheld from measured distances)."""
    tasks, table = _run(default_world, "instance_masks")
    assert tasks.height >= 300
    assert not any(table.wrong.values()), (table.wrong, table.examples)
