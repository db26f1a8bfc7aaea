"""What ``spatial-build`` says on the console and what it keeps in its log file.

The console gets one sentence per failed step (:func:`failure_sentences`: the step, the run, the error's
class and first line), and Dagster's warnings but not its errors; the build's log file
(:func:`default_log_file`, named in every such sentence) gets everything: the build's own lines and Dagster's
event log of every run from INFO on, full stack traces included. ``--verbose`` prints Dagster's event log on the
console as well, traces included.

Dagster's records reach both through :func:`dagster_logger`, the logger the build's runs use instead of
Dagster's console logger.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from dagster_shared.error import SerializableErrorInfo

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DAGSTER_LOGGER_NAME = "spatial_build.dagster"
FAILURE_EVENTS = frozenset({dg.DagsterEventType.STEP_FAILURE.value, dg.DagsterEventType.RUN_FAILURE.value})
"""Dagster events whose stack trace goes to the log file only (unless ``--verbose``): the build says them in one
sentence each."""


def default_log_file(build_id: str) -> Path:
    """``$DAGSTER_HOME/spatial-build-logs/spatial-build-<build>.log``, or the same name in the temporary folder
    when no ``DAGSTER_HOME`` is set (the storage root holds only the caches)."""
    home = os.environ.get("DAGSTER_HOME")
    folder = Path(home) / "spatial-build-logs" if home else Path(tempfile.gettempdir())
    return folder / f"spatial-build-{build_id}.log"


class LogFile(logging.FileHandler):
    """The build's log file; a write that fails (a full disk) turns it off quietly instead of printing a
    logging traceback for every line."""

    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 (logging's name)
        self.setLevel(logging.CRITICAL + 1)


def open_log_file(path: Path) -> LogFile | None:
    """A handler writing every record to ``path`` (its folder made), or None when it cannot be created."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = LogFile(path, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    return handler


def is_failure_event(record: logging.LogRecord) -> bool:
    """Whether ``record`` is Dagster's record of a failed step or run (the message carries its stack trace)."""
    meta = getattr(record, "dagster_meta", None)
    event = meta.get("dagster_event") if isinstance(meta, dict) else None
    return event is not None and event.event_type_value in FAILURE_EVENTS


class _WithoutErrors(logging.Filter):
    """Drops Dagster's error records (failed steps and runs with their traces, steps not executed after them):
    the build says each failed step in one sentence."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR and not is_failure_event(record)


def dagster_logger(verbose: bool, log_file: logging.Handler | None) -> dg.LoggerDefinition:
    """The logger of the build's runs: Dagster's records to the console (its warnings, or everything from INFO
    on with ``verbose``, stack traces included) and all of them from INFO on to ``log_file``."""
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(logging.Formatter(LOG_FORMAT))
    console.setLevel(logging.INFO if verbose else logging.WARNING)
    if not verbose:
        console.addFilter(_WithoutErrors())
    events = logging.Logger(DAGSTER_LOGGER_NAME, level=logging.INFO)  # not registered: no propagation
    events.addHandler(console)
    if log_file is not None:
        events.addHandler(log_file)
    return dg.LoggerDefinition(
        lambda _: events,
        description="spatial-build: Dagster's events to the console and the build's log file",
    )


def _innermost(error: SerializableErrorInfo) -> SerializableErrorInfo:
    """The error at the bottom of ``error``'s causes: the step's own exception under Dagster's wrappers."""
    while error.cause is not None:
        error = error.cause
    return error


def error_line(error: SerializableErrorInfo | None) -> str:
    """``Class: first line of the message`` of the innermost cause of ``error``.

    >>> from dagster_shared.error import SerializableErrorInfo
    >>> inner = SerializableErrorInfo("ValueError: row 3 has no image\\nmore\\n", [], "ValueError")
    >>> error_line(SerializableErrorInfo("Error occurred while executing op x:", [], "StepError", inner))
    'ValueError: row 3 has no image'
    """
    if error is None:
        return "no error recorded"
    innermost = _innermost(error)
    first = next((line.strip() for line in innermost.message.splitlines() if line.strip()), "")
    if innermost.cls_name is None or first.startswith(innermost.cls_name):  # no class recorded: the message
        return first
    return f"{innermost.cls_name}: {first}"


def failure_sentences(
    run_id: str,
    job_name: str,
    step_failures: Iterable[tuple[str | None, SerializableErrorInfo | None]],
    partition: str | None,
    log_file: Path | None,
) -> list[str]:
    """One sentence per failed step of a run (``step_failures``: step key and error).

    >>> failure_sentences("0123456789ab", "dge_job", [("scene_geometry", None)], "scene0001_00", None)
    ['step scene_geometry of run 01234567 (dge_job, partition scene0001_00) failed: no error recorded.']
    """
    where = f"{job_name}, partition {partition}" if partition else job_name
    trace = f" (stack trace: {log_file})" if log_file is not None else ""
    return [
        f"step {step} of run {run_id[:8]} ({where}) failed: {error_line(error).rstrip('.')}.{trace}"
        for step, error in step_failures
    ]
