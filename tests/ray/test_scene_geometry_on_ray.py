"""Scan geometry as a Ray task gives local mode's ``scene_geometry`` row and quarantine, even when its worker dies.

The small world's scans are read with the project's reader; one colour image is deleted after the
frames table was read, so the build quarantines a frame. Each scan is built in the process
(``compute: local``) and as a Ray task on a real local cluster: the Parquet bytes of the two rows and
the quarantine rows must be equal. Then the worker running the task is killed by its PID (found by the
process title Ray gives a running task) once, in the middle of the build; Ray reruns the task and the
result is again local mode's, with its quarantine rows once, not twice.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest

from assets.compute import ComputeSettings
from assets.dge.geometry import SceneBuildError, SceneGeometrySettings
from assets.dge.scan_compute import SCAN_GEOMETRY_TASK, run_scan_geometry
from data_contracts.quarantine import QuarantineLog
from pipelines.cli import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from readers.scannet import ScanNetTables, read_scannet
from tests.ray.conftest import parquet_bytes

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = ComputeSettings(compute="ray", max_retries=2)
BROKEN_SCENE = "scene0001_00"


@pytest.fixture(scope="module")
def scans(small_world, tmp_path_factory) -> ScanNetTables:
    """The small world's scan tables, read before one colour image of the second scan went missing."""
    root = tmp_path_factory.mktemp("ray_scans") / "scans"
    shutil.copytree(small_world / "scannet" / "scans", root)
    tables = read_scannet(root)
    (root / BROKEN_SCENE / "color" / "1.jpg").unlink()
    return tables


@pytest.fixture(autouse=True)
def single_open3d_thread():
    """Run open3d on one thread in this process, as the Ray task does (one CPU reserved)."""
    import open3d as o3d

    previous = o3d.utility.get_max_threads()
    o3d.utility.set_max_threads(1)
    yield
    o3d.utility.set_max_threads(previous)


def _build(scans: ScanNetTables, scene: dict, compute: ComputeSettings) -> tuple[bytes, list[dict]]:
    log = QuarantineLog("scene_geometry")
    geometry = run_scan_geometry(scans.frames, scene, SceneGeometrySettings(), compute, log)
    return parquet_bytes(geometry.to_frame()), log.rows


def test_scene_geometry_on_ray_is_byte_equal_to_local(ray_local_cluster, scans):
    scenes = list(scans.scenes.iter_rows(named=True))
    assert {scene["scene_id"] for scene in scenes} >= {BROKEN_SCENE}
    for scene in scenes:
        local = _build(scans, scene, ComputeSettings())
        remote = _build(scans, scene, RAY)
        assert remote[0] == local[0], f"{scene['scene_id']}: the rows differ"
        assert remote[1] == local[1], f"{scene['scene_id']}: the quarantines differ"
        if scene["scene_id"] == BROKEN_SCENE:  # the quarantine crossed the process boundary
            assert [row["record_id"] for row in local[1]] == [f"{BROKEN_SCENE}/1"]


def test_a_remote_scene_build_error_arrives_as_itself(ray_local_cluster, scans):
    scene = {"scene_id": "scene9999_00", "objects": []}
    with pytest.raises(SceneBuildError, match="scene9999_00 has no usable frame"):
        run_scan_geometry(scans.frames, scene, SceneGeometrySettings(), RAY)


def _task_pids() -> list[int]:
    """PIDs of the Ray workers now running the scan geometry task (Ray titles them ``ray::<task>``)."""
    title = f"ray::{SCAN_GEOMETRY_TASK}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(title):
                    pids.append(int(entry.name))
            except OSError:  # the process ended while being read
                continue
    return pids


