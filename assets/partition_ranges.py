"""Partitioned assets that build many partitions in one run (``BackfillPolicy.single_run()``).

Dagster runs such an asset over a range of partitions in one run (a UI backfill, the automation,
``dagster asset materialize --partition-range``, ``spatial-build``); partitions that are not adjacent
become several range runs, some of one partition. An asset body here is written for one partition
(``body(partition_key)`` yields its outputs and check results), and :func:`run_partitions` runs it for
every partition of the run, whatever its shape, and yields what Dagster expects: per output one
``Output`` of ``{partition_key: table}`` (the IO manager writes one file per partition), each partition's
metadata on its own materialization plus the run's totals (:func:`range_metadata`), and per check one
result naming the failing partitions. A partitioned input annotated :data:`PartitionTables` arrives as
``{partition_key: table}``, one annotated :data:`PartitionFiles` as ``{partition_key: path}``. A partition's
work can run in a worker process or on Ray (:func:`assets.compute.partition_results`), which writes the
partition's files itself (:func:`assets.provenance.write_outputs`) and sends back only its events, as values
(:func:`portable_events`): the rows never pass through the run's process, whose memory and time per
partition are those of the events' metadata.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

import dagster as dg
import polars as pl
from tqdm.auto import tqdm

from assets.provenance import TableFilePlan, write_outputs
from data_contracts.parquet_files import arrow_frame, read_parquet_file
from data_contracts.storage import MissingTableError

PartitionBody = Callable[[str], Iterable[dg.Output | dg.AssetCheckResult]]
"""A one-partition asset body: the partition key in, the partition's outputs and check results out."""

PartitionTables = dict[str, pl.DataFrame]
"""The annotation of a partitioned input read per partition: ``{partition_key: table}`` for the partitions
of the run (one key in a one-partition run). The IO manager reads the annotation."""

TableFile = Path
"""The annotation of an unpartitioned input that the step reads itself (a part of it, or in its workers): the
table's file, nothing read in the run's process."""

PartitionFiles = dict[str, Path]
"""The annotation of a partitioned input whose files the step's workers read themselves: ``{partition_key:
path}`` for the partitions of the run, nothing read in the run's process."""


def read_partition(path: Path) -> pl.DataFrame:
    """The file of one partition of an upstream table (a :data:`PartitionFiles` value), read through one handle.

    Raises:
        MissingTableError: naming the file when the partition has none (materialise the upstream first).
    """
    if not Path(path).is_file():
        raise MissingTableError(f"no Parquet file at {path}: materialise this partition of its table first")
    return read_parquet_file(path)


def read_table_columns(path: Path, columns: list[str]) -> pl.DataFrame:
    """Some columns of a table file (a :data:`TableFile` value), through one handle: a table's rows without its
    image bytes, for instance."""
    import pyarrow.parquet as pq

    with open(path, "rb") as handle:
        return arrow_frame(pq.ParquetFile(handle).read(columns=columns))


def iter_row_groups(path: Path) -> Iterator[pl.DataFrame]:
    """The rows of a table file (a :data:`TableFile` value), one row group at a time, through one handle."""
    import pyarrow.parquet as pq

    with open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        for index in range(parquet.num_row_groups):
            yield arrow_frame(parquet.read_row_group(index))


SINGLE_RUN = dg.BackfillPolicy.single_run()
"""The backfill policy of every partitioned asset: a backfill or a ``spatial-build`` wave is one run."""


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, dg.MetadataValue) else value


