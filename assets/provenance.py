"""Where each table file comes from, written into its own footer, by whichever process writes the file.

Each table file the asset graph writes says, in its Parquet key-value metadata (so a copy of the file still
says it, with no Dagster instance at hand; read it with :func:`data_contracts.storage.read_table_metadata`):

- ``contract_version``: the version of the table's contract, as ``finalize_table`` (or the quarantine
  output) put it in the output's metadata;
- ``code_version``: the code version of the asset that wrote it;
- ``input_data_versions``: JSON ``{upstream asset: version}`` of every upstream asset, for what this file
  was built from (see below);
- ``source_fingerprint``: the first 16 hex digits of the SHA-256 of that JSON;
- ``data_version``: a hash of the three above: the version of this file's content, which the files built
  from it record as their input version.

The versions are content-based and per file, so they chain from the raw bytes to every table:

- an observable raw-file source (:mod:`assets.raw_files`) contributes the content version of its latest
  observation, for a partitioned one (``raw_scan_files``) the observation of the file's own partition (its
  scan);
- an upstream table contributes the ``data_version`` in the footer of the file(s) this file was built from:
  the same partition's file when both are partitioned alike (a scan's ``rgbd_frames`` for its
  ``scene_geometry``), the one file of an unpartitioned table, or a hash over every partition's file when an
  unpartitioned table reads a partitioned one (``spatialcore_train`` from the ``pseudo_gt_boxes`` shards);
- any other upstream asset (the sample world, which writes folders) contributes the data version of its
  latest materialization.

Editing one scan therefore changes the fingerprint of that scan's files, and of nothing else; a question
edit changes every file built from ``mcq_questions``. Moving or copying the data folder changes nothing (the
raw-file versions hash paths relative to their roots). How a file was built (a range run or one partition at
a time, in a worker or in the run's process) does not change its versions.

A step's files are written where its partitions are computed: :func:`table_file_plans` gathers, in the run's
process and with one query per raw observable for all of the run's partitions, what only the Dagster instance
knows; the :class:`TableFilePlan` it gives for each output travels to the worker, which reads the upstream
footers itself, writes the file (:meth:`TableFilePlan.write`, or streamed with :meth:`TableFilePlan.writer`)
and hands on a :class:`~data_contracts.storage.WrittenTable` (:func:`write_outputs`). The rows never pass
through the run's process. Only documented Dagster APIs are used: the asset definition's specs (dependencies,
code versions) and the instance's observation and materialization records.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets.raw_files import RAW_FILE_ASSETS
from data_contracts.parquet_files import DATA_VERSION_KEY, ParquetTableWriter, read_file_metadata
from data_contracts.storage import WrittenTable, table_path, table_writer, write_table

DAGSTER_DATA_VERSION_TAG = (
    "dagster/data_version"  # the tag Dagster stores a materialization's data version in
)
_PARTITIONED_RAW = {asset.key: asset.partitions_def is not None for asset in RAW_FILE_ASSETS}
_QUERY_CHUNK = 500


def fingerprint(versions: Mapping[str, object]) -> str:
    """16 hex digits of the SHA-256 of ``versions`` as sorted JSON.

    >>> fingerprint({"b": "2", "a": "1"}) == fingerprint({"a": "1", "b": "2"})
    True
    >>> len(fingerprint({}))
    16
    """
    return hashlib.sha256(json.dumps(versions, sort_keys=True).encode()).hexdigest()[:16]


def table_name(key: dg.AssetKey) -> str:
    """The storage name of an asset's table (``__``-joined key path)."""
    return "__".join(key.path)


def _file_version(path: Path) -> str | None:
    return read_file_metadata(path).get(DATA_VERSION_KEY) if path.is_file() else None


def table_version(root: Path, table: str, partition: str | None) -> str | None:
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


def _writes_tables(root: Path, table: str) -> bool:
    folder = root / table
    return table_path(root, table).is_file() or (
        folder.is_dir() and next(folder.glob("*.parquet"), None) is not None
    )


def observed_versions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions: Iterable[str | None]
) -> dict[str | None, str | None]:
    """The data version of the latest observation of source ``key`` for each of ``partitions`` (``None``
    for an unpartitioned source), read in a few queries whatever the number of partitions."""
    wanted = list(dict.fromkeys(partitions))
    if not _PARTITIONED_RAW.get(key, False):
        records = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=key), limit=1).records
        version = _observed_version(records[0]) if records else None
        return dict.fromkeys(wanted, version)
    found: dict[str | None, str | None] = {}
    keys = [partition for partition in wanted if partition is not None]
    for start in range(0, len(keys), _QUERY_CHUNK):
        chunk = keys[start : start + _QUERY_CHUNK]
        cursor = None
        while missing := [partition for partition in chunk if partition not in found]:
            result = instance.fetch_observations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=missing),
                limit=2 * len(missing),
                cursor=cursor,
            )
            for record in result.records:  # newest first: the first record of a partition is its latest
                found.setdefault(record.partition_key, _observed_version(record))
            if not result.has_more:
                break
            cursor = result.cursor
    return {partition: found.get(partition) for partition in wanted}


def materialized_version(instance: dg.DagsterInstance, key: dg.AssetKey) -> str | None:
    """The data version Dagster recorded with the latest materialization of ``key``."""
    records = instance.fetch_materializations(key, limit=1).records
    materialization = records[0].asset_materialization if records else None
    return (materialization.tags or {}).get(DAGSTER_DATA_VERSION_TAG) if materialization is not None else None


def _observed_version(record: dg.EventLogRecord) -> str | None:
    """The data version of an observation record (None for a record that holds no observation)."""
    observation = record.asset_observation
    return observation.data_version if observation is not None else None


