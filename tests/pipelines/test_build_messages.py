"""What ``spatial-build`` says when steps fail or a disk is full, and how builds started together share a new
``DAGSTER_HOME``.

- a failed step is one sentence on the console (no stack trace), its trace in the build's log file;
- a full storage root (``OSError(ENOSPC)`` raised by the table writer for one table, injected in the build's
  process) stops the build with one sentence naming the folder, exit status 74, no partition built again one
  run each, and a summary that counts the failed partitions;
- three builds' first starts on a fresh ``DAGSTER_HOME`` with the shipped ``dagster.yaml`` all get the instance.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import pytest
from dagster_shared.error import SerializableErrorInfo

import pipelines.cli
from pipelines.build_log import DAGSTER_LOGGER_NAME, dagster_logger, error_line, open_log_file
from pipelines.cli import EXIT_STORAGE_ROOT_FULL, INSTANCE_LOCK_FILE, build_waves
from pipelines.dagster_home import DagsterHomeUnwritable, StorageRootFull, check_storage_root
from pipelines.definitions import ALL_ASSETS
from pipelines.stop_signals import StopSignals
from tests.pipelines.test_build_stop import FakeResult, RecordingBuild

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPOSITORY_ROOT / "pipelines" / "deploy"
BUILD_TIMEOUT_S = 300
TINY_WORLD = ["--scenes", "1", "--views", "2", "--workers", "1"]

FAILING_BUILD = textwrap.dedent(
    """
    import errno, os, sys
    from pathlib import Path

    import assets.grounding.assets as grounding
    import data_contracts.storage as storage
    from pipelines.cli import main

    fault, argv = sys.argv[1], sys.argv[2:]
    if fault == "step":
        def failing(*args, **kwargs):
            raise ValueError("row 3 has no image")

        grounding.extract_object_phrases = failing
    else:  # the disk under the storage root is full once this table is written
        unique_file = storage._locked_unique_file

        def full_for(folder, prefix, suffix):
            if fault in Path(folder).parts:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(Path(folder) / (prefix + suffix)))
            return unique_file(folder, prefix, suffix)

        storage._locked_unique_file = full_for
    raise SystemExit(main(argv))
    """
)
"""``spatial-build`` with a fault: ``step`` (the ``object_phrases`` step raises) or a table's name (writing its
files fails with ENOSPC)."""


def _failing_build(tmp_path: Path, fault: str, *argv: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-c", FAILING_BUILD, fault, "--storage-root", str(tmp_path / "data"), *argv]
    return subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, cwd=REPOSITORY_ROOT
    )


@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_a_failed_step_is_one_sentence_and_its_trace_is_in_the_log_file(tmp_path):
    result = _failing_build(tmp_path, "step", *TINY_WORLD, "--select", "+key:object_phrases")
    assert result.returncode == 1, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if " ERROR " in line]
    (sentence,) = errors
    assert "step object_phrases_asset of run " in sentence and "(datasets_job) failed: " in sentence
    assert "ValueError: row 3 has no image. (stack trace: " in sentence
    assert "Traceback" not in result.stderr and 'File "' not in result.stderr
    (log_file,) = (tmp_path / "dagster_home" / "spatial-build-logs").glob("spatial-build-*.log")
    assert str(log_file) in sentence
    log = log_file.read_text()
    assert "STEP_FAILURE" in log and "Stack Trace:" in log and ", in failing" in log  # the whole trace
    assert sentence.split(" ERROR ", 1)[1] in log  # the build's own lines too
    assert "(1 failed)" in result.stdout.strip().splitlines()[-1]  # the unpartitioned definition that failed


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_a_full_storage_root_stops_the_build_with_one_sentence_and_an_honest_summary(tmp_path):
    result = _failing_build(tmp_path, "rgbd_frames", *TINY_WORLD, "--select", "+key:rgbd_frames")
    assert result.returncode == EXIT_STORAGE_ROOT_FULL, result.stderr[-3000:]
    root = tmp_path / "data"
    last = result.stderr.strip().splitlines()[-1]
    assert f"spatial-build stopped because the disk of the storage root ({root}) is full" in last, last
    assert "No space left on device" in last
    assert "Traceback" not in result.stderr and 'File "' not in result.stderr
    assert "one run each" not in result.stderr  # no partition is tried again on a full disk
    summary = result.stdout.strip().splitlines()[-1]
    # the sample world was built; the scans' range run (a ScanNet scan, an ARKitScenes video, a ScanNet++
    # scene) is what failed
    assert summary.startswith("Stopped after building 1 unpartitioned asset definitions (0 failed) and 0 "), (
        summary
    )
    assert "partitions (3 failed)" in summary, summary
    instance = dg.DagsterInstance.from_config(str(tmp_path / "dagster_home"))
    assert len(instance.get_runs(filters=dg.RunsFilter(job_name="dge_job"))) == 1
    (log_file,) = (tmp_path / "dagster_home" / "spatial-build-logs").glob("spatial-build-*.log")
    assert last.split(" ERROR ", 1)[1] in log_file.read_text()  # the sentence is in the build's log too


def test_a_full_disk_is_blamed_on_the_storage_root_only_when_it_is_there(tmp_path):
    root = tmp_path / "data"

    def error(path: str) -> SerializableErrorInfo:
        full = SerializableErrorInfo(
            f"OSError: [Errno 28] No space left on device: '{path}'\n", [], "OSError"
        )
        return SerializableErrorInfo("Error occurred while executing op rgbd_frames:", [], "StepError", full)

    assert check_storage_root(error(f"{root}/rgbd_frames/.a.parquet.tmp"), root).root == root
    assert check_storage_root(error("/elsewhere/a.parquet"), root) is None  # another disk
    root.mkdir()
    no_path = SerializableErrorInfo("OSError: [Errno 28] No space left on device\n", [], "OSError")
    assert check_storage_root(no_path, root) is None  # this root has room: the probe is written
    assert check_storage_root(SerializableErrorInfo("ValueError: bad row\n", [], "ValueError"), root) is None


def test_a_failure_whose_error_records_no_class_is_worded_by_its_message():
    """Dagster's error info may hold no class name: the sentence is then the message's first line."""
    inner = SerializableErrorInfo("the worker pool broke\nmore\n", [], None)
    outer = SerializableErrorInfo("Error occurred while executing op x:", [], "StepError", inner)

    assert error_line(outer) == "the worker pool broke"
    assert error_line(SerializableErrorInfo("ValueError: row 3\n", [], "ValueError")) == "ValueError: row 3"


def _full_disk(path: str) -> SerializableErrorInfo:
    full = SerializableErrorInfo(f"OSError: [Errno 28] No space left on device: '{path}'\n", [], "OSError")
    return SerializableErrorInfo(
        "Error occurred while executing op:", [], "DagsterExecutionStepExecutionError", full
    )


def test_a_full_storage_root_ends_a_range_run_without_runs_per_partition(tmp_path):
    """The shards' range run fails on a full disk: no run per partition, all 8 shards counted as failed."""
    root = tmp_path / "data"

    def result_for(job_name: str, run_id: str) -> FakeResult:
        if job_name == "grounding_shards_job":
            return FakeResult(
                run_id, failed={"pseudo_gt_boxes_asset": _full_disk(f"{root}/pseudo_gt_boxes/x")}
            )
        return FakeResult(run_id, succeeded=["object_phrases_asset"])

    waves = build_waves(
        ALL_ASSETS, dg.AssetSelection.from_string("key:object_phrases or key:pseudo_gt_boxes")
    )
    with StopSignals() as stop:
        build = RecordingBuild(stop, result_for=result_for, storage_root=root)
        with pytest.raises(StorageRootFull, match="storage root"):
            build.run_waves(waves)
    assert build.launched == ["observe_raw_files_job", "datasets_job", "grounding_shards_job"]
    assert (build.unpartitioned_built, build.unpartitioned_failed) == (1, [])
    assert build.partitions_ok == 0 and len(build.failed_partitions) == 8


