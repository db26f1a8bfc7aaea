"""A scan's ``scene_geometry`` partition as a Ray task gives local mode's row and quarantine, even when its worker dies.

The small world's scans are read with the project's reader; one colour image is deleted after the
frames table was read, so the build quarantines a frame. Each scan's partition is built in the process
(``compute: local``) and as a Ray task on a real local cluster (:func:`assets.compute.partition_results`):
the Parquet bytes of the two tables must be equal. Then the worker running the task is killed by its PID (found by the
process title Ray gives a running task) once, in the middle of the build; Ray reruns the task and the
result is again local mode's, with its quarantine rows once, not twice.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.compute import ComputeSettings, partition_results
from assets.dge.assets import scene_geometry_partition
from assets.dge.geometry import SceneGeometrySettings
from assets.partition_ranges import restore_events
from pipelines.cli import partition_range_tags
from readers.scan_tables import ScanTables
from readers.scannet import read_scannet
from tests.ray.conftest import first_task_killed, output_plans, scan_files, written_files

pytestmark = [pytest.mark.ray, pytest.mark.slow]

RAY = ComputeSettings(compute="ray", max_retries=2)
BROKEN_SCENE = "scene0001_00"


@pytest.fixture(scope="module")
def scans(small_world, tmp_path_factory) -> ScanTables:
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


def _build(
    scans: ScanTables, scene: dict, compute: ComputeSettings, storage: Path
) -> tuple[bytes, pl.DataFrame]:
    """One scan's ``scene_geometry`` partition where ``compute`` says: its file's bytes, its quarantine."""
    scene_id = scene["scene_id"]
    scenes = pl.DataFrame([scene], schema=scans.scenes.schema)
    scenes_file, frames_file = scan_files(scans.frames, scenes, scene_id, storage)
    plans = output_plans(storage, "scene_geometry", "scene_geometry_quarantine")
    arguments = {scene_id: (scene_id, scenes_file, frames_file, SceneGeometrySettings(), storage, plans)}
    with partition_results(scene_geometry_partition, arguments, workers=1, compute=compute) as result:
        files = written_files(restore_events(result(scene_id)))
    return files["scene_geometry"].read_bytes(), pl.read_parquet(files["scene_geometry_quarantine"])


def test_scene_geometry_on_ray_is_byte_equal_to_local(ray_local_cluster, scans, tmp_path):
    scenes = list(scans.scenes.iter_rows(named=True))
    assert {scene["scene_id"] for scene in scenes} >= {BROKEN_SCENE}
    for scene in scenes:
        local = _build(scans, scene, ComputeSettings(), tmp_path / "local")
        remote = _build(scans, scene, RAY, tmp_path / "ray")
        assert remote[0] == local[0], f"{scene['scene_id']}: the rows differ"
        assert remote[1].equals(local[1]), f"{scene['scene_id']}: the quarantines differ"
        if scene["scene_id"] == BROKEN_SCENE:  # the quarantine crossed the process boundary
            assert local[1]["record_id"].to_list() == [f"{BROKEN_SCENE}/1"]


def test_a_remote_scene_build_error_arrives_as_itself(ray_local_cluster, scans, tmp_path):
    scene = {"scene_id": "scene9999_00", "objects": []}
    with pytest.raises(dg.Failure, match="scene9999_00 has no usable frame"):
        _build(scans, scene, RAY, tmp_path)


def test_a_worker_killed_mid_scan_is_retried_and_nothing_is_lost_or_duplicated(
    ray_local_cluster, scans, tmp_path
):
    scene = next(row for row in scans.scenes.iter_rows(named=True) if row["scene_id"] == BROKEN_SCENE)
    local = _build(scans, scene, ComputeSettings(), tmp_path / "local")
    with first_task_killed(scene_geometry_partition.__name__, after_s=0.2) as killed:
        remote = _build(scans, scene, RAY, tmp_path / "ray")
    assert killed, "no worker was killed: the test did not test a retry"
    assert remote[0] == local[0] and remote[1].equals(local[1])


def _materialize_scene_geometry(
    scans: ScanTables, root: Path, scene_id: str | list[str], config: dict
) -> None:
    """Materialise ``scene_geometry`` for one scan, or for a list of scans, as one range run."""
    from assets.dge.assets import SCENES_PARTITIONS_NAME, scene_geometry_asset, scenes_partitions
    from assets.resources import StorageResource, WorkersResource
    from pipelines.io_manager import ParquetIOManager

    scene_ids = scene_id if isinstance(scene_id, list) else [scene_id]
    for each in scene_ids:
        scan_files(scans.frames, scans.scenes, each, root)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, scene_ids)
    result = dg.materialize(
        [
            scene_geometry_asset,
            dg.SourceAsset("rgbd_frames", partitions_def=scenes_partitions),
            dg.SourceAsset("rgbd_scenes", partitions_def=scenes_partitions),
        ],
        instance=instance,
        tags=partition_range_tags(scene_ids[0], scene_ids[-1]),
        resources={
            "io_manager": ParquetIOManager(root=str(root)),
            "storage": StorageResource(root=str(root)),
            "workers": WorkersResource(max_workers=1),
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
    with caplog.at_level("INFO", logger="assets.compute"):
        _materialize_scene_geometry(scans, tmp_path / "ray", scene_ids, {"compute": "ray"})
    assert f"submitted {len(scene_ids)} partitions as Ray tasks" in caplog.text
    for scene_id in scene_ids:
        for table in ("scene_geometry", "scene_geometry_quarantine"):
            local = table_path(tmp_path / "local", table, scene_id).read_bytes()
            remote = table_path(tmp_path / "ray", table, scene_id).read_bytes()
            assert remote == local, f"{table} of {scene_id} differs"
