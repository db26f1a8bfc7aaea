"""What a killed ``spatial-build`` left on the instance, given back by the next build.

``spatial-build`` executes its runs in its own process (``execute_in_process``), which Dagster's run monitoring
does not watch: a build killed outright leaves its runs unfinished and its concurrency-pool slots claimed, so
the next build's pooled step would wait forever. Every run therefore names its build's process
(:func:`build_process_tags`), and before it runs anything a build calls :func:`reclaim_dead_builds`: the
unfinished runs of builds on this host whose process is gone are marked failed and their slots freed, and so
are the slots that finished build runs still hold. Runs of builds on other hosts, runs that name no build
process and runs that other tools launched are left alone.

Only Dagster's public API is used for runs (``DagsterRunStatus``, ``get_run_records``, ``report_run_failed``).
Dagster has no public API for the slots of its concurrency pools (the UI frees them through GraphQL): they are
read and freed through the instance's event log storage (:func:`held_by_run`, :func:`free_pool_slots`), the
only two places that touch it, and ``tests/pipelines/test_dead_builds.py`` frees real slots through them.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
from collections import defaultdict
from collections.abc import Mapping

import dagster as dg
import psutil

logger = logging.getLogger("spatial_build.dead_builds")

LAUNCHED_BY_TAG = "spatial/launched_by"
LAUNCHED_BY = "spatial-build"
BUILD_TAG = "spatial/build"
BUILD_PID_TAG = "spatial/build_pid"
BUILD_PROCESS_STARTED_TAG = "spatial/build_process_started"
"""Start time of the build's process (seconds since the epoch): tells its pid from a later process's."""
BUILD_HOST_TAG = "spatial/build_host"
"""The build's host and PID namespace: its pid means something only where both are this process's."""
START_TIME_TOLERANCE_S = 1.0
"""How far two readings of one process's start time may differ (psutil computes it from the boot time)."""
FINISHED_STATUSES = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
"""A run in one of these has ended."""
NOT_FINISHED_STATUSES = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.SUSPENDED,
    dg.DagsterRunStatus.CANCELING,
)
"""A run in one of these has not ended (``MANAGED``, a run Dagster does not manage, is in neither)."""


class BuildProcess(enum.Enum):
    """What this host can say about the process of the build that a run belongs to."""

    ALIVE = "alive"
    GONE = "gone"
    OTHER_HOST = "on another host"
    UNKNOWN = "not recorded"


def _host() -> str:
    try:
        return f"{socket.gethostname()} ({os.readlink('/proc/self/ns/pid')})"
    except OSError:  # no /proc
        return socket.gethostname()


def build_process_tags() -> dict[str, str]:
    """The run tags that name this process as the build's: pid, start time, host."""
    return {
        BUILD_PID_TAG: str(os.getpid()),
        BUILD_PROCESS_STARTED_TAG: repr(psutil.Process().create_time()),
        BUILD_HOST_TAG: _host(),
    }


def build_process_state(tags: Mapping[str, str]) -> BuildProcess:
    """Whether the build process that ``tags`` (a run's tags) name still runs, as this host sees it.

    >>> build_process_state(build_process_tags())
    <BuildProcess.ALIVE: 'alive'>
    >>> build_process_state({**build_process_tags(), BUILD_PROCESS_STARTED_TAG: "0.0"})  # pid reused
    <BuildProcess.GONE: 'gone'>
    """
    if not {BUILD_PID_TAG, BUILD_PROCESS_STARTED_TAG, BUILD_HOST_TAG} <= tags.keys():
        return BuildProcess.UNKNOWN
    if tags[BUILD_HOST_TAG] != _host():
        return BuildProcess.OTHER_HOST
    try:
        process = psutil.Process(int(tags[BUILD_PID_TAG]))
        if process.status() == psutil.STATUS_ZOMBIE:  # killed, not yet reaped by its parent
            return BuildProcess.GONE
        started = process.create_time()
    except psutil.NoSuchProcess:
        return BuildProcess.GONE
    except psutil.AccessDenied:  # another user's process, alive: its start time cannot be read
        return BuildProcess.ALIVE
    if abs(started - float(tags[BUILD_PROCESS_STARTED_TAG])) > START_TIME_TOLERANCE_S:
        return BuildProcess.GONE  # the pid now belongs to a later process
    return BuildProcess.ALIVE


def held_by_run(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """Run id -> what it holds in the concurrency pools: ``pool:step`` per claimed slot and
    ``pool:step (waiting)`` per pending slot claim (an assigned claim also keeps a slot from others)."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return {}
    held: dict[str, list[str]] = defaultdict(list)
    for pool, info in storage.get_concurrency_infos(sorted(storage.get_concurrency_keys())).items():
        claimed = {(slot.run_id, slot.step_key) for slot in info.claimed_slots}
        for run_id, step_key in sorted(claimed):
            held[run_id].append(f"{pool}:{step_key}")
        for step in info.pending_steps:
            if (step.run_id, step.step_key) not in claimed:
                held[step.run_id].append(f"{pool}:{step.step_key} (waiting)")
    return dict(held)


def free_pool_slots(instance: dg.DagsterInstance, run_id: str) -> None:
    """Give back every concurrency-pool slot (claimed or waited for) that run ``run_id`` holds."""
    instance.event_log_storage.free_concurrency_slots_for_run(run_id)


def reclaim_dead_builds(instance: dg.DagsterInstance, this_build: str | None = None) -> list[str]:
    """Free what dead builds hold and mark their unfinished runs failed (see the module docstring); one log
    line per run. ``this_build`` (the calling build's ``spatial/build`` tag) is never touched. Returns the ids
    of the runs whose slots were freed or that were marked failed."""
    held = held_by_run(instance)
    builds = {LAUNCHED_BY_TAG: LAUNCHED_BY}
    reclaimed: list[str] = []
    unfinished = instance.get_run_records(dg.RunsFilter(tags=builds, statuses=list(NOT_FINISHED_STATUSES)))
    for run in (record.dagster_run for record in unfinished):
        state = build_process_state(run.tags)
        if run.tags.get(BUILD_TAG) == this_build or state is BuildProcess.ALIVE:
            continue
        if state is not BuildProcess.GONE:
            logger.info("left alone: run %s, its build process is %s", run.run_id, state.value)
            continue
        where = f"pid {run.tags[BUILD_PID_TAG]} on {run.tags[BUILD_HOST_TAG]}"
        holds = held.pop(run.run_id, [])
        if holds:
            free_pool_slots(instance, run.run_id)
        instance.report_run_failed(
            run,
            message=f"the spatial-build process of this run ({where}) is gone: marked failed by the next build",
        )
        reclaimed.append(run.run_id)
        logger.warning(
            "run %s of %s (build %s) was %s but its build process (%s) is gone: marked failed%s",
            *(run.run_id, run.job_name, run.tags.get(BUILD_TAG), run.status.value, where),
            f", freed {', '.join(holds)}" if holds else "",
        )
    finished = (
        instance.get_run_records(
            dg.RunsFilter(run_ids=sorted(held), tags=builds, statuses=list(FINISHED_STATUSES))
        )
        if held  # a filter on run ids takes a non-empty list
        else []
    )
    for run in (record.dagster_run for record in finished):
        free_pool_slots(instance, run.run_id)
        reclaimed.append(run.run_id)
        logger.warning(
            "run %s ended (%s) but still held %s: freed",
            run.run_id,
            run.status.value,
            ", ".join(held[run.run_id]),
        )
    return reclaimed
