"""The Definitions load; the rebuild schedule and the raw-files sensor request only what changed."""

import os
import time

import dagster as dg
import pytest

from assets.resources import SourcesResource
from pipelines.automation import build_automation
from pipelines.definitions import ALL_ASSETS, build_resources, defs

SOURCE_GROUP_ASSETS = [a for a in ALL_ASSETS if set(a.group_names_by_key.values()) == {"sources"}]
SCHEDULES, SENSORS = build_automation(SOURCE_GROUP_ASSETS)


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    job_names = {job.name for job in defs.jobs}
    assert {"sources_job", "datasets_job"} <= job_names
    assert defs.resolve_job_def("datasets_job") is not None


def test_every_asset_is_documented():
    for assets_def in ALL_ASSETS:
        for key in assets_def.keys:
            assert assets_def.descriptions_by_key.get(key), f"{key.to_user_string()} has no description"


@pytest.fixture(scope="module")
def built(tmp_path_factory, small_world):
    import shutil

    tmp_path = tmp_path_factory.mktemp("built")
    world = tmp_path / "world"
    shutil.copytree(small_world, world)
    small_world = world
    (tmp_path / "dagster_home").mkdir()
    instance = dg.DagsterInstance.local_temp(str(tmp_path / "dagster_home"))
    resources = {
        **build_resources(str(tmp_path)),
        "sources": SourcesResource(
            omnispatial_root=str(small_world / "omnispatial"),
            spatialab_path=str(small_world / "spatialab" / "spatialab.json"),
            visual_genome_root=str(small_world / "visual_genome"),
            scannet_root=str(small_world / "scannet" / "scans"),
        ),
    }
    run_config = {
        "ops": {
            "sample_world": {"config": {"num_scenes": 1, "views_per_scene": 2, "width": 64, "height": 48}}
        }
    }
    result = dg.materialize(
        SOURCE_GROUP_ASSETS, resources=resources, instance=instance, run_config=run_config
    )
    assert result.success
    return instance, resources


def _evaluate_schedule(instance, resources):
    schedule = SCHEDULES[0]
    context = dg.build_schedule_context(
        instance=instance, resources={k: resources[k] for k in ("sources", "storage")}
    )
    return schedule(context)


def test_schedule_skips_when_nothing_changed(built):
    instance, resources = built
    result = _evaluate_schedule(instance, resources)
    assert isinstance(result, dg.SkipReason)


def test_schedule_rebuilds_only_changed_sources(built):
    instance, resources = built
    vg_file = os.path.join(resources["sources"].visual_genome_root, "relationships.json")
    time.sleep(0.01)
    os.utime(vg_file)  # a raw file changed
    request = _evaluate_schedule(instance, resources)
    assert isinstance(request, dg.RunRequest)
    selected = {key.to_user_string() for key in request.asset_selection}
    assert "scene_graphs" in selected
    assert "mcq_questions" not in selected and "rgbd_frames" not in selected


def test_sensor_registers_new_scans(built):
    instance, resources = built
    sensor = SENSORS[0]
    context = dg.build_sensor_context(
        instance=instance, resources={k: resources[k] for k in ("sources", "storage")}
    )
    result = sensor(context)
    added = [key for request in result.dynamic_partitions_requests for key in request.partition_keys]
    assert len(added) == 2  # the small world has two scans
    assert all(r.partition_key in added for r in result.run_requests if r.partition_key)
