"""The DGE assets under Dagster: dynamic partitions, failure isolation, quarantine, Parquet outputs."""

import json
import shutil

import dagster as dg
import numpy as np
import polars as pl
import pydantic
import pytest
from PIL import Image

from assets.compute import ComputeSettings
from assets.dge.assets import (
    DGE_ASSETS,
    SCENES_PARTITIONS_NAME,
    DgeImageTasksAssetConfig,
    DgeTasksAssetConfig,
    FrameVisibilityAssetConfig,
    SceneGeometryAssetConfig,
    dge_image_tasks_asset,
    dge_tasks_asset,
    frame_visibility_asset,
    scene_geometry_asset,
)
from assets.dge.geometry import SceneGeometrySettings
from assets.dge.single_image import SingleImageSettings
from assets.dge.tasks import TaskSettings
from assets.dge.visibility import VisibilitySettings
from assets.resources import StorageResource, WorkersResource
from data_contracts import scene_geometry
from data_contracts.dge_tasks import TASK_TYPES, DgeTasks
from data_contracts.frame_visibility import FrameVisibility
from data_contracts.quarantine import Quarantine
from data_contracts.scene_geometry import SceneGeometry
from data_contracts.storage import read_table, table_path, write_table
from data_contracts.validation import check_frame
from pipelines.io_manager import ParquetIOManager
from tests.dge.scans import SCAN_TABLE_SOURCES, read_sample_scans, write_scan_tables

GOOD, DAMAGED, EMPTY = "scene0000_00", "scene0001_00", "scene0099_00"


@pytest.fixture(scope="module")
def materialized(sample_world, tmp_path_factory):
    """Three scans as partitions: one clean, one with three bad frames, one whose depth is all empty."""
    work = tmp_path_factory.mktemp("dge_assets")
    scans = work / "scans"
    shutil.copytree(sample_world / "scannet" / "scans", scans)
    shutil.copytree(scans / GOOD, scans / EMPTY)
    for path in (scans / EMPTY / "depth").glob("*.png"):
        with Image.open(path) as image:
            size = image.size
        Image.fromarray(np.zeros(size[::-1], np.uint16)).save(path)
    tables = read_sample_scans(scans)
    frames = tables.frames
    nan_depth = work / "nan_depth.tiff"
    Image.fromarray(np.full((120, 160), np.nan, np.float32), mode="F").save(nan_depth)
    Image.fromarray(np.zeros((120, 160), np.uint16)).save(work / "empty_depth.png")
    scaled_pose = np.diag([1.0, 1.0, 3.0, 1.0]).reshape(-1).tolist()
    damaged = pl.col("scene_id") == DAMAGED
    frames = frames.with_columns(
        pl.when(damaged & (pl.col("frame_index") == 0))
        .then(pl.lit(str(nan_depth)))
        .when(damaged & (pl.col("frame_index") == 1))
        .then(pl.lit(str(work / "empty_depth.png")))
        .otherwise(pl.col("depth_path"))
        .alias("depth_path"),
        pl.when(damaged & (pl.col("frame_index") == 2))
        .then(pl.lit(scaled_pose, dtype=pl.List(pl.Float64)))
        .otherwise(pl.col("pose"))
        .alias("pose"),
    )
    root = work / "storage"
    write_scan_tables(frames, tables.scenes, root)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, [GOOD, DAMAGED, EMPTY])
    resources = {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "workers": WorkersResource(max_workers=1),
    }
    selection = [
        scene_geometry_asset,
        frame_visibility_asset,
        dge_tasks_asset,
        *SCAN_TABLE_SOURCES,
    ]
    results = {
        key: dg.materialize(
            selection, instance=instance, partition_key=key, resources=resources, raise_on_error=False
        )
        for key in (GOOD, DAMAGED, EMPTY)
    }
    return root, results


def test_good_partitions_succeed_and_the_empty_scan_fails_alone(materialized):
    root, results = materialized
    assert results[GOOD].success and results[DAMAGED].success
    assert not results[EMPTY].success
    failure = next(event for event in results[EMPTY].all_events if event.is_step_failure)
    message = failure.event_specific_data.error.message
    assert f"scene {EMPTY} has no usable frame" in message
    assert not table_path(root, "scene_geometry", EMPTY).exists()
    for asset, contract in (
        ("scene_geometry", SceneGeometry),
        ("frame_visibility", FrameVisibility),
        ("dge_tasks", DgeTasks),
    ):
        for key in (GOOD, DAMAGED):
            frame = pl.read_parquet(table_path(root, asset, key))
            assert frame.height > 0
            assert check_frame(frame, contract).passed, (asset, key)


