"""Run-failure alerts: ``run_failure_alert_sensor`` logs a one-line summary of every failed run of this code
location and POSTs it as JSON (:func:`run_failure_summary`) to ``$SPATIAL_ALERT_WEBHOOK_URL`` when set
(``pipelines/README.md``, "Operator signals"), and shows again the standing results of the checks the run
never ran (:mod:`pipelines.unrun_checks`). A webhook that fails is logged as a warning and not retried.
The sensor starts running: it has nothing to do until a run fails, and an alert that must first be switched on
is one nobody receives.
"""

from __future__ import annotations

import http.client
import json
import os
import urllib.error
import urllib.request
from typing import Any

import dagster as dg

from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG, PARTITION_TAG
from pipelines.run_triggers import TRIGGER_TAG
from pipelines.unrun_checks import events_of_run, failure_reason, report_standing_checks

RUN_FAILURE_SENSOR = "run_failure_alert_sensor"
WEBHOOK_URL_ENV = "SPATIAL_ALERT_WEBHOOK_URL"
UI_URL_ENV = "SPATIAL_DAGSTER_UI_URL"
DEFAULT_UI_URL = "http://localhost:3000"
_STEP_ERROR_WRAPPER = "DagsterExecutionStepExecutionError"


def _first_line(text: str | None) -> str:
    return next((line.strip() for line in (text or "").splitlines() if line.strip()), "")


def run_partition(tags: dict[str, str]) -> str | None:
    """The partition a run covers, from its tags: the key, ``first...last`` for a range, else ``None``.

    >>> run_partition({"dagster/asset_partition_range_start": "a", "dagster/asset_partition_range_end": "c"})
    'a...c'
    >>> run_partition({"dagster/partition": "scene_0001"}), run_partition({})
    ('scene_0001', None)
    """
    if PARTITION_TAG in tags:
        return tags[PARTITION_TAG]
    if PARTITION_RANGE_START_TAG in tags:
        start, end = tags[PARTITION_RANGE_START_TAG], tags.get(PARTITION_RANGE_END_TAG)
        return start if end in (None, start) else f"{start}...{end}"
    return None


def step_error_line(event: dg.DagsterEvent) -> str:
    """The first line of a step failure's error: the description of a ``dg.Failure``, else the exception the
    op raised (not Dagster's wrapper around it)."""
    data = event.step_failure_data
    if data.user_failure_data is not None and data.user_failure_data.description:
        return _first_line(data.user_failure_data.description)
    error = data.error
    if error is None:
        return ""
    if error.cls_name == _STEP_ERROR_WRAPPER and error.cause is not None:
        error = error.cause
    return _first_line(error.message)


def run_failure_summary(context: dg.RunFailureSensorContext) -> dict[str, Any]:
    """The JSON object posted for a failed run: ``event``, ``run_id``, ``job``, ``partition`` (``first...last``
    for a range run), ``failed_steps``, ``failed_assets``, ``held_back_assets`` (the run's other tables that it
    did not build: their steps never ran, the previous tables stand, and the automation rebuilds them once the
    failed ones are rebuilt), ``error`` (the first line of the first failed step's error, else of the run's
    failure message), ``trigger``, ``run_path``, ``run_url`` and ``text`` (the log line, which chat webhooks
    show)."""
    run = context.dagster_run
    step_failures = context.get_step_failure_events()
    failed_steps = sorted({event.step_key for event in step_failures if event.step_key})
    planned = _asset_events(context.instance, run.run_id, dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED)
    failed_assets = sorted({asset for asset, step in planned if step in failed_steps})
    built = {
        asset
        for asset, _ in _asset_events(context.instance, run.run_id, dg.DagsterEventType.ASSET_MATERIALIZATION)
    }
    held_back = sorted({asset for asset, _ in planned} - set(failed_assets) - built)
    error = step_error_line(step_failures[0]) if step_failures else _first_line(context.failure_event.message)
    run_path = f"/runs/{run.run_id}"
    base = (os.environ.get(UI_URL_ENV) or DEFAULT_UI_URL).rstrip("/")
    summary = {
        "event": "run_failure",
        "run_id": run.run_id,
        "job": run.job_name,
        "partition": run_partition(dict(run.tags)),
        "failed_steps": failed_steps,
        "failed_assets": failed_assets,
        "held_back_assets": held_back,
        "error": error,
        "trigger": run.tags.get(TRIGGER_TAG),
        "run_path": run_path,
        "run_url": base + run_path,
    }
    summary["text"] = summary_line(summary)
    return summary


