"""Operator signals: WARN-severity asset checks that flag a table that looks wrong, so nobody has to read it.

Every table written through :func:`assets.tables.finalize_table` (every asset with a ``contract``
check) gets these checks, compared with the previous materialization of the same asset (and of the same
partition, for a partitioned asset) that the instance recorded:

| check | asset | warns when | default |
|---|---|---|---|
| ``quarantine_share`` | every table | quarantined records / (rows + quarantined records) is above the limit | 10% (:data:`MAX_QUARANTINE_SHARE`) |
| ``row_count_drop`` | every table | the rows fall below this share of the previous materialization's rows | 50% (:data:`MIN_ROW_RATIO`) |
| ``frames_used_drop`` | ``scene_geometry`` | a scan's geometry was fused from fewer frames than its previous build | any drop (:data:`MIN_FRAMES_RATIO`) |

The figures are the materialization metadata that ``finalize_table`` writes: ``dagster/row_count``,
``quarantined`` (the records in the asset's quarantine log), and ``frames_used`` (``scene_geometry``).
``rgbd_frames`` has one partition per scan, so its ``row_count_drop`` is the signal for a scan read from
fewer frames than before (below half of them); ``frames_used_drop`` on ``scene_geometry`` catches any
drop in the frames a scan's geometry was fused from.

Each result carries the figures of now and of the previous materialization (``rows`` and
``previous_rows``, ``share`` and ``previous_share``, ``previous_run_id``); a first materialization has
nothing to compare and passes. For a partitioned asset one result covers the run's partitions (one, or a
range): ``partitions_warned`` names the partitions over the limit and ``by_partition`` holds every
partition's figures, as the combined ``contract`` check of a range run does.

The checks have severity WARN and are not blocking: a warning never fails a run and never holds back
downstream assets; it shows on the asset's checks tab (and in the run's event log).

Design: the asset bodies yield their ``contract`` check themselves; these checks are standalone
definitions, one ``multi_asset_check`` per asset op (``<op>_signals``: ``rgbd_asset`` ->
``rgbd_signals``), so no asset body changes. A job that selects an asset runs its checks in the same run,
after the asset's step: the named jobs of :mod:`pipelines.jobs` (and so ``spatial-build``, whose
``execute_in_process`` runs them in process), UI launches and backfills, and the runs of
``datasets_automation_sensor`` (checks without an automation condition of their own ride along with
their asset). In a range run the check step reads the run's partition keys and checks each.
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
"""``quarantine_share`` warns above this share of quarantined records among rows plus quarantined records."""
MIN_ROW_RATIO = 0.5
"""``row_count_drop`` warns when the rows fall below this share of the previous materialization's rows."""
MIN_FRAMES_RATIO = 1.0
"""``frames_used_drop`` warns when a scan's geometry uses fewer frames than this share of before: any drop."""

ROW_COUNT = "dagster/row_count"
QUARANTINED = "quarantined"
FRAMES_USED = "frames_used"

_LOOKBACK = 10
"""Latest materializations of one asset partition searched for this run's (another run may have written
the same partition since)."""


@dataclass(frozen=True)
class DropRule:
    """A check that warns when a figure of the materialization metadata falls below ``min_ratio`` of before."""

    check_name: str
    figure: str
    label: str
    min_ratio: float
    description: str


ROW_COUNT_RULE = DropRule(
    ROW_COUNT_DROP_CHECK,
    ROW_COUNT,
    "rows",
    MIN_ROW_RATIO,
    f"WARN when the rows fall below {MIN_ROW_RATIO:.0%} of the previous materialization's (of the same "
    "partition).",
)
FRAMES_USED_RULE = DropRule(
    FRAMES_USED_DROP_CHECK,
    FRAMES_USED,
    "frames_used",
    MIN_FRAMES_RATIO,
    "WARN when a scan's geometry was fused from fewer frames than its previous build (frames_used).",
)
DROP_RULES_BY_TABLE: Mapping[str, tuple[DropRule, ...]] = {
    "scene_geometry": (ROW_COUNT_RULE, FRAMES_USED_RULE)
}
"""The drop checks of each table; every other table has :data:`ROW_COUNT_RULE` only."""
DROP_NOTES = {
    "rgbd_frames": " One partition per scan: a scan read from fewer than half of its previous frames warns "
    "here (a scan partition built from fewer frames than before)."
}
"""Sentences added to a table's ``row_count_drop`` description."""


@dataclass(frozen=True)
class Comparison:
    """One asset partition's figures in this run and in its previous materialization."""

    partition: str | None
    now: Mapping[str, float] | None
    previous: Mapping[str, float] | None = None
    previous_run_id: str | None = None


Verdict = Callable[[Comparison], tuple[bool, dict]]
"""A check's judgement of one comparison: ``(passed, figures for the metadata)``."""


def _figures(materialization: dg.AssetMaterialization | None) -> dict[str, float]:
    figures = {}
    for name, value in (materialization.metadata if materialization is not None else {}).items():
        plain = value.value if isinstance(value, dg.MetadataValue) else value
        if isinstance(plain, (int, float)) and not isinstance(plain, bool):
            figures[name] = plain
    return figures


