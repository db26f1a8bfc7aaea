"""The raw folders' file watcher and the observation it makes ``raw_files_sensor`` request."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg
import pytest

from assets.resources import SourcesResource, StorageResource
from pipelines import file_watch
from pipelines.automation import OBSERVE_RAW_FILES_JOB, RAW_FILES_SENSOR
from pipelines.file_watch import RawFileWatcher, observation_due, raw_file_watcher


def _wait_for(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    watched, other = tmp_path / "scans", tmp_path / "elsewhere"
    (watched / "scene0000_00" / "pose").mkdir(parents=True)
    (watched / "scene0000_00" / "pose" / "0.txt").write_text("1 0 0 0")
    other.mkdir()
    return watched, other


def test_a_write_a_new_file_a_deletion_and_a_move_are_changes(folders):
    watched, _ = folders
    watcher = RawFileWatcher([watched])
    try:
        pose = watched / "scene0000_00" / "pose" / "0.txt"
        for change in (
            lambda: pose.write_text("2 0 0 0"),
            lambda: (watched / "scene0000_00" / "pose" / "1.txt").write_text("new"),
            lambda: (watched / "scene0000_00" / "pose" / "1.txt").rename(
                watched / "scene0000_00" / "moved.txt"
            ),
            lambda: (watched / "scene0000_00" / "moved.txt").unlink(),
        ):
            before = time.time()
            time.sleep(0.01)
            change()
            assert _wait_for(lambda since=before: (watcher.last_change or 0) > since)
    finally:
        watcher.stop()


def test_reading_a_file_or_changing_one_outside_the_roots_is_no_change(folders):
    watched, other = folders
    spatialab = other / "spatialab.json"
    spatialab.write_text("[]")
    watcher = RawFileWatcher([watched, spatialab])  # a file root is watched through its folder
    try:
        (watched / "scene0000_00" / "pose" / "0.txt").read_bytes()
        (other / "unrelated.txt").write_text("beside the watched file")
        time.sleep(1.0)  # events arrive within milliseconds: any would have been recorded by now
        assert watcher.last_change is None
        spatialab.write_text("[1]")
        assert _wait_for(lambda: watcher.last_change is not None)
    finally:
        watcher.stop()


def test_an_observation_is_due_at_the_interval_or_after_a_quiet_change(monkeypatch):
    monkeypatch.setenv(file_watch.OBSERVE_INTERVAL_ENV, "300")

    class Seen:
        last_change = None

    seen = Seen()
    assert observation_due(None, None, now=1000.0) == "interval"  # never observed
    assert observation_due(900.0, seen, now=1000.0) is None
    assert observation_due(600.0, seen, now=1000.0) == "interval"
    seen.last_change = 998.0  # changed after the last request, quiet for only 2 s
    assert observation_due(900.0, seen, now=1000.0) is None
    assert observation_due(900.0, seen, now=998.0 + file_watch.QUIET_SECONDS) == "file change"
    assert observation_due(999.0, seen, now=1010.0) is None  # observed since the change


def test_the_sensor_observes_seconds_after_an_edit_and_not_before(folders, tmp_path, monkeypatch):
    watched, _ = folders
    monkeypatch.setattr(file_watch, "QUIET_SECONDS", 0.2)
    defs_sensor = _raw_files_sensor()
    resources = {
        "sources": SourcesResource(scannet_root=str(watched)),
        "storage": StorageResource(root=str(tmp_path / "data")),
    }
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        context = dg.build_sensor_context(instance=instance, resources=resources)
        first = defs_sensor(context)  # never observed: due, and the watcher starts
        assert [request.job_name or OBSERVE_RAW_FILES_JOB for request in first.run_requests] == [
            OBSERVE_RAW_FILES_JOB
        ]
        assert first.run_requests[0].tags["spatial/trigger"] == f"{RAW_FILES_SENSOR} (interval)"
        cursor = context.cursor
        assert isinstance(
            defs_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor)),
            dg.SkipReason,
        )
        (watched / "scene0000_00" / "pose" / "0.txt").write_text("edited")
        watcher = raw_file_watcher([watched])
        assert _wait_for(lambda: watcher.last_change is not None and time.time() - watcher.last_change > 0.2)
        edited = defs_sensor(dg.build_sensor_context(instance=instance, resources=resources, cursor=cursor))
        assert edited.run_requests[0].tags["spatial/trigger"] == f"{RAW_FILES_SENSOR} (file change)"


def test_watching_turned_off_leaves_the_interval(folders, monkeypatch):
    watched, _ = folders
    monkeypatch.setenv(file_watch.WATCH_ENV, "0")
    assert raw_file_watcher([watched]) is None


def _raw_files_sensor():
    from pipelines.definitions import build_definitions

    return build_definitions().resolve_sensor_def(RAW_FILES_SENSOR)
