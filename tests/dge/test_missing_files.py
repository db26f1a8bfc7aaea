"""Colour and depth files that go missing or get corrupted: every DGE asset quarantines them with a reason.

A scan is built with all its files; then, before ``frame_visibility`` and ``dge_tasks`` run, one
colour image is deleted, one is truncated and one depth image is overwritten with junk. Another
scan loses a colour image before ``scene_geometry`` runs. Every partition must succeed, with the
bad frames in the quarantine tables and no row pointing at them.
"""

import shutil

import dagster as dg
import polars as pl
import pytest

from assets.dge.assets import (
    SCENES_PARTITIONS_NAME,
    dge_tasks_asset,
    frame_visibility_asset,
    scene_geometry_asset,
)
from assets.resources import StorageResource, WorkersResource
from data_contracts.quarantine import Quarantine
from data_contracts.storage import table_path
from data_contracts.validation import check_frame
from pipelines.io_manager import ParquetIOManager
from tests.dge.scans import SCAN_TABLE_SOURCES, read_sample_scans, write_scan_tables

LATE, EARLY = "scene0000_00", "scene0001_00"
SOURCES = SCAN_TABLE_SOURCES


@pytest.fixture(scope="module")
def broken(sample_world, tmp_path_factory):
    """Storage root and materialisation results after files broke between and before the assets."""
    work = tmp_path_factory.mktemp("dge_missing")
    scans = work / "scans"
    shutil.copytree(sample_world / "scannet" / "scans", scans)
    tables = read_sample_scans(scans)
    (
        scans / EARLY / "color" / "1.jpg"
    ).unlink()  # gone after the frames table was read, before scene_geometry
    root = work / "storage"
    write_scan_tables(tables.frames, tables.scenes, root)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, [LATE, EARLY])
    resources = {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "workers": WorkersResource(max_workers=1),
    }
    results = {}
    for key in (LATE, EARLY):
        results[(key, "geometry")] = dg.materialize(
            [scene_geometry_asset, *SOURCES], instance=instance, partition_key=key, resources=resources
        )
    (scans / LATE / "color" / "0.jpg").unlink()
    truncated = scans / LATE / "color" / "2.jpg"
    truncated.write_bytes(truncated.read_bytes()[:200])
    (scans / LATE / "depth" / "3.png").write_bytes(b"not a png")
    for key in (LATE, EARLY):
        results[(key, "rest")] = dg.materialize(
            [frame_visibility_asset, dge_tasks_asset, scene_geometry_asset, *SOURCES],
            selection=[frame_visibility_asset, dge_tasks_asset],
            instance=instance,
            partition_key=key,
            resources=resources,
            raise_on_error=False,
        )
    return root, results


def _reasons(root, asset, key) -> dict[str, str]:
    frame = pl.read_parquet(table_path(root, f"{asset}_quarantine", key))
    assert check_frame(frame, Quarantine).passed
    return {row["record_id"]: row["reason"] for row in frame.iter_rows(named=True)}


def test_every_partition_succeeds(broken):
    _, results = broken
    assert all(result.success for result in results.values())


def test_colour_missing_before_the_geometry_is_quarantined_there(broken):
    root, _ = broken
    reasons = _reasons(root, "scene_geometry", EARLY)
    assert reasons[f"{EARLY}/1"].startswith("missing colour image")
    geometry = pl.read_parquet(table_path(root, "scene_geometry", EARLY)).row(0, named=True)
    assert 1 not in geometry["used_frames"]


def test_depth_broken_after_the_geometry_is_quarantined_by_visibility(broken):
    root, _ = broken
    reasons = _reasons(root, "frame_visibility", LATE)
    assert reasons[f"{LATE}/3"].startswith("unreadable depth image")
    visibility = pl.read_parquet(table_path(root, "frame_visibility", LATE))
    assert 3 not in set(visibility["frame_index"])


def test_colour_broken_after_the_geometry_is_quarantined_by_the_tasks(broken):
    root, _ = broken
    reasons = _reasons(root, "dge_tasks", LATE)
    assert reasons[f"{LATE}/0"].startswith("missing colour image")
    assert reasons[f"{LATE}/2"].startswith("unreadable colour image")
    tasks = pl.read_parquet(table_path(root, "dge_tasks", LATE))
    assert tasks.height > 0
    shown = {frame for frames in tasks["frame_indices"] for frame in frames}
    assert not shown & {0, 2}
