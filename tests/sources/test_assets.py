"""The source assets materialised with Dagster into a temporary storage root."""

import dagster as dg
import polars as pl
import pytest

from assets.resources import SourcesResource, StorageResource, WorkersResource
from assets.sources.assets import SOURCE_ASSETS
from data_contracts import scene_graphs
from data_contracts.storage import read_table, table_path
from pipelines.io_manager import ParquetIOManager
from tests.sources.materialize import materialize_sources


def _resources(root, world):
    return {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "sources": SourcesResource(sample_world_root=str(world)),
        "workers": WorkersResource(max_workers=1),
    }


def test_materialize_sources(tmp_path, small_world):
    result, scans = materialize_sources(SOURCE_ASSETS, _resources(tmp_path, small_world))
    assert result.success and scans.success
    for name in ("mcq_questions", "scene_graphs"):
        path = table_path(tmp_path, name)
        assert path.exists()
        assert pl.read_parquet(path).height > 0
    scenes = sorted(path.name for path in (small_world / "scannet" / "scans").iterdir())
    for name in ("rgbd_frames", "rgbd_scenes"):  # one file per scan
        for scene in scenes:
            assert set(pl.read_parquet(table_path(tmp_path, name, scene))["scene_id"]) == {scene}
    checks = [
        check
        for run in (result, scans)
        for check in run.get_asset_check_evaluations()
        if check.check_name == "contract"
    ]
    assert {c.asset_key.to_user_string() for c in checks} == {
        "mcq_questions",
        "mcq_images",
        "scene_graphs",
        "rgbd_frames",
        "rgbd_scenes",
    }
    assert all(c.passed for c in checks)
    materializations = {m.asset_key.to_user_string(): m for m in result.get_asset_materialization_events()}
    metadata = materializations["scene_graphs"].materialization.metadata
    assert metadata["contract_version"].value == scene_graphs.CONTRACT_VERSION
    assert metadata["dagster/row_count"].value == read_table(tmp_path, "scene_graphs").height
    assert "preview_image" in metadata and "data:image/jpeg;base64" in metadata["preview_image"].value


def test_caches_load_with_datasets(tmp_path, small_world):
    import datasets

    assert all(run.success for run in materialize_sources(SOURCE_ASSETS, _resources(tmp_path, small_world)))
    loaded = datasets.load_dataset(
        "parquet", data_files=str(table_path(tmp_path, "mcq_images")), split="train"
    )
    assert loaded[0]["image"].size[0] > 0  # decoded as a PIL image
    questions = datasets.load_dataset(
        "parquet", data_files=str(table_path(tmp_path, "mcq_questions")), split="train"
    )
    assert set(questions["image_sha256"]) == set(loaded["image_sha256"])  # each image stored once


def test_broken_world_keeps_good_rows(tmp_path, world_copy):
    import json

    data = world_copy / "omnispatial" / "data.json"
    records = json.loads(data.read_text())
    records[0]["answer"] = 17
    data.write_text(json.dumps(records))
    result, scans = materialize_sources(SOURCE_ASSETS, _resources(tmp_path, world_copy))
    assert result.success and scans.success
    quarantine = read_table(tmp_path, "mcq_questions_quarantine")
    assert quarantine.height == 1 and "out of range" in quarantine["reason"][0]
    questions = read_table(tmp_path, "mcq_questions")
    spatialab = json.loads((world_copy / "spatialab" / "spatialab.json").read_text())
    assert questions.height == len(records) - 1 + len(spatialab)
    event = next(
        m for m in result.get_asset_materialization_events() if m.asset_key.path == ["mcq_questions"]
    )
    assert event.materialization.metadata["quarantined"].value == 1


def test_missing_folder_fails_with_one_clear_sentence(tmp_path):
    resources = _resources(tmp_path, tmp_path / "absent")
    with pytest.raises(Exception, match="set the config field `omnispatial_root`"):
        dg.materialize([SOURCE_ASSETS[0]], resources=resources)


def test_a_scan_that_gives_no_frame_fails_its_partition_and_keeps_its_files(tmp_path, world_copy):
    import shutil

    resources = _resources(tmp_path, world_copy)
    assert all(run.success for run in materialize_sources(SOURCE_ASSETS[2:], resources))
    scans = world_copy / "scannet" / "scans"
    broken, healthy = sorted(path.name for path in scans.iterdir())
    kept = {name: table_path(tmp_path, name, broken).read_bytes() for name in ("rgbd_frames", "rgbd_scenes")}
    shutil.rmtree(scans / broken)
    (scans / broken).mkdir()  # the folder is there, its files are gone
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("scenes", [broken, healthy])
    result = dg.materialize(
        SOURCE_ASSETS[2:], resources=resources, instance=instance, partition_key=broken, raise_on_error=False
    )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.user_failure_data.description
    assert message.startswith(f"ScanNet scan {broken} at {scans / broken}")
    assert "holds no file" in message  # the first reason says what is wrong
    for name, data in kept.items():  # the previous files are untouched
        assert table_path(tmp_path, name, broken).read_bytes() == data