def quarantine_share(figures: Mapping[str, float] | None) -> float | None:
    """Quarantined records / (rows + quarantined records); ``None`` when no quarantine count was recorded.

    >>> quarantine_share({"dagster/row_count": 90, "quarantined": 10})
    0.1
    >>> quarantine_share({"dagster/row_count": 0, "quarantined": 0}), quarantine_share({"dagster/row_count": 5})
    (0.0, None)
    """
    if not figures or QUARANTINED not in figures:
        return None
    total = figures.get(ROW_COUNT, 0) + figures[QUARANTINED]
    return figures[QUARANTINED] / total if total else 0.0


def quarantine_verdict(comparison: Comparison, max_share: float = MAX_QUARANTINE_SHARE) -> tuple[bool, dict]:
    """``(passed, figures)`` of ``quarantine_share`` for one asset partition.

    >>> quarantine_verdict(Comparison(None, {"dagster/row_count": 6, "quarantined": 4}))[0]
    False
    """
    share = quarantine_share(comparison.now)
    previous_share = quarantine_share(comparison.previous)
    entry = {
        "rows": (comparison.now or {}).get(ROW_COUNT),
        "quarantined": (comparison.now or {}).get(QUARANTINED),
        "share": None if share is None else round(share, 4),
        "previous_share": None if previous_share is None else round(previous_share, 4),
        "max_share": max_share,
    }
    return share is None or share <= max_share, entry


def drop_verdict(rule: DropRule, comparison: Comparison) -> tuple[bool, dict]:
    """``(passed, figures)`` of a drop check for one asset partition; passes when there is nothing to compare.

    >>> drop_verdict(ROW_COUNT_RULE, Comparison(None, {"dagster/row_count": 4}, {"dagster/row_count": 10}))
    (False, {'rows': 4, 'previous_rows': 10, 'ratio': 0.4, 'min_ratio': 0.5})
    >>> drop_verdict(ROW_COUNT_RULE, Comparison(None, {"dagster/row_count": 4}))[0]  # first materialization
    True
    """
    now = (comparison.now or {}).get(rule.figure)
    previous = (comparison.previous or {}).get(rule.figure)
    ratio = None if now is None or not previous else round(now / previous, 4)
    entry = {rule.label: now, f"previous_{rule.label}": previous, "ratio": ratio, "min_ratio": rule.min_ratio}
    return ratio is None or ratio >= rule.min_ratio, entry


def compare(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey, partition: str | None, run_id: str
) -> Comparison:
    """The figures of ``asset_key`` (``partition``) as run ``run_id`` materialized it, and as the materialization
    before that one had them (``now`` is ``None`` when the run did not materialize it)."""
    partitions = [partition] if partition is not None else None
    latest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key, asset_partitions=partitions), limit=_LOOKBACK
    ).records
    current = next((record for record in latest if record.run_id == run_id), None)
    if current is None:
        return Comparison(partition, None)
    before = instance.fetch_materializations(
        dg.AssetRecordsFilter(
            asset_key=asset_key, asset_partitions=partitions, before_storage_id=current.storage_id
        ),
        limit=1,
    ).records
    previous = before[0] if before else None
    return Comparison(
        partition,
        _figures(current.asset_materialization),
        _figures(previous.asset_materialization) if previous is not None else None,
        previous.run_id if previous is not None else None,
    )


def _describe(check_name: str, asset_key: dg.AssetKey, warned: Sequence[str], compared: int) -> str:
    name = asset_key.to_user_string()
    if not compared:
        return f"{name} was not materialized by this run: nothing to check."
    if not warned:
        return f"{check_name}: {name} is within its limit."
    return f"{check_name}: {name} is over its limit ({', '.join(warned)})."


def signal_result(
    asset_key: dg.AssetKey,
    check_name: str,
    comparisons: Sequence[Comparison],
    verdict: Verdict,
    partitioned: bool,
) -> dg.AssetCheckResult:
    """One WARN check result over the run's comparisons (one, or one per partition of the run)."""
    compared = [comparison for comparison in comparisons if comparison.now is not None]
    verdicts = {comparison.partition: verdict(comparison) for comparison in compared}
    warned = [str(partition) for partition, (passed, _) in verdicts.items() if not passed]
    if partitioned:
        metadata: dict[str, Any] = {
            "partitions_checked": len(verdicts),
            "partitions_warned": dg.MetadataValue.json(warned),
            "by_partition": dg.MetadataValue.json(
                {
                    str(comparison.partition): {
                        **verdicts[comparison.partition][1],
                        "previous_run_id": comparison.previous_run_id,
                    }
                    for comparison in compared
                }
            ),
        }
    else:
        (comparison,) = compared or [None]
        metadata = {}
        if comparison is not None:
            metadata = {
                name: value for name, value in verdicts[comparison.partition][1].items() if value is not None
            }
            if comparison.previous_run_id is not None:
                metadata["previous_run_id"] = comparison.previous_run_id
    return dg.AssetCheckResult(
        asset_key=asset_key,
        check_name=check_name,
        passed=not warned,
        severity=dg.AssetCheckSeverity.WARN,
        metadata=metadata,
        description=_describe(check_name, asset_key, warned, len(verdicts)),
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
        )
    ]
    for rule in DROP_RULES_BY_TABLE.get(name, (ROW_COUNT_RULE,)):
        description = rule.description + (DROP_NOTES.get(name, "") if rule is ROW_COUNT_RULE else "")
        specs.append(
            (
                dg.AssetCheckSpec(rule.check_name, asset=table, description=description),
                lambda comparison, rule=rule: drop_verdict(rule, comparison),
            )
        )
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
            comparisons = [compare(context.instance, table, p, context.run.run_id) for p in partitions]
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
