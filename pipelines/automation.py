"""Rebuilds that run without babysitting: Dagster's declarative automation over the whole graph.

How a change reaches the datasets:

1. The raw folders are observable source assets (:mod:`assets.raw_files`), versioned by content.
   They are observed on the cron ``$SPATIAL_REBUILD_CRON`` (default Sundays 03:00 UTC) by the
   automation sensor, and every few minutes by ``raw_files_sensor`` when that is on; the sensor also
   adds every new scan folder as a ``scenes`` partition.
2. Every asset carries :data:`REBUILD_WHEN_CHANGED`: it is requested when a dependency was updated
   (a new observed version of its raw files included), when its own code version changed, or when
   a partition of it is new, and never while a dependency is missing or in progress. Per-scan
   assets (the ``scenes`` partitions) react to their own scan's files and to code changes upstream,
   not to every rebuild of the scan tables, so editing one scan rebuilds that scan only
   (:data:`REBUILD_SCAN_WHEN_CHANGED`).
3. ``datasets_automation_sensor`` evaluates these conditions (every minute) and launches the runs,
   partitioned and unpartitioned assets alike.

Both sensors start stopped: turn them on in the UI (Automation tab), or with
``dagster sensor start datasets_automation_sensor`` and ``dagster sensor start raw_files_sensor``,
with the Dagster daemon running (``./dev.sh dagster`` runs it).
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.raw_files import RAW_FILE_KEYS, scan_folders
from assets.resources import SourcesResource, StorageResource

OBSERVE_RAW_FILES_JOB = "observe_raw_files_job"
AUTOMATION_SENSOR = "datasets_automation_sensor"
RAW_FILES_SENSOR = "raw_files_sensor"
SCAN_TABLES = ("rgbd_frames", "rgbd_scenes")

_UPDATE_TRIGGERS = (
    dg.AutomationCondition.newly_missing()
    | dg.AutomationCondition.code_version_changed()
    | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.code_version_changed())
)
_NOT_BLOCKED = (
    ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
)

REBUILD_WHEN_CHANGED = (
    (_UPDATE_TRIGGERS | dg.AutomationCondition.any_deps_updated()).since_last_handled() & _NOT_BLOCKED
).with_label("rebuild when an input, the code or a partition is new")
"""The rebuild policy of every asset that is not per scan."""

REBUILD_SCAN_WHEN_CHANGED = (
    (
        _UPDATE_TRIGGERS
        | dg.AutomationCondition.any_deps_updated().ignore(dg.AssetSelection.assets(*SCAN_TABLES))
    ).since_last_handled()
    & _NOT_BLOCKED
    & ~dg.AutomationCondition.any_deps_match(dg.AutomationCondition.will_be_requested())
).with_label("rebuild a scan when its files, the code or the partition is new")
"""The rebuild policy of the per-scan assets: a rebuild of the scan tables triggered by another scan is
ignored; the scan waits until the tables it reads are rebuilt."""


def with_rebuild_policy(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """``assets`` with the rebuild policy attached to every asset spec (observable sources keep theirs)."""

    def attach(spec: dg.AssetSpec) -> dg.AssetSpec:
        per_scan = spec.partitions_def == scenes_partitions
        return spec.replace_attributes(
            automation_condition=REBUILD_SCAN_WHEN_CHANGED if per_scan else REBUILD_WHEN_CHANGED
        )

    return list(dg.map_asset_specs(attach, assets))


def build_automation() -> tuple[list[dg.JobDefinition | dg.UnresolvedAssetJobDefinition], list]:
    """The observation job and the two sensors, as ``(jobs, sensors)``."""
    observe_job = dg.define_asset_job(
        OBSERVE_RAW_FILES_JOB,
        selection=dg.AssetSelection.assets(*RAW_FILE_KEYS),
        description="Observe the raw folders: record a content version of each (one per scan).",
        executor_def=dg.in_process_executor,  # seconds of work: no process per observable
    )
    automation_sensor = dg.AutomationConditionSensorDefinition(
        AUTOMATION_SENSOR,
        target=dg.AssetSelection.all() | dg.AssetSelection.assets(*RAW_FILE_KEYS),
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Rebuild what changed: new raw-file versions, changed code versions, new scans.",
    )

    @dg.sensor(
        name=RAW_FILES_SENSOR,
        job=observe_job,
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Observe the raw folders every 5 minutes and add new scan folders as scenes partitions.",
    )
    def raw_files_sensor(
        context: dg.SensorEvaluationContext, sources: SourcesResource, storage: StorageResource
    ):
        known = set(context.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))
        new_scenes = [scene for scene in scan_folders(sources, storage) if scene not in known]
        return dg.SensorResult(
            run_requests=[dg.RunRequest(tags={"spatial/trigger": RAW_FILES_SENSOR})],
            dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(SCENES_PARTITIONS_NAME, new_scenes)]
            if new_scenes
            else [],
        )

    return [observe_job], [automation_sensor, raw_files_sensor]