def test_a_full_dagster_home_counts_the_steps_it_failed(tmp_path, monkeypatch):
    """A run whose signals step failed because DAGSTER_HOME is full: the steps that failed count as failed."""
    home_error = SerializableErrorInfo(
        "sqlite3.OperationalError: database or disk is full\n", [], "OperationalError"
    )
    unwritable = DagsterHomeUnwritable(tmp_path, "is full", "database or disk is full")
    monkeypatch.setattr(pipelines.cli, "check_dagster_home", lambda error: unwritable if error else None)

    def result_for(job_name: str, run_id: str) -> FakeResult:
        if job_name == "datasets_job":
            return FakeResult(
                run_id, succeeded=["mcq_questions_asset"], failed={"object_phrases_asset": home_error}
            )
        return FakeResult(run_id)

    waves = build_waves(ALL_ASSETS, dg.AssetSelection.from_string("key:object_phrases or key:mcq_questions"))
    with StopSignals() as stop:
        build = RecordingBuild(stop, result_for=result_for, storage_root=tmp_path / "data")
        with pytest.raises(DagsterHomeUnwritable):
            build.run_waves(waves)
    assert (build.unpartitioned_built, build.unpartitioned_failed) == (1, ["object_phrases_asset"])


def _failure_record(level: int = logging.ERROR) -> logging.LogRecord:
    event = SimpleNamespace(event_type_value=dg.DagsterEventType.STEP_FAILURE.value)  # what the filter reads
    record = logging.LogRecord(DAGSTER_LOGGER_NAME, level, __file__, 1, "STEP_FAILURE - trace here", (), None)
    record.dagster_meta = {"dagster_event": event}
    return record