def _asset_events(
    instance: dg.DagsterInstance, run_id: str, event_type: dg.DagsterEventType
) -> set[tuple[str, str | None]]:
    """``(asset, step)`` of every event of ``event_type`` in the run ``run_id``."""
    return {
        (event.asset_key.to_user_string(), event.step_key)
        for event in events_of_run(instance, run_id, event_type)
        if event.asset_key is not None
    }


def summary_line(summary: dict[str, Any]) -> str:
    """The one-line form of a run-failure summary.

    >>> summary_line({"run_id": "0123456789ab", "job": "dge_job", "partition": "s1", "failed_steps": ["a_asset"],
    ...               "failed_assets": ["a"], "held_back_assets": ["b", "c"], "error": "Failure: bad scan",
    ...               "run_url": "http://h/runs/0123456789ab"})
    'Run 01234567 of dge_job failed (partition s1): steps a_asset; assets a: Failure: bad scan; held back until a is rebuilt: b, c (http://h/runs/0123456789ab)'
    """
    partition = f" (partition {summary['partition']})" if summary.get("partition") else ""
    steps = ", ".join(summary["failed_steps"]) or "none"
    assets = ", ".join(summary["failed_assets"]) or "none"
    held_back = summary.get("held_back_assets")
    waiting = f"; held back until {assets} is rebuilt: {', '.join(held_back)}" if held_back else ""
    return (
        f"Run {summary['run_id'][:8]} of {summary['job']} failed{partition}: steps {steps}; assets {assets}: "
        f"{summary['error']}{waiting} ({summary['run_url']})"
    )


def webhook_url() -> str | None:
    """``$SPATIAL_ALERT_WEBHOOK_URL``, or ``None`` when unset.

    Raises:
        ValueError: a URL that is not ``http://`` or ``https://``.
    """
    url = os.environ.get(WEBHOOK_URL_ENV, "").strip()
    if not url:
        return None
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"${WEBHOOK_URL_ENV} is {url!r}: give an http:// or https:// URL")
    return url


def post_json(url: str, payload: dict[str, Any]) -> int:
    """POST ``payload`` as JSON to ``url``; the response's status code.

    Raises:
        urllib.error.URLError: the server is unreachable or answered with an error status (``HTTPError``).
        http.client.HTTPException, ConnectionError: the server broke the exchange off.
        TimeoutError: no answer within 10 seconds.
    """
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status


@dg.run_failure_sensor(
    name=RUN_FAILURE_SENSOR,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=f"Post a JSON summary of every failed run to ${WEBHOOK_URL_ENV} (only log it when unset).",
)
def run_failure_alert_sensor(context: dg.RunFailureSensorContext) -> None:
    """Log a one-line summary of the failed run and post it to the webhook, if one is configured."""
    summary = run_failure_summary(context)
    context.log.error(summary["text"])
    report_standing_checks(context.instance, summary["run_id"], failure_reason(summary["failed_steps"]))
    url = webhook_url()
    if url is None:
        return
    try:
        status = post_json(url, summary)
    except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as error:
        context.log.warning(f"run-failure webhook {url} failed for run {summary['run_id']}: {error}")
        return
    context.log.info(f"run-failure webhook {url} answered {status} for run {summary['run_id']}")