@dataclass(frozen=True)
class TableFilePlan:
    """How the files of one output of a step are written, and what they record (picklable, for workers).

    ``known_versions`` holds, per upstream asset that writes no table under the root (the raw-file
    observables, the sample world), its version per partition (``None``: any partition); the versions of
    upstream tables are read from their files' footers when a file is written.
    """

    root: Path
    table: str
    code_version: str | None
    upstream: tuple[str, ...]
    known_versions: Mapping[str, Mapping[str | None, str | None]] = field(default_factory=dict)

    def path(self, partition: str | None) -> Path:
        """The file of ``partition`` (None: the table's one file)."""
        return table_path(self.root, self.table, partition)

    def input_versions(self, partition: str | None) -> dict[str, str | None]:
        """``{upstream asset: version}`` for the file of ``partition`` built now."""
        versions = {}
        for name in self.upstream:
            known = self.known_versions.get(name)
            if known is not None:
                versions[name] = known.get(partition, known.get(None))
            else:
                versions[name] = table_version(
                    self.root, table_name(dg.AssetKey.from_user_string(name)), partition
                )
        return versions

    def key_value_metadata(self, partition: str | None, contract_version: str | None) -> dict[str, str]:
        """The key-value metadata of the file of ``partition`` (see the module docstring)."""
        metadata = {} if contract_version is None else {"contract_version": contract_version}
        if self.code_version is not None:
            metadata["code_version"] = self.code_version
        versions = self.input_versions(partition)
        metadata["input_data_versions"] = json.dumps(versions, sort_keys=True)
        metadata["source_fingerprint"] = fingerprint(versions)
        metadata[DATA_VERSION_KEY] = fingerprint(
            {"code_version": self.code_version, "contract_version": contract_version, "inputs": versions}
        )
        return metadata

    def write(self, frame: pl.DataFrame, partition: str | None, contract_version: str | None) -> WrittenTable:
        """Write ``frame`` as the file of ``partition``, atomically, with its key-value metadata."""
        return write_table(frame, self.path(partition), self.key_value_metadata(partition, contract_version))

    @contextlib.contextmanager
    def writer(
        self, partition: str | None, schema: pl.Schema, contract_version: str | None
    ) -> Iterator[ParquetTableWriter]:
        """A streaming writer of the file of ``partition`` (row group by row group), replaced atomically when
        the block ends; :meth:`written` then describes the file."""
        with table_writer(
            self.path(partition), schema, self.key_value_metadata(partition, contract_version)
        ) as out:
            yield out

    def written(self, partition: str | None) -> WrittenTable:
        """The file of ``partition`` as written (its row count and data version from its footer)."""
        import pyarrow.parquet as pq

        path = self.path(partition)
        with open(path, "rb") as handle:
            rows = pq.ParquetFile(handle).metadata.num_rows
        return WrittenTable(str(path), rows, _file_version(path))


def plan_for(
    instance: dg.DagsterInstance,
    root: Path,
    key: dg.AssetKey,
    code_version: str | None,
    upstream: Iterable[dg.AssetKey],
    partitions: Iterable[str | None],
) -> TableFilePlan:
    """The :class:`TableFilePlan` of the table of asset ``key`` built from ``upstream``, for the files of
    ``partitions``."""
    partitions = list(partitions)
    ordered = sorted(upstream, key=lambda dep: dep.to_user_string())
    known: dict[str, Mapping[str | None, str | None]] = {}
    for dep in ordered:
        if dep in _PARTITIONED_RAW:
            known[dep.to_user_string()] = observed_versions(instance, dep, partitions)
        elif not _writes_tables(root, table_name(dep)):
            known[dep.to_user_string()] = {None: materialized_version(instance, dep)}
    return TableFilePlan(
        root=Path(root),
        table=table_name(key),
        code_version=code_version,
        upstream=tuple(dep.to_user_string() for dep in ordered),
        known_versions=known,
    )


def table_file_plans(context: dg.AssetExecutionContext, root: str | Path) -> dict[str, TableFilePlan]:
    """``{output name: plan}`` of the step's selected outputs, for the partitions of the run."""
    assets_def = context.assets_def
    partitioned = context.has_partition_key or context.has_partition_key_range
    partitions: list[str | None] = list(context.partition_keys) if partitioned else [None]
    plans = {}
    for name, key in assets_def.keys_by_output_name.items():
        if key in context.selected_asset_keys:
            spec = assets_def.specs_by_key[key]
            deps = [dep.asset_key for dep in spec.deps]
            plans[name] = plan_for(context.instance, Path(root), key, spec.code_version, deps, partitions)
    return plans


def input_data_versions(
    instance: dg.DagsterInstance, root: Path, upstream: Iterable[dg.AssetKey], partition: str | None
) -> dict[str, str | None]:
    """``{upstream asset: version}`` for a file of ``partition`` built now from ``upstream``."""
    plan = plan_for(instance, root, dg.AssetKey("input_data_versions"), None, upstream, [partition])
    return plan.input_versions(partition)


def write_outputs(
    events: Iterable[Any], plans: Mapping[str, TableFilePlan], partition: str | None
) -> list[Any]:
    """``events`` with every output whose value is a frame written to its file (by its plan) and replaced by
    the :class:`~data_contracts.storage.WrittenTable` that describes it; other events as they are."""
    written = []
    for event in events:
        if (
            isinstance(event, dg.Output)
            and isinstance(event.value, pl.DataFrame)
            and event.output_name in plans
        ):
            contract_version = _text(event.metadata.get("contract_version"))
            table = plans[event.output_name].write(event.value, partition, contract_version)
            event = dg.Output(table, event.output_name, event.metadata, event.data_version)
        written.append(event)
    return written


def _text(value: object) -> str | None:
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    return None if raw is None else str(raw)