def test_a_worker_killed_mid_scan_is_retried_and_nothing_is_lost_or_duplicated(
    ray_local_cluster, scans, tmp_path
):
    scene = next(row for row in scans.scenes.iter_rows(named=True) if row["scene_id"] == BROKEN_SCENE)
    local = _build(scans, scene, ComputeSettings())
    marker = tmp_path / "killed"
    done = threading.Event()

    def kill_the_first_worker() -> None:
        while not done.is_set():
            pids = _task_pids()
            if pids:
                time.sleep(0.2)  # into the build
                os.kill(pids[0], signal.SIGKILL)
                marker.write_text(str(pids[0]))
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_worker)
    killer.start()
    try:
        remote = _build(scans, scene, RAY)
    finally:
        done.set()
        killer.join()
    assert marker.exists(), "no worker was killed: the test did not test a retry"
    assert remote == local


def _materialize_scene_geometry(
    scans: ScanNetTables, root: Path, scene_id: str | list[str], config: dict
) -> None:
    """Materialise ``scene_geometry`` for one scan, or for a list of scans as one range run."""
    import dagster as dg

    from assets.dge.assets import SCENES_PARTITIONS_NAME, scene_geometry_asset
    from assets.resources import StorageResource
    from data_contracts.storage import table_path, write_table
    from pipelines.io_manager import ParquetIOManager

    write_table(scans.frames, table_path(root, "rgbd_frames"))
    write_table(scans.scenes, table_path(root, "rgbd_scenes"))
    scene_ids = scene_id if isinstance(scene_id, list) else [scene_id]
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, scene_ids)
    selection = (
        {"partition_key": scene_ids[0]}
        if len(scene_ids) == 1
        else {
            "tags": {
                ASSET_PARTITION_RANGE_START_TAG: scene_ids[0],
                ASSET_PARTITION_RANGE_END_TAG: scene_ids[-1],
            }
        }
    )
    result = dg.materialize(
        [scene_geometry_asset, dg.SourceAsset("rgbd_frames"), dg.SourceAsset("rgbd_scenes")],
        instance=instance,
        **selection,
        resources={
            "io_manager": ParquetIOManager(root=str(root)),
            "storage": StorageResource(root=str(root)),
        },
        run_config={"ops": {"scene_geometry_asset": {"config": config}}},
    )
    assert result.success


def test_the_asset_with_compute_ray_writes_the_files_of_local_mode(ray_local_cluster, scans, tmp_path):
    from data_contracts.storage import table_path

    _materialize_scene_geometry(scans, tmp_path / "local", BROKEN_SCENE, {})
    _materialize_scene_geometry(scans, tmp_path / "ray", BROKEN_SCENE, {"compute": "ray"})
    for table in ("scene_geometry", "scene_geometry_quarantine"):
        local = table_path(tmp_path / "local", table, BROKEN_SCENE).read_bytes()
        remote = table_path(tmp_path / "ray", table, BROKEN_SCENE).read_bytes()
        assert remote == local, f"{table} differs"


def test_a_range_run_submits_every_scan_at_once_and_writes_the_files_of_local_mode(
    ray_local_cluster, scans, tmp_path, caplog
):
    """A backfill of several scans is one run: with ``compute: ray`` all its scans go to the cluster together."""
    from data_contracts.storage import table_path

    scene_ids = sorted(scans.scenes["scene_id"].to_list())
    assert len(scene_ids) >= 2
    _materialize_scene_geometry(scans, tmp_path / "local", scene_ids, {})
    with caplog.at_level("INFO", logger="assets.dge.scan_compute"):
        _materialize_scene_geometry(scans, tmp_path / "ray", scene_ids, {"compute": "ray"})
    assert f"submitted {len(scene_ids)} scans as Ray tasks" in caplog.text
    for scene_id in scene_ids:
        for table in ("scene_geometry", "scene_geometry_quarantine"):
            local = table_path(tmp_path / "local", table, scene_id).read_bytes()
            remote = table_path(tmp_path / "ray", table, scene_id).read_bytes()
            assert remote == local, f"{table} of {scene_id} differs"
