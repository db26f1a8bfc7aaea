"""What a ``spatial-build`` that died left on the instance, found and given back by the next build.

``spatial-build`` executes its runs in its own process (``execute_in_process``), so no run launcher watches
them and Dagster's run monitoring cannot tell that their process is gone: a build killed with SIGKILL (or
by the out-of-memory killer, or a reboot) leaves its run ``STARTED`` for good, and a step of a pool-limited
asset (``object_phrases`` in the ``llm`` pool) keeps its pool slot, so the next build's step waits for it
forever. Every build therefore records its process in the tags of its runs (:func:`build_process_tags`:
pid, process start time, host, PID namespace), and at its start :func:`reclaim_dead_builds` looks at the unfinished runs
of earlier builds:

- the build runs on this host and its process is gone (no such pid, a zombie, or the pid now belongs to
  a process started at another time): the run's pool slots and pending slot claims are freed and the run
  is marked failed, with an engine event and the failure message saying why; one log line per run;
- the build runs on another host, or in another container (PID namespace): left alone (its processes
  cannot be seen from here), said in the log;
- the run records no build process (a build from before these tags): left alone, said in the log.

Slots still held by finished runs of builds (one that was marked failed or canceled from the Dagster UI
while its step held a slot) are freed too. Runs that other tools launched are not touched.
"""

from __future__ import annotations

import enum
import logging
import os
import socket
from collections import defaultdict
from collections.abc import Mapping, Sequence

import dagster as dg
import psutil

logger = logging.getLogger("spatial_build.dead_builds")

LAUNCHED_BY_TAG = "spatial/launched_by"
LAUNCHED_BY = "spatial-build"
BUILD_TAG = "spatial/build"
BUILD_PID_TAG = "spatial/build_pid"
BUILD_HOST_TAG = "spatial/build_host"
BUILD_PROCESS_STARTED_TAG = "spatial/build_process_started"
"""Start time of the build's process (seconds since the epoch): tells a pid from its reuse by another process."""
BUILD_PID_NAMESPACE_TAG = "spatial/build_pid_namespace"
"""The PID namespace of the build's process (Linux): a container that shares the host's name does not share it."""

START_TIME_TOLERANCE_S = 1.0
"""How far two readings of one process's start time may differ (psutil computes it from the boot time)."""

UNFINISHED_STATUSES = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)
FINISHED_STATUSES = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)


class BuildProcess(enum.Enum):
    """What this host can say about the process of the build that a run belongs to."""

    ALIVE = "alive"
    GONE = "gone"
    OTHER_HOST = "on another host"
    UNKNOWN = "not recorded"


def _pid_namespace() -> str:
    """This process's PID namespace (``pid:[4026531836]``), or "" where ``/proc`` does not say."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def build_process_tags() -> dict[str, str]:
    """The run tags that name this process as the build's: pid, start time, host and PID namespace."""
    return {
        BUILD_PID_TAG: str(os.getpid()),
        BUILD_PROCESS_STARTED_TAG: repr(psutil.Process().create_time()),
        BUILD_HOST_TAG: socket.gethostname(),
        BUILD_PID_NAMESPACE_TAG: _pid_namespace(),
    }


def build_process_state(tags: Mapping[str, str], host: str | None = None) -> BuildProcess:
    """Whether the build process that ``tags`` (a run's tags) name still runs, seen from ``host`` (this one).

    A process in another PID namespace (a container that has the host's name) counts as on another host.

    >>> build_process_state(build_process_tags())
    <BuildProcess.ALIVE: 'alive'>
    >>> build_process_state({**build_process_tags(), BUILD_PROCESS_STARTED_TAG: "0.0"})  # pid reused
    <BuildProcess.GONE: 'gone'>
    """
    if not {BUILD_PID_TAG, BUILD_PROCESS_STARTED_TAG, BUILD_HOST_TAG} <= tags.keys():
        return BuildProcess.UNKNOWN
    if tags[BUILD_HOST_TAG] != (host or socket.gethostname()):
        return BuildProcess.OTHER_HOST
    if tags.get(BUILD_PID_NAMESPACE_TAG, "") != _pid_namespace():  # a container with the host's name
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


def _free(instance: dg.DagsterInstance, run: dg.DagsterRun, holds: Sequence[str], why: str) -> None:
    if not holds:
        return
    instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    instance.report_engine_event(f"{why}: freed its pool slots and slot claims ({', '.join(holds)})", run)


def _describe(run: dg.DagsterRun) -> str:
    return f"run {run.run_id} of {run.job_name} (build {run.tags.get(BUILD_TAG, '?')})"


def reclaim_dead_builds(instance: dg.DagsterInstance, this_build: str | None = None) -> list[str]:
    """Free what dead builds hold and mark their unfinished runs failed (see the module docstring).

    ``this_build`` (the ``spatial/build`` tag of the calling build) is never touched. Returns the ids of the
    runs whose slots were freed or that were marked failed.
    """
    held = held_by_run(instance)
    reclaimed: list[str] = []
    other_hosts: dict[str, list[str]] = defaultdict(list)
    unrecorded: list[str] = []
    unfinished = instance.get_runs(
        filters=dg.RunsFilter(tags={LAUNCHED_BY_TAG: LAUNCHED_BY}, statuses=list(UNFINISHED_STATUSES))
    )
    for run in unfinished:
        if this_build is not None and run.tags.get(BUILD_TAG) == this_build:
            continue
        state = build_process_state(run.tags)
        if state is BuildProcess.OTHER_HOST:
            host = run.tags[BUILD_HOST_TAG]
            if host == socket.gethostname():
                host += " (in another PID namespace: another container)"
            other_hosts[host].append(run.run_id)
            continue
        if state is BuildProcess.UNKNOWN:
            unrecorded.append(run.run_id)
            continue
        if state is BuildProcess.ALIVE:
            continue
        where = f"pid {run.tags[BUILD_PID_TAG]} on {run.tags[BUILD_HOST_TAG]}"
        why = f"the spatial-build process of this run ({where}) is gone"
        holds = held.pop(run.run_id, [])
        _free(instance, run, holds, why)
        instance.report_run_failed(
            run,
            message=f"{why} (killed, or its machine restarted), so the run cannot finish: marked failed by "
            "the next spatial-build",
        )
        reclaimed.append(run.run_id)
        logger.warning(
            "%s was %s but its build process (%s) is gone: marked failed%s",
            _describe(run),
            run.status.value,
            where,
            f", freed {', '.join(holds)}" if holds else "",
        )
    for host, run_ids in sorted(other_hosts.items()):
        logger.info(
            "left alone: unfinished runs of spatial-builds on host %s (only that host can tell whether they "
            "still run): %s",
            host,
            ", ".join(run_ids),
        )
    if unrecorded:
        logger.warning(
            "left as they are: unfinished spatial-build runs that record no build process (from builds before "
            "%s was recorded); terminate them in the Dagster UI if their build is gone: %s",
            BUILD_PID_TAG,
            ", ".join(unrecorded),
        )
    finished = (
        instance.get_runs(
            filters=dg.RunsFilter(
                run_ids=sorted(held), tags={LAUNCHED_BY_TAG: LAUNCHED_BY}, statuses=list(FINISHED_STATUSES)
            )
        )
        if held
        else []
    )
    for run in finished:
        holds = held[run.run_id]
        _free(instance, run, holds, f"this run ended ({run.status.value}) with pool slots still held")
        reclaimed.append(run.run_id)
        logger.warning(
            "%s ended (%s) but still held %s: freed", _describe(run), run.status.value, ", ".join(holds)
        )
    return reclaimed