def range_metadata(metadata_by_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The metadata of a range run's output: the entries every partition has with the same value (the
    contract version, the schema), the number of partitions and the totals of the integer figures (counts and
    sums; a float such as a ratio is not summed).

    Dagster copies an output's metadata onto the materialization of every partition of the run, so it holds
    nothing that grows with the partitions: each partition's own figures are on its own materialization
    (a side-by-side table of them, repeated on each of N partitions, made the run's events grow as N²).

    >>> metadata = range_metadata({"a": {"dagster/row_count": 2, "share": 0.5, "v": "1"}, "b": {"dagster/row_count": 3, "v": "1"}})
    >>> metadata["v"], metadata["total_rows"], metadata["partitions_in_run"], "total_share" in metadata
    ('1', 5, 2, False)
    """
    first, *others = metadata_by_partition.values()
    merged = {
        name: value for name, value in first.items() if all(other.get(name) == value for other in others)
    }
    figures = [
        {
            name: _plain(value)
            for name, value in metadata.items()
            if isinstance(_plain(value), (int, float)) and not isinstance(_plain(value), bool)
        }
        for metadata in metadata_by_partition.values()
    ]
    merged["partitions_in_run"] = len(metadata_by_partition)
    for name in sorted({name for values in figures for name in values}):
        values = [values[name] for values in figures if name in values]
        if all(isinstance(value, int) for value in values):
            merged[f"total_{'rows' if name == 'dagster/row_count' else name}"] = sum(values)
    return merged


def _combined_check(results: Mapping[str, dg.AssetCheckResult]) -> dg.AssetCheckResult:
    """One check result for a range run: passed when every partition passed; the failures named."""
    first = next(iter(results.values()))
    failed = sorted(partition for partition, result in results.items() if not result.passed)
    severities = [result.severity for partition, result in results.items() if not result.passed]
    per_partition = {
        partition: {name: _plain(value) for name, value in (result.metadata or {}).items()}
        for partition, result in results.items()
    }
    metadata: dict[str, Any] = {
        "partitions_checked": len(results),
        "partitions_failed": dg.MetadataValue.json(failed),
        "by_partition": dg.MetadataValue.json(json.loads(json.dumps(per_partition, default=str))),
    }
    return dg.AssetCheckResult(
        asset_key=first.asset_key,
        check_name=first.check_name,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR
        if dg.AssetCheckSeverity.ERROR in severities
        else (severities[0] if severities else first.severity),
        metadata=metadata,
    )


def run_partitions(
    context: dg.AssetExecutionContext,
    body: PartitionBody,
    plans: Mapping[str, TableFilePlan] | None = None,
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Run ``body`` for every partition key of the run and yield the run's outputs and checks.

    See the module docstring for what a run yields. Outputs whose rows the body hands back (a body run in
    this process) are written to their files at once by their ``plans``
    (:func:`assets.provenance.table_file_plans`), so no partition's rows stay in memory (without plans, the IO
    manager writes them when the step yields its outputs). A partition whose
    body raises fails the whole run (``spatial-build`` then builds the wave's partitions one run each, so
    that one bad partition does not hold back the others).
    """
    keys = list(context.partition_keys)
    name = context.op_def.name.removesuffix("_asset")
    by_slot: dict[tuple, dict[str, dg.Output | dg.AssetCheckResult]] = {}  # in the body's order
    for key in tqdm(keys, desc=name, unit="partition", disable=len(keys) < 2):
        for event in write_outputs(body(key), plans or {}, key):
            if isinstance(event, dg.Output):
                slot: tuple = ("output", event.output_name)
            elif isinstance(event, dg.AssetCheckResult):
                slot = ("check", event.asset_key, event.check_name)
            else:
                raise TypeError(
                    f"a partition body yielded {type(event).__name__}, not Output or AssetCheckResult"
                )
            by_slot.setdefault(slot, {})[key] = event
    for slot, by_key in by_slot.items():
        if len(keys) == 1:
            (event,) = by_key.values()
            if isinstance(event, dg.Output):
                event = dg.Output({keys[0]: event.value}, slot[1], event.metadata, event.data_version)
            yield event
        elif slot[0] == "check":
            yield _combined_check(cast(dict[str, dg.AssetCheckResult], by_key))
        else:
            yield _range_output(context, slot[1], cast(dict[str, dg.Output], by_key))


DYNAMIC_PARTITION_READERS = ("get_dynamic_partitions", "has_dynamic_partition")
"""The instance's public readers of dynamic partitions that :func:`dynamic_partitions_read_once` memoizes."""


@contextmanager
def dynamic_partitions_read_once(instance: dg.DagsterInstance) -> Iterator[None]:
    """The instance's dynamic partitions read from its storage once for the block, not once per call.

    Dagster checks every ``add_asset_metadata(partition_key=...)`` against the run's range by reading the
    partitions definition's keys from the instance, three queries over all of them per call: a range run's
    per-partition metadata cost the square of its partitions (29 ms a call at 36 scans). For the block, the
    two readers answer from what they read first; nothing in a step adds or deletes the partitions it builds.
    """
    shadowed = {name: vars(instance).get(name) for name in DYNAMIC_PARTITION_READERS}
    for name in DYNAMIC_PARTITION_READERS:
        setattr(instance, name, functools.cache(getattr(instance, name)))
    try:
        yield
    finally:
        for name, previous in shadowed.items():
            if previous is None:
                delattr(instance, name)  # the class's method again
            else:
                setattr(instance, name, previous)


def _range_output(context: dg.AssetExecutionContext, name: str, by_key: Mapping[str, dg.Output]) -> dg.Output:
    """One output of a run of several partitions: each partition's metadata on its own materialization. Dagster
    keeps one data version per output of a run; partitions that disagree keep theirs in their metadata
    (``data_version_fingerprint``)."""
    asset_key = context.asset_key_for_output(name)
    versions = {output.data_version for output in by_key.values()}
    shared_version = versions.pop() if len(versions) == 1 else None
    with dynamic_partitions_read_once(context.instance):
        for key, output in by_key.items():
            metadata: dict[str, Any] = dict(output.metadata)
            if output.data_version is not None and shared_version is None:
                metadata["data_version_fingerprint"] = output.data_version.value
            context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=key)
    return dg.Output(
        {key: output.value for key, output in by_key.items()},
        output_name=name,
        metadata=range_metadata({key: output.metadata for key, output in by_key.items()}),
        data_version=shared_version,
    )


PortableEvent = dg.Output | dict[str, Any]
"""An ``Output`` (it pickles) or an ``AssetCheckResult`` as its fields (a check result does not pickle)."""


def portable_events(events: Iterable[dg.Output | dg.AssetCheckResult]) -> list[PortableEvent]:
    """A partition body's events as picklable values, for :func:`restore_events` in another process.

    >>> events = [dg.Output(1, output_name="t"), dg.AssetCheckResult(asset_key="t", check_name="c", passed=True)]
    >>> [type(event).__name__ for event in restore_events(portable_events(events))]
    ['Output', 'AssetCheckResult']
    """
    return [event._asdict() if isinstance(event, dg.AssetCheckResult) else event for event in events]


def restore_events(portable: Iterable[PortableEvent]) -> list[dg.Output | dg.AssetCheckResult]:
    """The events that :func:`portable_events` turned into values."""
    return [dg.AssetCheckResult(**event) if isinstance(event, dict) else event for event in portable]
