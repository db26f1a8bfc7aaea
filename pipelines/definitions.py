"""The project's one ``Definitions``: every asset, resource, job, schedule and sensor.

``dagster dev`` (no flags) and ``dg`` find this module through ``pyproject.toml``. The resources
default to the built-in sample world and the offline backends; point them at real data and real
backends through the launchpad's run config or by editing :func:`build_resources` in a deployment.
"""

import dagster as dg

from assets.sources.assets import SOURCE_ASSETS
from assets.sources.sample_world import sample_world
from pipelines.jobs import sources_job
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

defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=[sources_job],
    resources=build_resources(),
)


def scene_partition_keys(instance: dg.DagsterInstance, storage_root) -> list[str]:
    """Register every scan of ``rgbd_scenes`` as a dynamic partition and return the scene ids."""
    from pipelines.partitions import register_scene_partitions

    return register_scene_partitions(instance, storage_root)
