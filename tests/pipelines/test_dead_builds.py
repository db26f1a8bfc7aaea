"""A killed ``spatial-build`` never blocks the next one; a full ``DAGSTER_HOME`` ends a build with one sentence.

The killed builds are real ``spatial-build`` processes on a tiny world (1 scene, 2 views, the graph up to
``object_phrases``) whose ``object_phrases`` step, in the ``llm`` pool limited to one slot, is made to wait
after it took its slot (:data:`HOLDING_BUILD`); the test then kills the process with SIGKILL (or stops it
with SIGTERM) and runs the next build (``main`` in the test's process), on SQLite (no ``dagster.yaml``) and
on ``dagster-postgres.yaml`` against a real PostgreSQL server (marker ``postgres``).
The full disk is a real one: a tiny tmpfs mounted over ``DAGSTER_HOME`` in a user and mount namespace
(``unshare -rm``, no root needed).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import dagster as dg
import psutil
import pytest

from pipelines.cli import EXIT_DAGSTER_HOME_UNWRITABLE, EXIT_INTERRUPTED, main
from pipelines.dagster_home import check_dagster_home
from pipelines.dead_builds import (
    BUILD_HOST_TAG,
    BUILD_PID_TAG,
    BUILD_PROCESS_STARTED_TAG,
    BUILD_TAG,
    FINISHED_STATUSES,
    LAUNCHED_BY,
    LAUNCHED_BY_TAG,
    NOT_FINISHED_STATUSES,
    BuildProcess,
    build_process_state,
    build_process_tags,
    reclaim_dead_builds,
)
from tests.pipelines.test_postgres import DEPLOY, postgres_server  # noqa: F401 (a fixture)

HOLDING_BUILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import assets.grounding.assets as grounding
    from pipelines.cli import main

    def holding_its_slot(*args, **kwargs):  # the object_phrases step, held while it has its llm slot
        Path(sys.argv[1]).write_text("holding")
        time.sleep(600)

    grounding.extract_object_phrases = holding_its_slot
    raise SystemExit(main(sys.argv[2:]))
    """
)
"""``spatial-build`` (its ``main``) whose ``object_phrases`` step writes the file ``argv[1]`` and then waits."""

TINY_BUILD = ["--scenes", "1", "--views", "2", "--select", "+key:object_phrases"]
BUILD_TIMEOUT_S = 120  # a tiny build takes about 6 s; one that waits for a slot never ends
LLM_POOL = "llm"


