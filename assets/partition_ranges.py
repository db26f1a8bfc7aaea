"""Partitioned assets that build many partitions in one run (``BackfillPolicy.single_run()``).

A partitioned asset body here is written for one partition (``body(partition_key)`` yields its
``Output`` objects and ``AssetCheckResult`` objects, exactly as a one-partition run does).
:func:`run_partitions` runs that body once per partition key of the run and, when the run covers
more than one key, folds the results into what Dagster expects of a range run:

- one ``Output`` per output whose value is ``{partition_key: table}`` (the IO manager writes each
  partition to its own file, and publishes the whole set together);
- each partition's own metadata attached to that partition's materialization
  (``context.add_asset_metadata(..., partition_key=...)``), so every partition shows its own row
  count, preview and figures, as in a one-partition run;
- metadata shared by every partition of the run: the entries every partition has with the same
  value (the contract version, the column schema, the backend), the totals across the run's
  partitions of every count (``total_<name>``), the number of partitions (``partitions_in_run``),
  and the figures of each partition side by side (``by_partition``);
- one result per asset check: passed when it passed for every partition, with the failing partitions
  named and each partition's check metadata.

A run of one partition (a one-partition launch, or the automation requesting a single key) yields
the body's events unchanged. A data version given by the body (``Output(data_version=...)``) is one
per output in Dagster's range runs: when the partitions of a range disagree, it is kept in each
partition's metadata as ``data_version_fingerprint`` instead.

Inputs: in a range run, the IO manager hands a partitioned upstream of the same partitioning to
the body as ``{partition_key: table}``; :func:`partition_input` picks one partition's table from
that (or returns a table unchanged).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import dagster as dg
import polars as pl

logger = logging.getLogger(__name__)

PartitionBody = Callable[[str], Iterator[dg.Output | dg.AssetCheckResult]]
"""A one-partition asset body: the partition key in, the partition's outputs and check results out."""

PartitionedInput = Any
"""The annotation of a partitioned input of a range-aware asset: one table (``polars.DataFrame``), or
``{partition_key: table}`` in a range run. ``Any`` for Dagster, which cannot type-check a union."""

SINGLE_RUN = dg.BackfillPolicy.single_run()
"""The backfill policy of every partitioned asset: a backfill or a ``spatial-build`` wave is one run."""


def partition_input(value: pl.DataFrame | Mapping[str, pl.DataFrame], partition_key: str) -> pl.DataFrame:
    """One partition's table of an input: ``value[partition_key]`` for a range run's dict, else ``value``.

    >>> partition_input({"a": pl.DataFrame({"x": [1]}), "b": pl.DataFrame({"x": [2]})}, "b")["x"].to_list()
    [2]
    >>> partition_input(pl.DataFrame({"x": [3]}), "b")["x"].to_list()
    [3]
    """
    if isinstance(value, Mapping):
        if partition_key not in value:
            raise KeyError(f"the input holds no table for partition {partition_key!r}")
        return value[partition_key]
    return value


def _numeric(value: Any) -> float | int | None:
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    return raw


def figures_by_partition(
    metadata_by_partition: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, float]]:
    """The numeric metadata entries of each partition, ``{partition: {name: value}}``.

    >>> figures_by_partition({"a": {"rows": 2, "preview": "text", "ok": True}, "b": {"rows": 3}})
    {'a': {'rows': 2}, 'b': {'rows': 3}}
    """
    figures: dict[str, dict[str, float]] = {}
    for partition, metadata in metadata_by_partition.items():
        figures[partition] = {}
        for name, value in metadata.items():
            number = _numeric(value)
            if number is not None:
                figures[partition][name] = number
    return figures


