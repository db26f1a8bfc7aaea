"""What the IO manager writes into each Parquet file's key-value metadata: what wrote it, and from what.

Each table file the asset graph writes says, in its own footer (so a copy of the file still says it,
with no Dagster instance at hand; read it with :func:`data_contracts.storage.read_table_metadata`):

- ``contract_version``: the version of the table's contract, as ``finalize_table`` (or the
  quarantine output) put it in the output's metadata;
- ``code_version``: the code version of the asset that wrote it;
- ``input_data_versions``: JSON ``{upstream asset: version}`` of every upstream asset, for what this
  file was built from (see below);
- ``source_fingerprint``: the first 16 hex digits of the SHA-256 of that JSON;
- ``data_version``: a hash of the three above: the version of this file's content, which the files
  built from it record as their input version.

The versions are content-based and per file, so they chain from the raw bytes to every table:

- an observable raw-file source (:mod:`assets.raw_files`) contributes the content version of its
  latest observation, for a partitioned one (``raw_scan_files``) the observation of the file's own
  partition (its scan);
- an upstream table contributes the ``data_version`` in the footer of the file(s) this file was built
  from: the same partition's file when both are partitioned alike (a scan's ``rgbd_frames`` for its
  ``scene_geometry``), the one file of an unpartitioned table, or a hash over every partition's file
  when an unpartitioned table reads a partitioned one (``spatialcore_train`` from the
  ``pseudo_gt_boxes`` shards);
- any other upstream asset (the sample world, which writes folders) contributes the data version of
  its latest materialization.

Editing one scan therefore changes the fingerprint of that scan's files, and of nothing else; a
question edit changes every file built from ``mcq_questions``. Moving or copying the data folder
changes nothing (the raw-file versions hash paths relative to their roots). How a file was built (a
range run or one partition at a time) does not change its versions.

Only documented APIs are used: the output context's ``asset_spec`` (dependencies, code version), the
instance's observation and materialization records, and the upstream files' footers.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable
from pathlib import Path

import dagster as dg

from assets.raw_files import RAW_FILE_KEYS
from data_contracts.parquet_files import DATA_VERSION_KEY, read_file_metadata
from data_contracts.storage import table_path

logger = logging.getLogger(__name__)

DAGSTER_DATA_VERSION_TAG = (
    "dagster/data_version"  # the tag Dagster stores a materialization's data version in
)


def _text(value: object) -> str | None:
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    return None if raw is None else str(raw)


def fingerprint(versions: dict[str, object]) -> str:
    """16 hex digits of the SHA-256 of ``versions`` as sorted JSON.

    >>> fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    True
    >>> len(fingerprint({}))
    16
    """
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def _file_version(path: Path) -> str | None:
    return read_file_metadata(path).get(DATA_VERSION_KEY) if path.is_file() else None


def _table_version(root: Path, table: str, partition: str | None) -> str | None:
    """The data version of what a file of ``partition`` (None: unpartitioned) read of upstream ``table``;
    None when the upstream writes no table."""
    if partition is not None and table_path(root, table, partition).is_file():
        return _file_version(table_path(root, table, partition))
    if table_path(root, table).is_file():
        return _file_version(table_path(root, table))
    folder = root / table
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if not files:
        return None
    return fingerprint({path.stem: _file_version(path) for path in files})


def _observed_version(instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None) -> str | None:
    """The data version of the latest observation of source ``key`` (of ``partition`` when it has one)."""
    records = instance.fetch_observations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None), limit=1
    ).records
    return records[0].asset_observation.data_version if records else None


def _materialized_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    records = instance.fetch_materializations(key, limit=1).records
    return (records[0].asset_materialization.tags or {}).get(DAGSTER_DATA_VERSION_TAG) if records else None


def input_data_versions(
    instance: dg.DagsterInstance, root: Path, upstream: Iterable[dg.AssetKey], partition: str | None
) -> dict[str, str | None]:
    """``{upstream asset: version}`` for a file of ``partition`` built now from ``upstream`` (see the module
    docstring)."""
    versions: dict[str, str | None] = {}
    for key in sorted(upstream, key=lambda key: key.to_user_string()):
        if key in RAW_FILE_KEYS:
            version = _observed_version(instance, key, partition)
        else:
            version = _table_version(root, "__".join(key.path), partition)
            if version is None:
                version = _materialized_version(instance, key)
        versions[key.to_user_string()] = version
    return versions


def file_key_value_metadata(
    context: dg.OutputContext, instance: dg.DagsterInstance | None, root: Path, partition: str | None
) -> dict[str, str]:
    """The key-value metadata of the file of ``partition`` of the output ``context`` describes.

    Entries that cannot be known (an output context built by hand, with no asset or no instance; an
    output without a contract version in its metadata) are left out.
    """
    metadata: dict[str, str] = {}
    contract_version = _text(context.output_metadata.get("contract_version"))
    if contract_version is None:
        contract_version = _text(context.definition_metadata.get("contract_version"))
    if contract_version is not None:
        metadata["contract_version"] = contract_version
    if not context.has_asset_key or instance is None:
        return metadata
    code_version = context.asset_spec.code_version
    if code_version is not None:
        metadata["code_version"] = code_version
    versions = input_data_versions(
        instance, root, [dep.asset_key for dep in context.asset_spec.deps], partition
    )
    metadata["input_data_versions"] = json.dumps(versions, sort_keys=True)
    metadata["source_fingerprint"] = fingerprint(versions)
    metadata[DATA_VERSION_KEY] = fingerprint(
        {"code_version": code_version, "contract_version": contract_version, "inputs": versions}
    )
    return metadata