@pytest.mark.parametrize("verbose", [False, True])
def test_dagsters_failure_events_reach_the_console_only_when_verbose(verbose, tmp_path, capsys):
    log_file = open_log_file(tmp_path / "logs" / "build.log")
    events = dagster_logger(verbose, log_file).logger_fn(None)
    events.handle(_failure_record())
    warning = logging.LogRecord(DAGSTER_LOGGER_NAME, logging.WARNING, __file__, 1, "a WARN check", (), None)
    warning.dagster_meta = {"dagster_event": None}
    events.handle(warning)
    log_file.flush()
    console = capsys.readouterr().err
    assert ("trace here" in console) == verbose and "a WARN check" in console
    assert "trace here" in (tmp_path / "logs" / "build.log").read_text()


FIRST_START = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    from pipelines.cli import open_instance

    go = Path(sys.argv[1])
    Path(sys.argv[2]).touch()  # ready
    while not go.exists():
        time.sleep(0.005)
    with open_instance() as instance:
        assert instance.get_runs() == []
    """
)


@pytest.mark.timeout(BUILD_TIMEOUT_S)
def test_builds_started_together_on_a_new_dagster_home_all_get_the_instance(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(DEPLOY / "dagster.yaml", home / "dagster.yaml")
    go = tmp_path / "go"
    environment = {**os.environ, "DAGSTER_HOME": str(home), "PYTHONPATH": str(REPOSITORY_ROOT)}
    starts = [
        subprocess.Popen(
            [sys.executable, "-c", FIRST_START, str(go), str(tmp_path / f"ready-{index}")],
            env=environment,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(3)
    ]
    try:
        while not all((tmp_path / f"ready-{index}").exists() for index in range(3)):
            assert all(start.poll() is None for start in starts), [start.communicate() for start in starts]
            time.sleep(0.01)
        go.touch()  # all three create the instance now
        outcomes = [start.communicate(timeout=BUILD_TIMEOUT_S) for start in starts]
    finally:
        for start in starts:
            if start.poll() is None:
                start.kill()
    assert [start.returncode for start in starts] == [0, 0, 0], [err[-2000:] for _, err in outcomes]
    assert (home / INSTANCE_LOCK_FILE).exists()
