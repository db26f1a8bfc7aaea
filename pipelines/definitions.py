"""The project's one ``Definitions``: every asset, resource, job, schedule and sensor.

``dagster dev`` (no flags) and ``dg`` find this module through ``pyproject.toml``. The resources
default to the built-in sample world and the offline backends; point them at real data and real
backends in the launchpad's run configuration (see the README).
"""

from pathlib import Path

import dagster as dg

from assets.sources.assets import SOURCE_ASSETS
from assets.sources.sample_world import sample_world
from pipelines.automation import build_automation
from pipelines.jobs import build_jobs
from pipelines.partitions import register_scene_partitions
from pipelines.resources import SourcesResource, StorageResource
from pipelines.storage import ParquetIOManager


def build_resources(storage_root: str | None = None) -> dict:
    """The default resources; ``storage_root`` overrides the storage root for every one of them."""
    return {
        "io_manager": ParquetIOManager(root=storage_root),
        "storage": StorageResource(root=storage_root),
        "sources": SourcesResource(),
    }


ALL_ASSETS = [sample_world, *SOURCE_ASSETS]
SCHEDULES, SENSORS = build_automation(ALL_ASSETS)

defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=build_jobs(ALL_ASSETS),
    schedules=SCHEDULES,
    sensors=SENSORS,
    resources=build_resources(),
)


def scene_partition_keys(instance: dg.DagsterInstance, storage_root: str | Path) -> list[str]:
    """Register every scan of ``rgbd_scenes`` as a ``scenes`` partition and return the scene ids."""
    return register_scene_partitions(instance, storage_root)
