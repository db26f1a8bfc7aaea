"""Why the automation started a run, as run tags: ``spatial/trigger`` and ``spatial/changed_files``.

A run launched by the automation sensor (``dagster/from_automation_condition``) is tagged when it
starts, from what its tables were last built from (their files' ``input_data_versions``, see
:mod:`assets.provenance`) against what is there now:

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

from assets.provenance import input_data_versions
from assets.raw_files import RAW_FILE_KEYS, last_changed_files
from data_contracts.parquet_files import read_file_metadata
from data_contracts.storage import table_path
from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG, PARTITION_TAG

TRIGGER_TAG = "spatial/trigger"
CHANGED_FILES_TAG = "spatial/changed_files"
AUTOMATION_RUN_TAG = "dagster/from_automation_condition"
_SHOWN_FILES = 5
_RAW_NAMES = {key.to_user_string() for key in RAW_FILE_KEYS}


def run_partitions(tags: dict[str, str]) -> list[str | None]:
    """The partitions of a run whose files say what the run rebuilds: its partition, or the first and last
    of its range; ``[None]`` for an unpartitioned run."""
    if PARTITION_TAG in tags:
        return [tags[PARTITION_TAG]]
    ends = [tags.get(PARTITION_RANGE_START_TAG), tags.get(PARTITION_RANGE_END_TAG)]
    return sorted({key for key in ends if key}) or [None]


def trigger_tags(
    instance: dg.DagsterInstance, asset_keys: Iterable[dg.AssetKey], partitions: list[str | None], root: Path
) -> dict[str, str]:
    """The two tags of a run of ``asset_keys`` over ``partitions``: the inputs whose version differs between
    what the run's files recorded and what a file built now would record (see the module docstring)."""
    changed: set[tuple[str, str | None]] = set()  # (upstream, scan)
    for key in asset_keys:
        for partition in partitions:
            path = table_path(root, "__".join(key.path), partition)
            if not path.is_file():
                continue
            recorded = json.loads(read_file_metadata(path).get("input_data_versions", "{}"))
            upstream = [dg.AssetKey.from_user_string(name) for name in recorded]
            current = input_data_versions(instance, root, upstream, partition)
            changed |= {
                (name, partition if name == "raw_scan_files" else None)
                for name, version in recorded.items()
                if current[name] != version
            }
    raw = sorted((name, scan or "") for name, scan in changed if name in _RAW_NAMES)
    if raw:
        files = [f for name, scan in raw for f in last_changed_files(root, name, scan or None)]
        shown = ", ".join(files[:_SHOWN_FILES]) + (
            f" and {len(files) - _SHOWN_FILES} more" if len(files) > _SHOWN_FILES else ""
        )
        trigger = ", ".join(f"{name}[{scan}]" if scan else name for name, scan in raw)
        return {TRIGGER_TAG: trigger, **({CHANGED_FILES_TAG: shown} if files else {})}
    inputs = sorted(name for name, _ in changed)
    return {TRIGGER_TAG: ", ".join(f"input:{name}" for name in inputs) if inputs else "code or new partition"}


def tag_automation_run(instance: dg.DagsterInstance, run: dg.DagsterRun | None, root: Path) -> None:
    """Add the trigger tags to ``run`` when the automation launched it and it has none yet."""
    if run is None or AUTOMATION_RUN_TAG not in run.tags or TRIGGER_TAG in run.tags:
        return
    tags = trigger_tags(instance, run.asset_selection or [], run_partitions(dict(run.tags)), root)
    instance.add_run_tags(run.run_id, tags)