def test_bad_frames_are_quarantined_and_the_scene_built_from_the_rest(materialized):
    root, _ = materialized
    quarantine = pl.read_parquet(table_path(root, "scene_geometry_quarantine", DAMAGED))
    assert check_frame(quarantine, Quarantine).passed
    reasons = {row["record_id"]: row["reason"] for row in quarantine.iter_rows(named=True)}
    assert reasons[f"{DAMAGED}/0"].startswith("NaN depth")
    assert reasons[f"{DAMAGED}/1"].startswith("empty depth")
    assert reasons[f"{DAMAGED}/2"].startswith("pose is not rigid")
    geometry = pl.read_parquet(table_path(root, "scene_geometry", DAMAGED)).row(0, named=True)
    assert geometry["used_frames"] == [3, 4, 5]
    assert geometry["num_quarantined_frames"] == 3
    visibility = pl.read_parquet(table_path(root, "frame_visibility", DAMAGED))
    assert set(visibility["frame_index"]) <= {3, 4, 5}
    assert pl.read_parquet(table_path(root, "scene_geometry_quarantine", GOOD)).height == 0


def test_metadata(materialized):
    _, results = materialized
    geometry = results[GOOD].asset_materializations_for_node("scene_geometry_asset")
    metadata = next(m for m in geometry if m.asset_key == dg.AssetKey("scene_geometry")).metadata
    assert metadata["contract_version"].value == scene_geometry.CONTRACT_VERSION
    assert metadata["top_down_plot"].value.startswith("![top-down")
    assert metadata["objects"].value > 0
    tasks = results[GOOD].asset_materializations_for_node("dge_tasks_asset")
    task_metadata = next(m for m in tasks if m.asset_key == dg.AssetKey("dge_tasks")).metadata
    distribution = task_metadata["task_types"].value
    assert (
        sum(distribution.values()) == pl.read_parquet(table_path(materialized[0], "dge_tasks", GOOD)).height
    )
    # Every task type has rows or is named missing with the reason; withheld candidates are counted by reason.
    missing = task_metadata["missing_task_types"].value
    assert set(distribution) | set(missing) == set(TASK_TYPES) and not set(distribution) & set(missing)
    assert "camera_motion" in missing  # six views per room are too far apart for a clear motion
    assert all(sum(reasons.values()) > 0 for reasons in task_metadata["withheld"].value.values())
    checks = results[GOOD].get_asset_check_evaluations()
    assert checks and all(check.passed for check in checks)


def test_partitioned_read_back(materialized):
    root, _ = materialized
    tasks = read_table(root, "dge_tasks", [GOOD, DAMAGED])
    assert set(tasks["scene_id"]) == {GOOD, DAMAGED}
    assert tasks["task_id"].n_unique() == tasks.height
    assert set(tasks["origin"]) == {"sample_world"}  # the scans' rgbd_frames.origin


def test_image_tasks_asset(tmp_path):
    from tests.dge.test_single_image import _depth_file, _scene_graphs

    write_table(_scene_graphs(), table_path(tmp_path, "scene_graphs"))
    depth_dir = tmp_path / "depth"
    depth_dir.mkdir()
    _depth_file(depth_dir)
    resources = {
        "io_manager": ParquetIOManager(root=str(tmp_path)),
        "storage": StorageResource(root=str(tmp_path)),
    }
    selection = [dge_image_tasks_asset, dg.SourceAsset("scene_graphs")]
    config = dg.RunConfig({"dge_image_tasks_asset": {"config": {"depth_dir": str(depth_dir)}}})
    result = dg.materialize(selection, resources=resources, run_config=config)
    assert result.success
    tasks = pl.read_parquet(table_path(tmp_path, "dge_image_tasks"))
    assert tasks.height > 0 and set(tasks["geometry_source"]) == {"estimated"}
    assert json.loads(tasks["facts"][0])["provenance"]["depth_kind"] == "file"
    unconfigured = dg.materialize(selection, resources=resources)
    assert unconfigured.success
    assert pl.read_parquet(table_path(tmp_path, "dge_image_tasks")).height == 0