@pytest.fixture(
    params=[
        "no dagster.yaml",  # SQLite as the shipped dagster.yaml has it, without its run monitoring
        pytest.param("dagster-postgres.yaml", marks=[pytest.mark.postgres, pytest.mark.slow]),
    ]
)
def dagster_home(request, tmp_path, monkeypatch) -> Path:
    """``DAGSTER_HOME`` (in the environment) with no instance file, or the PostgreSQL deployment file."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    if request.param != "no dagster.yaml":
        shutil.copy(DEPLOY / request.param, home / "dagster.yaml")
    if request.param == "dagster-postgres.yaml":
        for name, value in request.getfixturevalue("postgres_server").items():
            monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return home


def _start_holding_build(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """A build whose ``object_phrases`` step holds the only ``llm`` slot, and its run; returns once it does."""
    with dg.DagsterInstance.get() as instance:
        instance.event_log_storage.set_concurrency_slots(LLM_POOL, 1)
    holding, log = tmp_path / "holding", tmp_path / "killed_build.log"
    command = [sys.executable, "-c", HOLDING_BUILD, str(holding), "--storage-root", str(tmp_path / "data")]
    with log.open("w") as stderr:
        build = subprocess.Popen(
            [*command, *TINY_BUILD], stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True
        )
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    while not holding.exists():
        if build.poll() is not None or time.monotonic() > deadline:
            if build.poll() is None:
                os.killpg(build.pid, signal.SIGKILL)
            pytest.fail(f"the build never reached object_phrases:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)
    with dg.DagsterInstance.get() as instance:
        (run_id,), _ = _slot_holders(instance)
    return build, run_id


def _slot_holders(instance: dg.DagsterInstance) -> tuple[list[str], list[str]]:
    """Runs holding an ``llm`` slot, runs with a pending claim on one."""
    info = instance.event_log_storage.get_concurrency_info(LLM_POOL)
    return [slot.run_id for slot in info.claimed_slots], [step.run_id for step in info.pending_steps]


@pytest.mark.timeout(2 * BUILD_TIMEOUT_S + 60)  # a next build that waits for the dead slot never ends
def test_a_killed_build_never_blocks_the_next_one(dagster_home, tmp_path, caplog):
    """The killed build is a process of its own; the next build runs ``main`` here, as its process would."""
    killed, dead_run_id = _start_holding_build(tmp_path)
    try:
        with dg.DagsterInstance.get() as instance:
            dead_run = instance.get_run_by_id(dead_run_id)
        assert dead_run.status == dg.DagsterRunStatus.STARTED
        assert dead_run.tags[BUILD_PID_TAG] == str(killed.pid)
        killed.kill()
        killed.wait(timeout=10)
    finally:
        if killed.poll() is None:
            os.killpg(killed.pid, signal.SIGKILL)

    caplog.set_level(logging.INFO, logger="spatial_build")
    started = time.perf_counter()
    status = main(["--storage-root", str(tmp_path / "data"), *TINY_BUILD])
    seconds = time.perf_counter() - started
    messages = [record.getMessage() for record in caplog.records]
    assert status == 0, messages[-20:]
    (line,) = [message for message in messages if dead_run_id in message]
    assert f"run {dead_run_id} of datasets_job" in line and "marked failed" in line, line
    assert f"build process (pid {killed.pid} on " in line and f"freed {LLM_POOL}:object_phrases_asset" in line
    with dg.DagsterInstance.get() as instance:
        assert instance.get_run_by_id(dead_run_id).status == dg.DagsterRunStatus.FAILURE
        (failure,) = instance.get_records_for_run(
            dead_run_id, of_type=dg.DagsterEventType.RUN_FAILURE
        ).records
        assert "is gone" in failure.event_log_entry.dagster_event.message
        assert _slot_holders(instance) == ([], [])  # the next build ended normally and freed its own too
        succeeded = instance.get_runs(
            filters=dg.RunsFilter(job_name="datasets_job", statuses=[dg.DagsterRunStatus.SUCCESS])
        )
        assert any(run.tags[BUILD_TAG] != dead_run.tags[BUILD_TAG] for run in succeeded)
    logging.getLogger(__name__).info("next build after the kill: %.1f s", seconds)


@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_a_build_stopped_by_sigterm_frees_its_slot(tmp_path, monkeypatch):
    (tmp_path / "dagster_home").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    build, run_id = _start_holding_build(tmp_path)
    try:
        build.send_signal(signal.SIGTERM)
        assert build.wait(timeout=60) == EXIT_INTERRUPTED
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
    with dg.DagsterInstance.get() as instance:
        assert _slot_holders(instance) == ([], [])
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE


def _build_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, **tags: str) -> str:
    run_id = str(uuid.uuid4())
    all_tags = {LAUNCHED_BY_TAG: LAUNCHED_BY, BUILD_TAG: uuid.uuid4().hex[:12], **tags}
    instance.add_run(dg.DagsterRun(job_name="datasets_job", run_id=run_id, status=status, tags=all_tags))
    return run_id


def test_only_runs_whose_build_is_gone_here_are_reclaimed(tmp_path, caplog):
    """Runs of builds that are alive, on another host or unrecorded keep what they hold; a run whose pid now
    belongs to another process, and a finished run still holding a slot, give theirs back, pending claims too."""
    caplog.set_level(logging.INFO, logger="spatial_build")
    alive = build_process_tags()
    reused_pid = {**alive, BUILD_PROCESS_STARTED_TAG: "1000000000.0"}  # this pid, but a process of 2001
    other_host = {**alive, BUILD_HOST_TAG: "another-host"}
    statuses = dg.DagsterRunStatus
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots(LLM_POOL, 4)
        runs = {
            "alive": _build_run(instance, statuses.STARTED, **alive),
            "other host": _build_run(instance, statuses.STARTED, **other_host),
            "unrecorded": _build_run(instance, statuses.STARTED),
            "reused pid": _build_run(instance, statuses.STARTED, **reused_pid),
            "canceled": _build_run(instance, statuses.CANCELED, **alive),
        }
        for name in ("alive", "other host", "reused pid"):
            assert storage.claim_concurrency_slot(LLM_POOL, runs[name], "object_phrases_asset").is_claimed
        assert storage.claim_concurrency_slot(
            LLM_POOL, runs["unrecorded"], "stvqa_candidates_asset"
        ).is_claimed
        # every slot is taken: these two wait
        assert not storage.claim_concurrency_slot(
            LLM_POOL, runs["canceled"], "object_phrases_asset"
        ).is_claimed
        assert not storage.claim_concurrency_slot(LLM_POOL, runs["reused pid"], "sft_cold_start").is_claimed

        reclaimed = reclaim_dead_builds(instance)

        assert sorted(reclaimed) == sorted([runs["reused pid"], runs["canceled"]])
        claimed, pending = _slot_holders(instance)
        assert sorted(claimed) == sorted([runs["alive"], runs["other host"], runs["unrecorded"]])
        assert runs["reused pid"] not in pending and runs["canceled"] not in pending
        status = {name: instance.get_run_by_id(run_id).status for name, run_id in runs.items()}
        assert status == {
            "alive": statuses.STARTED,
            "other host": statuses.STARTED,
            "unrecorded": statuses.STARTED,
            "reused pid": statuses.FAILURE,
            "canceled": statuses.CANCELED,
        }
    messages = [record.getMessage() for record in caplog.records]
    (reused,) = [m for m in messages if runs["reused pid"] in m]
    assert "was STARTED but its build process" in reused and "marked failed" in reused
    assert f"{LLM_POOL}:object_phrases_asset, {LLM_POOL}:sft_cold_start (waiting)" in reused
    (canceled,) = [m for m in messages if runs["canceled"] in m]
    assert "ended (CANCELED) but still held llm:object_phrases_asset (waiting): freed" in canceled
    (host,) = [m for m in messages if runs["other host"] in m]
    assert "left alone" in host and "on another host" in host
    (unrecorded,) = [m for m in messages if runs["unrecorded"] in m]
    assert "left alone" in unrecorded and "not recorded" in unrecorded
    assert not any(runs["alive"] in m for m in messages)


def test_every_run_status_is_finished_or_not_except_managed():
    """The two lists name every status Dagster has (a new one in an upgrade shows here), each once."""
    assert set(FINISHED_STATUSES).isdisjoint(NOT_FINISHED_STATUSES)
    assert {*FINISHED_STATUSES, *NOT_FINISHED_STATUSES, dg.DagsterRunStatus.MANAGED} == set(
        dg.DagsterRunStatus
    )


def test_a_pid_that_is_gone_or_reused_is_a_dead_build():
    sleeper = subprocess.Popen(["sleep", "30"])
    process = psutil.Process(sleeper.pid)
    tags = {
        **build_process_tags(),  # this host and PID namespace
        BUILD_PID_TAG: str(sleeper.pid),
        BUILD_PROCESS_STARTED_TAG: repr(process.create_time()),
    }
    assert build_process_state(tags) is BuildProcess.ALIVE
    sleeper.kill()
    deadline = time.monotonic() + 10
    while process.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.05)
    assert build_process_state(tags) is BuildProcess.GONE  # a zombie: killed, not yet reaped
    sleeper.wait()
    assert build_process_state(tags) is BuildProcess.GONE  # no such process
    assert build_process_state(build_process_tags()) is BuildProcess.ALIVE
    assert build_process_state({}) is BuildProcess.UNKNOWN
    # this host's name, but another container: its pids mean nothing here
    another_container = {**tags, BUILD_HOST_TAG: socket.gethostname() + " (pid:[1])"}
    assert build_process_state(another_container) is BuildProcess.OTHER_HOST


def _namespaces_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


@pytest.mark.parametrize(
    ("mount_options", "problem"),
    [
        ("size=64k", "the disk of DAGSTER_HOME ({home}) is full"),  # full before the instance's tables exist
        ("size=1m", "the disk of DAGSTER_HOME ({home}) is full"),  # fills up during the build
        ("ro,size=1m", "DAGSTER_HOME ({home}) is not writable (Read-only file system)"),
    ],
)
@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_a_full_dagster_home_ends_the_build_with_one_sentence(tmp_path, mount_options, problem):
    if not _namespaces_available():
        pytest.skip("user and mount namespaces (unshare -rm) are not available: no tmpfs without root")
    home = tmp_path / "dagster_home"
    home.mkdir()
    build = [sys.executable, "-m", "pipelines.cli", "--storage-root", str(tmp_path / "data"), *TINY_BUILD]
    mount = f'mount -t tmpfs -o {mount_options} tmpfs "$0" && exec "$@"'
    result = subprocess.run(
        ["unshare", "-rm", "sh", "-c", mount, str(home), *build],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert result.returncode == EXIT_DAGSTER_HOME_UNWRITABLE, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert f"spatial-build stopped because {problem.format(home=home)}, so Dagster cannot record" in last, (
        last
    )
    assert "Traceback (most recent call last)" not in result.stderr
    assert "Parquet caches under" in result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("Stopped after building")


def test_a_storage_error_about_another_disk_is_not_blamed_on_dagster_home(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # room to spare
    assert check_dagster_home(sqlite3.OperationalError("database or disk is full")) is None
    assert check_dagster_home(ValueError("row 3 has no image")) is None
