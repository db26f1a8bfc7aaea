"""Operator signals: WARN-only asset checks on every table with a ``contract`` check (``pipelines/README.md``,
"Operator signals").

Each asset op gets one standalone ``multi_asset_check`` ``<op>_signals`` (``rgbd_asset`` -> ``rgbd_signals``), so
no asset body changes; it rides along in every run that selects the asset (in the automation's runs too: the
table's contract check has an automation condition, :data:`assets.tables.CHECKED_WITH_ITS_TABLE`). It compares
the materialization metadata that :func:`assets.tables.finalize_table` writes (``dagster/row_count``, ``quarantined``,
``frames_used``) with the previous materialization of the same asset and partition. A range run gets one result
per check, naming the partitions that warned (``partitions_warned``) with every partition's figures
(``by_partition``).
"""

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from assets.tables import CONTRACT_CHECK

QUARANTINE_SHARE_CHECK = "quarantine_share"
ROW_COUNT_DROP_CHECK = "row_count_drop"
FRAMES_USED_DROP_CHECK = "frames_used_drop"

MAX_QUARANTINE_SHARE = 0.10
MIN_ROW_RATIO = 0.5

ROW_COUNT = "dagster/row_count"
QUARANTINED = "quarantined"

_LOOKBACK = 10
"""Latest materializations of one asset partition searched for this run's (another run may have written
the same partition since)."""
_QUERY_CHUNK = 500
"""Partitions whose records one query reads together."""

RGBD_FRAMES_NOTE = (
    " One partition per scan: a scan read from fewer than half of its previous frames warns here (a scan "
    "partition built from fewer frames than before)."
)


@dataclass(frozen=True)
class Comparison:
    """One asset partition's figures in this run (``None``: not materialized by it) and before (``{}``: none)."""

    partition: str | None
    now: Mapping[str, float] | None
    previous: Mapping[str, float]
    previous_run_id: str | None = None


Verdict = Callable[[Comparison], tuple[bool, dict]]
"""A check's judgement of one comparison: ``(passed, figures for the metadata)``."""


def _figures(record: dg.EventLogRecord | None) -> dict[str, float]:
    if record is None:
        return {}
    materialization = record.asset_materialization
    assert materialization is not None  # a record that fetch_materializations read
    numbers = (dg.IntMetadataValue, dg.FloatMetadataValue)
    return {
        name: value.value
        for name, value in materialization.metadata.items()
        if isinstance(value, numbers) and value.value is not None
    }


def _now(comparison: Comparison) -> Mapping[str, float]:
    """This run's figures: a verdict only judges a partition that the run materialized (:func:`signal_result`)."""
    if comparison.now is None:
        raise ValueError(
            f"partition {comparison.partition} was not materialized by this run: nothing to judge"
        )
    return comparison.now


def quarantine_share(figures: Mapping[str, float]) -> float | None:
    """Quarantined records / (rows + quarantined records); ``None`` when no quarantine count was recorded."""
    if QUARANTINED not in figures:
        return None
    total = figures.get(ROW_COUNT, 0) + figures[QUARANTINED]
    return figures[QUARANTINED] / total if total else 0.0


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def quarantine_verdict(comparison: Comparison) -> tuple[bool, dict]:
    now = _now(comparison)
    share = quarantine_share(now)
    entry = {
        "rows": now.get(ROW_COUNT),
        "quarantined": now.get(QUARANTINED),
        "share": _rounded(share),
        "previous_share": _rounded(quarantine_share(comparison.previous)),
        "max_share": MAX_QUARANTINE_SHARE,
    }
    return share is None or share <= MAX_QUARANTINE_SHARE, entry


def drop_verdict(figure: str, label: str, min_ratio: float) -> Verdict:
    """The verdict that warns when ``figure`` falls below ``min_ratio`` of before; nothing to compare passes."""

    def verdict(comparison: Comparison) -> tuple[bool, dict]:
        now, previous = _now(comparison).get(figure), comparison.previous.get(figure)
        ratio = None if now is None or not previous else round(now / previous, 4)
        entry = {label: now, f"previous_{label}": previous, "ratio": ratio, "min_ratio": min_ratio}
        return ratio is None or ratio >= min_ratio, entry

    return verdict


def _comparison(
    partition: str | None, current: dg.EventLogRecord | None, previous: dg.EventLogRecord | None
) -> Comparison:
    if current is None:
        return Comparison(partition, None, {})
    return Comparison(
        partition, _figures(current), _figures(previous), previous.run_id if previous is not None else None
    )


