"""A dense capture, as a ScanNet scan is (hundreds of frames a few centimetres apart): its geometry is built from
keyframes spread over the whole capture, and its answers agree with the independent oracle
(``tests/dge/oracle.py``), from both object sources."""

import numpy as np
import pytest

from assets.dge.keyframes import KeyframeSettings
from assets.dge.tasks import GenerationReport
from tests.dge.conftest import generated_world, scene_tasks, truth_by_scene
from tests.dge.oracle import AccuracyTable, SceneTruth
from tests.dge.scans import read_sample_scans

FRAMES = 400


@pytest.fixture(scope="module")
def dense_world(tmp_path_factory):
    """One realistic room walked round by a 400-frame loop (about 4 cm and 1 degree between frames)."""
    return generated_world(
        tmp_path_factory, "dge_dense", seed=3, num_scenes=1, views_per_scene=FRAMES, width=160, height=120
    )


@pytest.fixture(scope="module", params=["mesh", "instance_masks"])
def dense_run(request, dense_world):
    tables = read_sample_scans(dense_world / "scannet" / "scans")
    (scene,) = tables.scenes.iter_rows(named=True)
    report = GenerationReport()
    geometry, _, tasks = scene_tasks(tables.frames, scene, request.param, report)
    truth = SceneTruth.from_truth(truth_by_scene(dense_world)[scene["scene_id"]])
    return request.param, tables.frames, geometry, tasks, truth, report


def test_the_geometry_reads_keyframes_spread_over_the_capture(dense_run):
    _, frames, geometry, _, truth, _ = dense_run
    used = sorted(geometry.used_frames)
    assert frames.height == FRAMES
    assert 20 <= len(used) <= KeyframeSettings().max_keyframes
    positions = np.array([truth.poses[index][:3, 3] for index in sorted(truth.poses)])
    walked = np.linalg.norm(np.diff(positions, axis=0), axis=1)
    # No stretch of the walk between two used frames is longer than a tenth of the whole walk.
    along = np.concatenate([[0.0], np.cumsum(walked)])
    assert np.diff(along[used]).max() <= 0.1 * along[-1]
    assert used[0] == 0 and used[-1] >= FRAMES - 1 - FRAMES // 20


def test_every_answer_agrees_with_the_oracle(dense_run):
    source, _, _, tasks, truth, report = dense_run
    table = AccuracyTable()
    table.add(tasks.iter_rows(named=True), truth)
    table.add_withheld(report.withheld)
    assert sum(table.rows.values()) >= 20, (source, table.markdown())
    assert not any(table.wrong.values()), (source, table.markdown(), table.examples)
