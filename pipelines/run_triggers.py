"""Why the automation started a run, as run tags: ``spatial/trigger`` and ``spatial/changed_files``.

A run launched by the automation sensor (``dagster/from_automation_condition``) is tagged when it
starts, from what its tables were last built from (their files' ``input_data_versions``, see
:mod:`pipelines.file_metadata`) against what is there now:

- ``spatial/trigger``: the raw-file observables whose content changed, with the scan for a per-scan
  one (``raw_scan_files[scene0000_00]``); else the input tables rebuilt since (``input:mcq_questions``);
  else ``code or new partition`` (a changed code version, a new scan);
- ``spatial/changed_files``: the files of the observables' last change (paths relative to their
  folder; the first five, then how many more), as the observation recorded them
  (:func:`assets.raw_files.last_changed_files`).

The IO manager tags the run when its resources start (:meth:`pipelines.io_manager.ParquetIOManager.setup_for_execution`),
before any table of the run is rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import dagster as dg

from assets.raw_files import RAW_FILE_KEYS, last_changed_files
from data_contracts.parquet_files import DATA_VERSION_KEY, read_file_metadata
from data_contracts.storage import table_path

TRIGGER_TAG = "spatial/trigger"
CHANGED_FILES_TAG = "spatial/changed_files"
AUTOMATION_RUN_TAG = "dagster/from_automation_condition"
_SHOWN_FILES = 5
_RAW_NAMES = {key.to_user_string() for key in RAW_FILE_KEYS}


def run_partitions(tags: dict[str, str]) -> tuple[str, str] | None:
    """The first and last partition key of a run from its tags (None: an unpartitioned run)."""
    if "dagster/partition" in tags:
        return tags["dagster/partition"], tags["dagster/partition"]
    start, end = (
        tags.get("dagster/asset_partition_range_start"),
        tags.get("dagster/asset_partition_range_end"),
    )
    return (start, end) if start and end else None


def _files(root: Path, table: str, partitions: tuple[str, str] | None) -> list[tuple[str | None, Path]]:
    if partitions is None:
        return [(None, table_path(root, table))]
    first, last = partitions
    folder = root / table
    keys = sorted(path.stem for path in folder.glob("*.parquet")) if folder.is_dir() else []
    return [(key, table_path(root, table, key)) for key in keys if first <= key <= last]


def _upstream_file(root: Path, table: str, partition: str | None) -> Path | None:
    """The one file of ``table`` a file of ``partition`` reads: the same partition's, or the table's only file."""
    for path in (table_path(root, table, partition) if partition else None, table_path(root, table)):
        if path is not None and path.is_file():
            return path
    return None


def _observed(instance: dg.DagsterInstance, name: str, partition: str | None) -> str | None:
    scoped = dg.AssetRecordsFilter(
        asset_key=dg.AssetKey(name), asset_partitions=[partition] if partition else None
    )
    records = instance.fetch_observations(scoped, limit=1).records
    return records[0].asset_observation.data_version if records else None


def trigger_tags(
    instance: dg.DagsterInstance,
    asset_keys: Iterable[dg.AssetKey],
    partitions: tuple[str, str] | None,
    root: Path,
) -> dict[str, str]:
    """The two tags of a run of ``asset_keys`` over ``partitions`` (see the module docstring)."""
    raw_changes: set[tuple[str, str | None]] = set()
    rebuilt_inputs: set[str] = set()
    for key in asset_keys:
        for partition, path in _files(root, "__".join(key.path), partitions):
            if not path.is_file():
                continue
            recorded = json.loads(read_file_metadata(path).get("input_data_versions", "{}"))
            for upstream, version in recorded.items():
                if upstream in _RAW_NAMES:
                    scan = partition if upstream == "raw_scan_files" else None
                    if _observed(instance, upstream, scan) != version:
                        raw_changes.add((upstream, scan))
                else:
                    source = _upstream_file(root, upstream, partition)
                    if source is not None and read_file_metadata(source).get(DATA_VERSION_KEY) != version:
                        rebuilt_inputs.add(upstream)
    if raw_changes:
        trigger = ", ".join(
            f"{name}[{scan}]" if scan else name for name, scan in sorted(raw_changes, key=str)
        )
        files = [
            f for name, scan in sorted(raw_changes, key=str) for f in last_changed_files(root, name, scan)
        ]
        shown = ", ".join(files[:_SHOWN_FILES]) + (
            f" and {len(files) - _SHOWN_FILES} more" if len(files) > _SHOWN_FILES else ""
        )
        return {TRIGGER_TAG: trigger, **({CHANGED_FILES_TAG: shown} if files else {})}
    if rebuilt_inputs:
        return {TRIGGER_TAG: ", ".join(f"input:{name}" for name in sorted(rebuilt_inputs))}
    return {TRIGGER_TAG: "code or new partition"}


def tag_automation_run(instance: dg.DagsterInstance, run: dg.DagsterRun | None, root: Path) -> None:
    """Add the trigger tags to ``run`` when the automation launched it and it has none yet."""
    if run is None or AUTOMATION_RUN_TAG not in run.tags or TRIGGER_TAG in run.tags:
        return
    tags = trigger_tags(instance, run.asset_selection or [], run_partitions(dict(run.tags)), root)
    instance.add_run_tags(run.run_id, tags)