def compare(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partitions: Sequence[str | None], run_id: str
) -> list[Comparison]:
    """The figures of ``asset_key`` (each of ``partitions``; ``[None]`` when unpartitioned) as run ``run_id``
    materialized it, and as the materialization before that one had them.

    The records of many partitions are read together, newest first, a page at a time, until every partition
    has this run's materialization and the one before it (or its records run out): a range run of
    thousands of scans costs a few queries, not two per scan.
    """
    if list(partitions) == [None]:
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=asset_key), limit=_LOOKBACK
        ).records
        this_run = next((record for record in latest if record.run_id == run_id), None)
        before = (
            instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key, before_storage_id=this_run.storage_id), limit=1
            ).records
            if this_run is not None
            else []
        )
        return [_comparison(None, this_run, before[0] if before else None)]
    current: dict[str | None, dg.EventLogRecord] = {}
    previous: dict[str | None, dg.EventLogRecord] = {}
    seen: dict[str, int] = {}
    keys = [partition for partition in partitions if partition is not None]
    for start in range(0, len(keys), _QUERY_CHUNK):
        chunk = keys[start : start + _QUERY_CHUNK]
        cursor = None
        while open_ := [
            key for key in chunk if key not in previous and (key in current or seen.get(key, 0) < _LOOKBACK)
        ]:
            page = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=open_),
                limit=2 * len(open_),
                cursor=cursor,
            )
            for record in page.records:  # newest first
                key = record.partition_key
                assert key is not None  # the query asked for these partitions
                seen[key] = seen.get(key, 0) + 1
                if key in current:
                    previous.setdefault(key, record)
                elif record.run_id == run_id and seen[key] <= _LOOKBACK:
                    current[key] = record
            if not page.has_more:
                break
            cursor = page.cursor
    return [_comparison(key, current.get(key), previous.get(key)) for key in partitions]


def signal_result(
    asset_key: dg.AssetKey,
    check_name: str,
    comparisons: Sequence[Comparison],
    verdict: Verdict,
    partitioned: bool,
) -> dg.AssetCheckResult:
    """One WARN check result over the run's comparisons (one, or one per partition of the run)."""
    entries, warned = {}, []
    for comparison in comparisons:
        if comparison.now is None:
            continue
        passed, entry = verdict(comparison)
        entries[str(comparison.partition)] = {**entry, "previous_run_id": comparison.previous_run_id}
        if not passed:
            warned.append(str(comparison.partition))
    metadata: dict[str, Any]
    if partitioned:
        metadata = {
            "partitions_checked": len(entries),
            "partitions_warned": dg.MetadataValue.json(warned),
            "by_partition": dg.MetadataValue.json(entries),
        }
    else:  # at most one entry
        metadata = {
            name: value for entry in entries.values() for name, value in entry.items() if value is not None
        }
    name = asset_key.to_user_string()
    if not entries:
        description = f"{name} was not materialized by this run: nothing to check."
    elif warned:
        description = f"{check_name}: {name} is over its limit ({', '.join(warned)})."
    else:
        description = f"{check_name}: {name} is within its limit."
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=check_name,
        passed=not warned,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=description,
    )


def _specs(table: dg.AssetKey) -> list[tuple[dg.AssetCheckSpec, Verdict]]:
    """The check specs of ``table`` with the verdict function of each."""
    name = table.to_user_string()
    specs = [
        (
            dg.AssetCheckSpec(
                QUARANTINE_SHARE_CHECK,
                asset=table,
                description=f"WARN when more than {MAX_QUARANTINE_SHARE:.0%} of the records were quarantined "
                "(quarantined / (rows + quarantined)).",
            ),
            quarantine_verdict,
        ),
        (
            dg.AssetCheckSpec(
                ROW_COUNT_DROP_CHECK,
                asset=table,
                description=f"WARN when the rows fall below {MIN_ROW_RATIO:.0%} of the previous "
                "materialization's (of the same partition)."
                + (RGBD_FRAMES_NOTE if name == "rgbd_frames" else ""),
            ),
            drop_verdict(ROW_COUNT, "rows", MIN_ROW_RATIO),
        ),
    ]
    if name == "scene_geometry":
        spec = dg.AssetCheckSpec(
            FRAMES_USED_DROP_CHECK,
            asset=table,
            description="WARN when a scan's geometry was fused from fewer frames than its previous build "
            "(frames_used).",
        )
        specs.append((spec, drop_verdict("frames_used", "frames_used", 1.0)))  # any drop
    return specs


def _signals_check(
    assets_def: dg.AssetsDefinition, tables: Sequence[dg.AssetKey]
) -> dg.AssetChecksDefinition:
    verdicts = {spec.key: (spec, verdict) for table in tables for spec, verdict in _specs(table)}
    partitioned = assets_def.partitions_def is not None
    stem = assets_def.node_def.name.removesuffix("_asset")

    @dg.multi_asset_check(
        name=f"{stem}_signals",
        specs=[spec for spec, _ in verdicts.values()],
        can_subset=True,
        description=f"Operator signals (WARN only) on {', '.join(t.to_user_string() for t in tables)}.",
    )
    def signals(context: dg.AssetCheckExecutionContext) -> Iterator[dg.AssetCheckResult]:
        in_run = context.has_partition_key or context.has_partition_key_range
        partitions = list(context.partition_keys) if partitioned and in_run else [None]
        selected = context.selected_asset_check_keys
        for table in tables:
            wanted = [key for key in verdicts if key.asset_key == table and key in selected]
            if not wanted:
                continue
            comparisons = compare(context.instance, table, partitions, context.run.run_id)
            for key in wanted:
                result = signal_result(table, key.name, comparisons, verdicts[key][1], partitioned)
                if not result.passed:
                    context.log.warning(result.description)
                yield result

    return signals


def build_signal_checks(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetChecksDefinition]:
    """The operator-signal checks of every table of ``assets`` (the assets with a ``contract`` check)."""
    checks = []
    for assets_def in assets:
        tables = sorted(
            {key.asset_key for key in assets_def.check_keys if key.name == CONTRACT_CHECK},
            key=lambda key: key.to_user_string(),
        )
        if tables:
            checks.append(_signals_check(assets_def, tables))
    return checks
