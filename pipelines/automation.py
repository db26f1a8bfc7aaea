"""Schedules and sensors that keep the datasets fresh without babysitting.

- ``datasets_rebuild_schedule`` (cron from ``$SPATIAL_REBUILD_CRON``, default Sundays 03:00 UTC):
  rebuilds the unpartitioned assets whose code or raw inputs changed since their last
  materialisation (nothing runs when nothing changed).
- ``raw_files_sensor`` (every 5 minutes): notices new or changed raw files, requests the same
  selective rebuild, and registers new RGB-D scans as ``scenes`` partitions with a run for each.

Both start stopped; turn them on in the UI (Automation tab) or with ``dagster schedule start``.
"""

import json
import os

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.resources import SourcesResource, StorageResource
from pipelines.freshness import source_fingerprints, stale_asset_keys

REBUILD_CRON_ENV = "SPATIAL_REBUILD_CRON"
DEFAULT_REBUILD_CRON = "0 3 * * 0"
REBUILD_JOB_NAME = "datasets_job"
SCENES_JOB_NAME = "dge_job"


def build_automation(all_assets) -> tuple[list, list]:
    """The schedule and sensor for ``all_assets`` (returned as ``(schedules, sensors)``)."""

    @dg.schedule(
        name="datasets_rebuild_schedule",
        cron_schedule=os.environ.get(REBUILD_CRON_ENV, DEFAULT_REBUILD_CRON),
        job_name=REBUILD_JOB_NAME,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description="Rebuild the datasets whose code or raw inputs changed.",
    )
    def datasets_rebuild_schedule(
        context: dg.ScheduleEvaluationContext, sources: SourcesResource, storage: StorageResource
    ):
        stale = stale_asset_keys(context.instance, all_assets, source_fingerprints(sources, storage))
        if not stale:
            return dg.SkipReason("every dataset is up to date with its code and raw inputs")
        return dg.RunRequest(
            run_key=None, asset_selection=sorted(stale, key=str), tags={"spatial/trigger": "schedule"}
        )

    @dg.sensor(
        name="raw_files_sensor",
        job_name=REBUILD_JOB_NAME,
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Rebuild what reads raw files that appeared or changed; add new scans as partitions.",
    )
    def raw_files_sensor(
        context: dg.SensorEvaluationContext, sources: SourcesResource, storage: StorageResource
    ):
        fingerprints = source_fingerprints(sources, storage)
        previous = json.loads(context.cursor) if context.cursor else {}
        scans_root = sources.scannet(storage)
        scene_ids = sorted(p.name for p in scans_root.iterdir() if p.is_dir()) if scans_root.is_dir() else []
        known = set(context.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))
        new_scenes = [scene for scene in scene_ids if scene not in known]
        run_requests = []
        if fingerprints != previous.get("fingerprints"):
            stale = stale_asset_keys(context.instance, all_assets, fingerprints)
            if stale:
                run_requests.append(
                    dg.RunRequest(
                        asset_selection=sorted(stale, key=str), tags={"spatial/trigger": "raw_files"}
                    )
                )
        run_requests.extend(
            dg.RunRequest(job_name=SCENES_JOB_NAME, partition_key=scene) for scene in new_scenes
        )
        cursor = json.dumps({"fingerprints": fingerprints}, sort_keys=True)
        return dg.SensorResult(
            run_requests=run_requests,
            cursor=cursor,
            dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest(SCENES_PARTITIONS_NAME, new_scenes)]
            if new_scenes
            else [],
        )

    return [datasets_rebuild_schedule], [raw_files_sensor]
