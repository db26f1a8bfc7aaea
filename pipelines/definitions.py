"""The project's one ``Definitions``: every asset, resource, job and sensor.

``dagster dev`` (no flags) and ``dg`` find this module through ``pyproject.toml``. The resources
default to the built-in sample world and the offline backends; the LLM resources name the
environment variable of their key and read it only when an online backend is chosen, so an
offline build needs no key. Point them at real data and real backends in the launchpad's run
configuration (``readers/README.md``, ``model_clients/README.md``). Each LLM resource is its stage's
class (:data:`assets.resources.LLM_RESOURCES`), whose defaults are the stage's provider, model and sampling:
a run config naming the resource with only ``mode`` or ``max_cost_usd`` keeps them.

Every run executes its steps in the run's own process (``in_process_executor``), as ``spatial-build``
does: an automation run of one scan or one table costs seconds instead of a Python process per step,
and the steps that have much to compute spread their partitions over worker processes themselves
(the ``workers`` resource, :mod:`assets.compute`).
"""

import dagster as dg

from assets.dge.assets import DGE_ASSETS
from assets.eval.assets import EVAL_ASSETS
from assets.grounding.assets import GROUNDING_ASSETS
from assets.publish import SHARING_ASSETS
from assets.raw_files import RAW_FILE_ASSETS
from assets.resources import LLM_RESOURCES, SourcesResource, StorageResource, WorkersResource
from assets.sources.assets import SOURCE_ASSETS
from assets.sources.sample_world import sample_world
from assets.stvqa.assets import STVQA_ASSETS
from pipelines.alerts import run_failure_alert_sensor
from pipelines.automation import build_automation, with_rebuild_policy
from pipelines.catalog import with_catalog
from pipelines.io_manager import ParquetIOManager
from pipelines.jobs import build_jobs, build_publish_job
from pipelines.signals import build_signal_checks


def build_resources(storage_root: str | None = None) -> dict:
    """The default resources; ``storage_root`` overrides the storage root for every one of them."""
    return {
        "io_manager": ParquetIOManager(root=storage_root),
        "storage": StorageResource(root=storage_root),
        "sources": SourcesResource(),
        "workers": WorkersResource(),
        **{
            key: resource() for key, resource in LLM_RESOURCES.items()
        },  # caches under the storage resource's root
    }


ALL_ASSETS = with_catalog(
    with_rebuild_policy(
        [sample_world, *SOURCE_ASSETS, *GROUNDING_ASSETS, *STVQA_ASSETS, *DGE_ASSETS, *EVAL_ASSETS]
    )
)
AUTOMATION_JOBS, SENSORS = build_automation()


def build_definitions(storage_root: str | None = None) -> dg.Definitions:
    """Every asset, job and sensor, with the resources of :func:`build_resources`."""
    return dg.Definitions(
        assets=[*with_catalog(RAW_FILE_ASSETS), *ALL_ASSETS, *with_catalog(SHARING_ASSETS)],
        asset_checks=build_signal_checks(ALL_ASSETS),
        jobs=[*build_jobs(ALL_ASSETS), build_publish_job(SHARING_ASSETS), *AUTOMATION_JOBS],
        sensors=[*SENSORS, run_failure_alert_sensor],
        resources=build_resources(storage_root),
        executor=dg.in_process_executor,
    )


defs = build_definitions()
