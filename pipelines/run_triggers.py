"""Why the automation started a run, as run tags: ``spatial/trigger`` and ``spatial/changed_files``.

A run launched by the automation sensor (``dagster/from_automation_condition``) is tagged from what its
tables were last built from (their files' ``input_data_versions``, see :mod:`assets.provenance`) against
what is there now:

- ``spatial/trigger``: the raw-file observables whose content changed, with the scan for a per-scan
  one (``raw_scan_files[scene0000_00]``); else an observable whose files changed and came back to what the
  tables were built from since they were written (``raw_scan_files[scene0000_00] restored``, the rebuild
  after a failed one); else the input tables rebuilt since (``input:mcq_questions``); else ``new
  partition`` (no table file yet) or ``code version or retry`` (inputs unchanged);
- ``spatial/changed_files``: the files added, edited and deleted between the two versions (``added a;
  edited b, c; deleted d``, paths relative to their folder, five per kind then how many more), from the
  observations' recorded history (:meth:`assets.raw_files.FileHashCache.record_change`).

The tags are set when the run is created: the instance's run coordinator
(:class:`pipelines.run_coordinator.TaggingRunCoordinator`, named by the shipped ``dagster.yaml``) tags the
run before it is queued. Where an instance has another coordinator, the IO manager tags the run when its
resources start (:meth:`pipelines.io_manager.ParquetIOManager.setup_for_execution`), before any table of
the run is rewritten.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.provenance import input_data_versions
from assets.raw_files import RAW_FILE_KEYS, FileChanges, changes_between, recorded_history
from data_contracts.parquet_files import read_file_metadata
from data_contracts.storage import table_path
from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG, PARTITION_TAG

TRIGGER_TAG = "spatial/trigger"
CHANGED_FILES_TAG = "spatial/changed_files"
AUTOMATION_RUN_TAG = "dagster/from_automation_condition"
_SHOWN_FILES = 5
_RAW_NAMES = {key.to_user_string() for key in RAW_FILE_KEYS}


def run_partitions(instance: dg.DagsterInstance, tags: dict[str, str]) -> Sequence[str | None]:
    """The partitions of a run whose files say what the run rebuilds: its partition; every scan of a range of
    scans (in the scans' partition order, which defines the range); the first and last key of another range
    (the shards of a question edit, which share their trigger); ``[None]`` for an unpartitioned run."""
    if PARTITION_TAG in tags:
        return [tags[PARTITION_TAG]]
    start, end = tags.get(PARTITION_RANGE_START_TAG), tags.get(PARTITION_RANGE_END_TAG)
    if not start or not end:
        return sorted({key for key in (start, end) if key}) or [None]
    scans = instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME)
    if start in scans and end in scans:
        return scans[scans.index(start) : scans.index(end) + 1]
    return sorted({start, end})


def trigger_tags(
    instance: dg.DagsterInstance,
    asset_keys: Iterable[dg.AssetKey],
    partitions: Sequence[str | None],
    root: Path,
) -> dict[str, str]:
    """The two tags of a run of ``asset_keys`` over ``partitions``: the inputs whose version differs between
    what the run's files recorded and what a file built now would record (see the module docstring)."""
    changed: dict[tuple[str, str | None], tuple[str | None, str | None]] = {}  # (upstream, scan): versions
    restored: dict[tuple[str, str | None], FileChanges] = {}
    table_files = 0
    for key in asset_keys:
        for partition in partitions:
            path = table_path(root, "__".join(key.path), partition)
            if not path.is_file():
                continue
            table_files += 1
            recorded = json.loads(read_file_metadata(path).get("input_data_versions", "{}"))
            upstream = [dg.AssetKey.from_user_string(name) for name in recorded]
            current = input_data_versions(instance, root, upstream, partition)
            for name, version in recorded.items():
                scan = partition if name == "raw_scan_files" else None
                if current[name] != version:
                    changed[(name, scan)] = (version, current[name])
                elif name in _RAW_NAMES and (back := _restored_since(root, name, scan, version, path)):
                    restored[(name, scan)] = back
    raw = sorted((name, scan or "") for name, scan in changed if name in _RAW_NAMES)
    if raw:
        files = FileChanges()
        for name, scan in raw:
            history = recorded_history(root, name, scan or None)
            files += changes_between(history, *changed[(name, scan or None)])
        trigger = ", ".join(f"{name}[{scan}]" if scan else name for name, scan in raw)
        return {TRIGGER_TAG: trigger, **({CHANGED_FILES_TAG: files.describe(_SHOWN_FILES)} if files else {})}
    if restored:
        files = FileChanges()
        for changes in restored.values():
            files += changes
        trigger = ", ".join(
            f"{name}[{scan}] restored" if scan else f"{name} restored" for name, scan in sorted(restored)
        )
        return {TRIGGER_TAG: trigger, CHANGED_FILES_TAG: files.describe(_SHOWN_FILES)}
    inputs = sorted(name for name, _ in changed)
    if inputs:
        return {TRIGGER_TAG: ", ".join(f"input:{name}" for name in inputs)}
    return {TRIGGER_TAG: "code version or retry" if table_files else "new partition"}


def _restored_since(
    root: Path, observable: str, scan: str | None, version: str, table_file: Path
) -> FileChanges:
    """The change that brought ``observable`` back to ``version`` after ``table_file`` was written (its files
    changed and came back: the tables were built from this content, a build from the other failed), if any."""
    history = recorded_history(root, observable, scan)
    if history and history[0].version == version and history[0].observed_at > table_file.stat().st_mtime:
        return history[0].changes
    return FileChanges()


def tag_automation_run(instance: dg.DagsterInstance, run: dg.DagsterRun | None, root: Path) -> None:
    """Add the trigger tags to ``run`` when the automation launched it and it has none yet."""
    if run is None or AUTOMATION_RUN_TAG not in run.tags or TRIGGER_TAG in run.tags:
        return
    tags = trigger_tags(instance, run.asset_selection or [], run_partitions(instance, dict(run.tags)), root)
    instance.add_run_tags(run.run_id, tags)
