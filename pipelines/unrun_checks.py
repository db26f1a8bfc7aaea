"""Checks that a failed run planned and never ran: their tables' standing results shown again, not "failed".

Dagster plans every check of a run when the run is created. When a step fails, the steps after it never
start, and their checks (the blocking contract checks, the ``<op>_signals`` WARN checks) keep the planned
record of the failed run, which Dagster shows as "Execution failed" although the tables were not touched.
:func:`report_standing_checks` reports, for each such check, the result of the run that wrote the table as it
stands now (a runless check evaluation with the same outcome, severity and metadata, plus
``carried_from_run``, ``not_run_in`` and ``reason``), so the Checks tab shows the table's real state. A check
whose own step ran and failed keeps its failure; a check of a table that was never built is left as Dagster
shows it (there is no standing result to show).

Both paths that see failed runs call it: ``spatial-build`` after each failed run, and the run-failure sensor
(``pipelines.alerts``) for runs of the automation, the UI and backfills.
"""

from __future__ import annotations

import logging

import dagster as dg

logger = logging.getLogger(__name__)


def events_of_run(
    instance: dg.DagsterInstance, run_id: str, event_type: dg.DagsterEventType
) -> list[dg.DagsterEvent]:
    """The events of ``event_type`` in the run ``run_id``."""
    records = instance.get_records_for_run(run_id=run_id, of_type=event_type).records
    return [event for record in records if (event := record.event_log_entry.dagster_event) is not None]


def unrun_checks(instance: dg.DagsterInstance, run_id: str) -> list[dg.AssetCheckKey]:
    """The checks the run ``run_id`` planned, did not evaluate, and whose step never started."""
    started = {event.step_key for event in events_of_run(instance, run_id, dg.DagsterEventType.STEP_START)}
    evaluated = {
        event.asset_check_evaluation_data.asset_check_key
        for event in events_of_run(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    }
    planned = events_of_run(instance, run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION_PLANNED)
    return [
        key
        for event in planned
        if (key := event.asset_check_planned_data.asset_check_key) not in evaluated
        and event.step_key not in started
    ]


def standing_evaluation(
    instance: dg.DagsterInstance, key: dg.AssetCheckKey
) -> dg.AssetCheckEvaluation | None:
    """The last evaluation of ``key`` in the run that wrote its table's latest materialization (None when the
    table was never materialised or that run did not evaluate the check)."""
    materialization = instance.get_latest_materialization_event(key.asset_key)
    if materialization is None:
        return None
    evaluations = [
        event.asset_check_evaluation_data
        for event in events_of_run(
            instance, materialization.run_id, dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        if event.asset_check_evaluation_data.asset_check_key == key
    ]
    return evaluations[-1] if evaluations else None


def failure_reason(failed_steps: list[str]) -> str:
    """Why a failed run's later steps never ran, in a few words.

    >>> failure_reason(["rgbd_asset"]), failure_reason([])
    ('step rgbd_asset failed', 'the run failed')
    """
    if not failed_steps:
        return "the run failed"
    return f"step{'s' if len(failed_steps) > 1 else ''} {', '.join(failed_steps)} failed"


def report_standing_checks(instance: dg.DagsterInstance, run_id: str, reason: str) -> list[dg.AssetCheckKey]:
    """Show again the standing result of every check the failed run ``run_id`` planned and never ran (see the
    module docstring); ``reason`` says why the run did not run them. Returns the checks reported."""
    reported = []
    for key in unrun_checks(instance, run_id):
        standing = standing_evaluation(instance, key)
        if standing is None:
            continue
        metadata = {
            **standing.metadata,
            "carried_from_run": dg.MetadataValue.text(
                standing.target_materialization_data.run_id if standing.target_materialization_data else ""
            ),
            "not_run_in": dg.MetadataValue.text(run_id),
            "reason": dg.MetadataValue.text(reason),
        }
        instance.report_runless_asset_event(
            dg.AssetCheckEvaluation(
                asset_key=key.asset_key,
                check_name=key.name,
                passed=standing.passed,
                metadata=metadata,
                target_materialization_data=standing.target_materialization_data,
                severity=standing.severity,
                description=f"Not run in run {run_id[:8]} ({reason}); the table and this result stand.",
                blocking=standing.blocking,
                partition=standing.partition,
            )
        )
        reported.append(key)
    if reported:
        logger.info(
            "run %s did not run %d checks (%s): their tables' standing results are shown",
            run_id[:8],
            len(reported),
            reason,
        )
    return reported