def common_metadata(metadata_by_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The entries that every partition has, with the same value in each.

    >>> common_metadata({"a": {"contract_version": "1", "rows": 2}, "b": {"contract_version": "1", "rows": 3}})
    {'contract_version': '1'}
    """
    first, *others = metadata_by_partition.values()
    return {
        name: value
        for name, value in first.items()
        if all(name in other and other[name] == value for other in others)
    }


def totals_metadata(metadata_by_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Metadata shared by every partition of a range run: totals, partition count, figures side by side.

    A figure is summed when it is a count or a sum (an integer in every partition); a float such as
    a ratio or a mean is shown per partition only (its sum means nothing).

    >>> totals = totals_metadata({"a": {"dagster/row_count": 2, "share": 0.5}, "b": {"dagster/row_count": 3}})
    >>> totals["total_rows"], totals["partitions_in_run"]
    (5, 2)
    >>> "total_share" in totals
    False
    """
    figures = figures_by_partition(metadata_by_partition)
    names = sorted({name for values in figures.values() for name in values})
    totals: dict[str, Any] = {"partitions_in_run": len(metadata_by_partition)}
    for name in names:
        values = [values[name] for values in figures.values() if name in values]
        if all(isinstance(value, int) for value in values):
            label = "rows" if name == "dagster/row_count" else name
            totals[f"total_{label}"] = sum(values)
    totals["by_partition"] = dg.MetadataValue.json(figures)
    texts = [
        {name: value for name, value in metadata.items() if isinstance(value, str)}
        for metadata in metadata_by_partition.values()
    ]
    for name in sorted(set.intersection(*(set(text) for text in texts)) if texts else set()):
        if len({text[name] for text in texts}) == 1:  # the same in every partition (e.g. contract_version)
            totals.setdefault(name, texts[0][name])
    return totals


def _combined_check(results: Mapping[str, dg.AssetCheckResult]) -> dg.AssetCheckResult:
    """One check result for a range run: passed when every partition passed; the failures named."""
    first = next(iter(results.values()))
    failed = sorted(partition for partition, result in results.items() if not result.passed)
    severities = [result.severity for partition, result in results.items() if not result.passed]
    per_partition = {
        partition: {
            name: (value.value if isinstance(value, dg.MetadataValue) else value)
            for name, value in (result.metadata or {}).items()
        }
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
    context: dg.AssetExecutionContext, body: PartitionBody
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Run ``body`` for every partition key of the run and yield the run's outputs and checks.

    See the module docstring for what a range run yields. A partition whose body raises fails the
    whole run (``spatial-build`` then builds the wave's partitions one run each, so that one bad
    partition does not hold back the others).
    """
    keys = list(context.partition_keys)
    if len(keys) == 1:
        yield from body(keys[0])
        return
    outputs: dict[str, dict[str, dg.Output]] = {}
    checks: dict[tuple[dg.AssetKey, str], dict[str, dg.AssetCheckResult]] = {}
    order: list[tuple[str, Any]] = []  # the body's event order (outputs before their checks)
    for key in keys:
        for event in body(key):
            if isinstance(event, dg.Output):
                slot: tuple[str, Any] = ("output", event.output_name)
                outputs.setdefault(event.output_name, {})[key] = event
            elif isinstance(event, dg.AssetCheckResult):
                slot = ("check", (event.asset_key, event.check_name))
                checks.setdefault((event.asset_key, event.check_name), {})[key] = event
            else:
                raise TypeError(
                    f"a partition body yielded {type(event).__name__}, not Output or AssetCheckResult"
                )
            if slot not in order:
                order.append(slot)
    for kind, name in order:
        if kind == "check":
            yield _combined_check(checks[name])
            continue
        by_key = outputs[name]
        asset_key = context.asset_key_for_output(name)
        metadata_by_key = {key: output.metadata for key, output in by_key.items()}
        versions = {output.data_version for output in by_key.values()}
        shared_version = versions.pop() if len(versions) == 1 else None
        for key, output in by_key.items():
            metadata = dict(output.metadata)
            if output.data_version is not None and shared_version is None:
                metadata["data_version_fingerprint"] = output.data_version.value
            context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=key)
        yield dg.Output(
            {key: output.value for key, output in by_key.items()},
            output_name=name,
            metadata={**common_metadata(metadata_by_key), **totals_metadata(metadata_by_key)},
            data_version=shared_version,
        )
