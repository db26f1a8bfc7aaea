"""Rebuilds that run without babysitting: Dagster's declarative automation over the whole graph.

How a change reaches the datasets:

1. The raw folders are observable source assets (:mod:`assets.raw_files`), versioned by content.
   They are observed on the cron ``$SPATIAL_REBUILD_CRON`` (default Sundays 03:00 UTC) by the
   automation sensor and, when ``raw_files_sensor`` is on, seconds after a file under them changed (a
   file watcher) or every 5 minutes (:mod:`pipelines.file_watch`); that sensor also adds every new scan
   folder as a ``scenes`` partition.
2. Every asset carries :data:`REBUILD_WHEN_CHANGED`: it is requested when a dependency was updated
   (a new observed version of its raw files included) or will be requested in the same tick, when its
   own code version changed, or when a partition of it is new. It waits while a dependency is
   missing or in progress; while the latest run of a dependency (of the same partition, for the
   per-scan chain) failed, so nothing is rebuilt on top of an input that failed to rebuild; and while
   a dependency has new inputs of its own that it has not been requested for yet. Dagster requests a
   table in the same tick as its inputs only when one run can build both (the same partitioning), so
   without that last wait ``spatialcore_train`` would be rebuilt from new questions one tick before
   the ``pseudo_gt_boxes`` shards are. The UI's automation tab names the condition that holds an
   asset back; the tables a failed run skipped were requested (and count as handled) and wait for the
   failed table's rebuild: the run-failure alert names them (``held_back_assets``, :mod:`pipelines.alerts`).
3. ``datasets_automation_sensor`` evaluates these conditions (every minute) and launches what a tick
   requested. Dagster puts everything of one tick that shares a partition into one run, so editing
   one scan rebuilds that scan's whole chain (``rgbd_frames`` and ``rgbd_scenes`` to ``dge_tasks``, all
   partitioned by scan) in one run, and leaves the other scans alone. A question edit takes three
   steps: the unpartitioned tables that read the questions directly, then the ``pseudo_gt_boxes``
   shards (one backfill), then the tables built on the shards.
4. Every run the sensor launches is tagged, when it is created, with what started it: ``spatial/trigger``
   (the observable and scan whose content changed or came back, the input tables rebuilt since, ``new
   partition`` or ``code version or retry``) and ``spatial/changed_files`` (the files added, edited and
   deleted; :mod:`pipelines.run_triggers`, :mod:`pipelines.run_coordinator`).

Both sensors start stopped: turn them on in the UI (Automation tab), or with
``dagster sensor start datasets_automation_sensor`` and ``dagster sensor start raw_files_sensor``,
with the Dagster daemon running (``./dev.sh dagster`` runs it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.raw_files import RAW_FILE_KEYS, scan_folders
from assets.resources import SourcesResource, StorageResource
from pipelines.file_watch import SENSOR_TICK_SECONDS, observation_due, raw_file_watcher

OBSERVE_RAW_FILES_JOB = "observe_raw_files_job"
AUTOMATION_SENSOR = "datasets_automation_sensor"
RAW_FILES_SENSOR = "raw_files_sensor"

_UPDATE_TRIGGERS = (
    dg.AutomationCondition.newly_missing()
    | dg.AutomationCondition.code_version_changed()
    | dg.AutomationCondition.any_deps_match(dg.AutomationCondition.code_version_changed())
    | dg.AutomationCondition.any_deps_updated()
)
_NOT_BLOCKED = (
    ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
    & ~dg.AutomationCondition.any_deps_match(
        dg.AutomationCondition.execution_failed() & ~dg.AutomationCondition.will_be_requested()
    ).with_label("an input's latest run failed")
    & ~dg.AutomationCondition.any_deps_match(
        dg.AutomationCondition.any_deps_updated().since_last_handled()
        & ~dg.AutomationCondition.will_be_requested()
    ).with_label("an input is yet to be rebuilt from its own new inputs")
)

# Dagster types since_last_handled's self as a condition of asset or check keys, which this asset-only one
# (code_version_changed) is not under its invariant type parameter; the call is the one Dagster's eager() makes.
REBUILD_WHEN_CHANGED = (_UPDATE_TRIGGERS.since_last_handled() & _NOT_BLOCKED).with_label(  # type: ignore[misc]
    "rebuild when an input, the code or a partition is new"
)
"""The rebuild policy of every asset."""


def with_rebuild_policy(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """``assets`` with the rebuild policy attached to every asset spec (observable sources keep theirs)."""

    return list(
        dg.map_asset_specs(
            lambda spec: spec.replace_attributes(automation_condition=REBUILD_WHEN_CHANGED), assets
        )
    )


_UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def observation_in_flight(instance: dg.DagsterInstance) -> bool:
    """Whether a run of the observation job is queued or running (a new one would only repeat its work)."""
    unfinished = dg.RunsFilter(job_name=OBSERVE_RAW_FILES_JOB, statuses=_UNFINISHED)
    return bool(instance.get_run_ids(filters=unfinished, limit=1))


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
        minimum_interval_seconds=SENSOR_TICK_SECONDS,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Observe the raw folders when a file under them changed (seconds after the edit) or every "
        "5 minutes ($SPATIAL_OBSERVE_INTERVAL_SECONDS), and add new scan folders as scenes partitions.",
    )
    def raw_files_sensor(
        context: dg.SensorEvaluationContext, sources: SourcesResource, storage: StorageResource
    ):
        if observation_in_flight(context.instance):
            return dg.SkipReason("the previous observation of the raw folders is still queued or running")
        # the roots as the last observation request resolved them: a Hub id is resolved (fetched) only then
        last = json.loads(context.cursor) if context.cursor else {}
        now = time.time()
        watcher = raw_file_watcher(Path(root) for root in last.get("roots", []))
        reason = observation_due(last.get("requested_at"), watcher, now)
        if reason is None:
            return dg.SkipReason("no file under the raw folders changed since the last observation")
        roots = [str(root) for paths in sources.raw_inputs(storage).values() for root in paths]
        context.update_cursor(json.dumps({"requested_at": now, "roots": roots}))
        raw_file_watcher(Path(root) for root in roots)  # watching from now on, whatever the roots became
        known = set(context.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))
        new_scenes = [scene for scene in scan_folders(sources, storage) if scene not in known]
        return dg.SensorResult(
            run_requests=[dg.RunRequest(tags={"spatial/trigger": f"{RAW_FILES_SENSOR} ({reason})"})],
            dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(SCENES_PARTITIONS_NAME, new_scenes)]
            if new_scenes
            else [],
        )

    return [observe_job], [automation_sensor, raw_files_sensor]