def test_definitions_load_with_the_source_assets(tmp_path):
    from assets.resources import SourcesResource
    from assets.sources.assets import SOURCE_ASSETS
    from assets.sources.sample_world import sample_world

    defs = dg.Definitions(
        assets=[sample_world, *SOURCE_ASSETS, *DGE_ASSETS],
        resources={
            "io_manager": ParquetIOManager(root=str(tmp_path)),
            "storage": StorageResource(root=str(tmp_path)),
            "workers": WorkersResource(max_workers=1),
            "sources": SourcesResource(),
        },
    )
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert dg.AssetKey("rgbd_frames") in graph.get(dg.AssetKey("scene_geometry")).parent_keys
    assert graph.get(dg.AssetKey("dge_tasks")).partitions_def.name == SCENES_PARTITIONS_NAME


# The run configuration of each DGE asset: what a user sets per data set in the launchpad (sources, strides, depth
# range, sizes, task types, split, seeds; scene_geometry also where it runs). Everything else is a constant of the
# method: a class attribute of the settings, read the same way, but not run configuration.
RUN_CONFIG_FIELDS = {
    SceneGeometryAssetConfig: (
        (SceneGeometrySettings, ComputeSettings),
        {
            "object_points_source",
            "pixel_stride",
            "min_depth_m",
            "max_depth_m",
            "store_cloud_colors",
            "min_object_points",
            "max_stored_points",
            "seed",
            "max_keyframes",
            *ComputeSettings.model_fields,
        },
    ),
    FrameVisibilityAssetConfig: (
        VisibilitySettings,
        {"boxes_from_instance_masks", "visibility_from_mesh", "mesh_rays_per_frame"},
    ),
    DgeTasksAssetConfig: (
        TaskSettings,
        {
            "task_types",
            "max_tasks_per_type",
            "max_images",
            "excluded_labels",
            "test_fraction",
            "image_max_side",
            "seed",
        },
    ),
    DgeImageTasksAssetConfig: (
        SingleImageSettings,
        {
            "depth_dir",
            "depth_scale",
            "depth_model_path",
            "depth_model_output",
            "device",
            "horizontal_fov_deg",
            "model_validity",
            "min_validity",
            "max_tasks_per_type",
        },
    ),
}

# Former run-config fields that are now constants of the method, with the values they always had.
CONSTANTS_OF_THE_METHOD = {
    SceneGeometryAssetConfig: {
        "scene_voxel_size_m": 0.03,
        "object_voxel_size_m": 0.015,
        "stored_cloud_voxel_m": 0.05,
        "mesh_sample_spacing_m": 0.015,
        "floor_distance_threshold_m": 0.02,
        "floor_ransac_iterations": 500,
        "dbscan_eps_m": 0.08,
        "mask_top_quantile": 0.25,
        "depth_noise_base_m": 0.0012,
    },
    FrameVisibilityAssetConfig: {
        "depth_tolerance_m": 0.03,
        "depth_tolerance_relative": 0.01,
        "self_occlusion_radius_m": 0.05,
        "occluded_below": 0.95,
    },
    DgeTasksAssetConfig: {
        "min_visibility": 0.5,
        "distance_margin_m": 0.15,
        "depth_margin_m": 0.15,
        "direction_margin_deg": 15.0,
        "visibility_margin": 0.2,
    },
    DgeImageTasksAssetConfig: {"box_core_fraction": 0.5},
}


@pytest.mark.parametrize("config_class", list(RUN_CONFIG_FIELDS), ids=lambda c: c.__name__)
def test_run_configs_are_the_stage_settings_fields(config_class):
    settings_classes, fields = RUN_CONFIG_FIELDS[config_class]
    settings_classes = settings_classes if isinstance(settings_classes, tuple) else (settings_classes,)
    assert set(config_class.model_fields) == fields
    # The config adds no knob of its own: its fields are the settings' fields, with the same defaults.
    assert set(config_class.model_fields) == {name for cls in settings_classes for name in cls.model_fields}
    config = config_class()
    defaults = {}
    for settings_class in settings_classes:
        assert isinstance(config, settings_class)
        defaults.update(settings_class().model_dump())
    assert config.model_dump() == defaults
    assert all(config_class.model_fields[name].description for name in fields)


@pytest.mark.parametrize("config_class", list(CONSTANTS_OF_THE_METHOD), ids=lambda c: c.__name__)
def test_constants_of_the_method_are_read_from_the_config_but_not_set_in_it(config_class):
    config = config_class()
    for name, value in CONSTANTS_OF_THE_METHOD[config_class].items():
        assert name not in config_class.model_fields
        assert getattr(config, name) == value, name
        with pytest.raises(pydantic.ValidationError, match=name):
            config_class(**{name: value})
