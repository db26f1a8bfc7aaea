"""The raw-file observation: content fingerprints against an independent hash, changes, caching, scale.

The expected fingerprints are computed here from the files themselves (``hashlib`` over ``sorted(rglob)``),
not with :mod:`assets.raw_files`.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import shutil
import sqlite3
from pathlib import Path

import dagster as dg
import pytest

from assets.partitions import SCENES_PARTITIONS_NAME
from assets.raw_files import FileChanges, FileHashCache, changes_between, content_fingerprint, observe_roots
from assets.resources import SourcesResource, StorageResource
from pipelines.automation import OBSERVE_RAW_FILES_JOB, RAW_FILES_SENSOR
from tests.automation_ticks import evaluate_tick


def independent_fingerprint(roots: list[Path | None]) -> str:
    """The documented fingerprint, from the files: per root its index, then per file (in path order) its path
    relative to the root and the SHA-256 of its bytes."""
    digest = hashlib.sha256()
    for index, root in enumerate(roots):
        digest.update(f"root {index}\n".encode())
        if root is None:
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for path in files:
            relative = path.name if path == root else path.relative_to(root).as_posix()
            digest.update(f"{relative}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return digest.hexdigest()[:16]


@pytest.fixture
def scan(tmp_path: Path) -> Path:
    """A scan-like folder whose names sort differently as text and as path parts (``a-b`` and ``a/x``)."""
    root = tmp_path / "scans" / "scene0000_00"
    for relative, content in {
        "a/x.txt": "x",
        "a-b": "ab",
        "color/10.jpg": "ten",
        "color/2.jpg": "two",
        "pose/0.txt": "1 0 0 0",
        "scene0000_00.txt": "axisAlignment = 1 0 0 0",
    }.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)
    return root


def test_fingerprint_matches_an_independent_hash_of_the_files(scan: Path, tmp_path: Path):
    single = scan / "pose" / "0.txt"
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        for roots in ([scan], [scan, None], [single], [None], [tmp_path / "missing"], [scan, single]):
            assert content_fingerprint(roots, cache) == independent_fingerprint(roots), roots
        assert content_fingerprint([scan], cache) == independent_fingerprint([scan])  # warm: the same


def test_an_observation_lists_what_was_added_edited_and_deleted_and_nothing_else(scan: Path, tmp_path: Path):
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        _, first = observe_roots([scan], cache, record=True)
        everything = ("a/x.txt", "a-b", "color/10.jpg", "color/2.jpg", "pose/0.txt", "scene0000_00.txt")
        assert first == FileChanges(added=everything)
        assert not observe_roots([scan], cache, record=True)[1]
        (scan / "pose" / "0.txt").write_text("1 0 0 1")
        (scan / "pose" / "1.txt").write_text("new")
        (scan / "a" / "x.txt").unlink()
        os.utime(scan / "color" / "2.jpg")  # touched, same bytes: no change
        version, changes = observe_roots([scan], cache, record=True)
        assert changes == FileChanges(added=("pose/1.txt",), edited=("pose/0.txt",), deleted=("a/x.txt",))
        assert version == independent_fingerprint([scan])
        assert not observe_roots([scan], cache, record=True)[1]


def test_reading_a_scan_to_build_it_leaves_its_changes_to_the_observation(scan: Path, tmp_path: Path):
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        observe_roots([scan], cache, record=True)
        (scan / "pose" / "0.txt").write_text("edited")
        (scan / "color" / "10.jpg").unlink()
        (scan / "pose" / "1.txt").write_text("new")
        built, nothing = observe_roots([scan], cache)  # a build reads the scan first
        assert not nothing
        observed, changes = observe_roots([scan], cache, record=True)
    assert observed == built
    assert changes == FileChanges(added=("pose/1.txt",), edited=("pose/0.txt",), deleted=("color/10.jpg",))


def test_a_deleted_single_file_root_and_a_restored_one_are_reported(scan: Path, tmp_path: Path):
    single = scan / "scene0000_00.txt"
    text = single.read_text()
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        observe_roots([single], cache, record=True)
        (scan / "scene0000_00.txt.bak").write_text("a sibling whose name starts like the file's")
        observe_roots([scan / "scene0000_00.txt.bak"], cache, record=True)
        single.unlink()
        assert observe_roots([single], cache, record=True)[1] == FileChanges(deleted=("scene0000_00.txt",))
        single.write_text(text)
        assert observe_roots([single], cache, record=True)[1] == FileChanges(added=("scene0000_00.txt",))


def test_the_recorded_history_gives_the_net_change_between_two_versions(scan: Path, tmp_path: Path):
    def observe(cache: FileHashCache) -> str:
        version, changes = observe_roots([scan], cache, record=True)
        cache.record_change("raw_scan_files", "scene0000_00", version, changes)
        return version

    pose = scan / "pose" / "0.txt"
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        built = observe(cache)
        pose.write_text("edited")
        (scan / "pose" / "1.txt").write_text("new")
        observe(cache)
        (scan / "pose" / "1.txt").unlink()
        (scan / "a-b").unlink()
        latest = observe(cache)
        history = cache.recorded_changes("raw_scan_files", "scene0000_00")
    assert [change.version for change in history] == [latest, history[1].version, built]
    assert changes_between(history, built, latest) == FileChanges(edited=("pose/0.txt",), deleted=("a-b",))
    assert changes_between(history, history[1].version, latest) == FileChanges(deleted=("a-b", "pose/1.txt"))
    assert not changes_between(history, latest, latest)


def test_an_unchanged_file_is_not_read_and_hard_links_are_read_once(scan: Path, tmp_path: Path, monkeypatch):
    links = tmp_path / "scans" / "scene0001_00"
    shutil.copytree(scan, links, copy_function=os.link)
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        monkeypatch.setattr(builtins, "open", counting_open)
        cold = [observe_roots([folder], cache, record=True) for folder in (scan, links)]
        read_cold = sorted(Path(path).relative_to(tmp_path).as_posix() for path in opened)
        opened.clear()
        warm = [observe_roots([folder], cache, record=True) for folder in (scan, links)]
        monkeypatch.undo()
    assert read_cold == sorted(f"scans/scene0000_00/{name}" for name in cold[0][1].added)  # each inode once
    assert cold[1][1] == cold[0][1]  # the linked scan's files are new to it all the same
    assert opened == []  # a no-change observation reads no content
    assert [version for version, _ in warm] == [version for version, _ in cold]


def test_a_moved_folder_keeps_its_fingerprint(scan: Path, tmp_path: Path):
    moved = tmp_path / "elsewhere" / "scene0000_00"
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        before = content_fingerprint([scan], cache)
        shutil.copytree(scan, moved)  # new paths, inodes and modification times
        assert content_fingerprint([moved], cache) == before


def _sensor_context(instance: dg.DagsterInstance, scans: Path, storage: Path) -> dg.SensorEvaluationContext:
    resources = {
        "sources": SourcesResource(scannet_root=str(scans)),
        "storage": StorageResource(root=str(storage)),
    }
    return dg.build_sensor_context(instance=instance, resources=resources)


@pytest.fixture(scope="module")
def defs() -> dg.Definitions:
    from pipelines.definitions import build_definitions

    return build_definitions()


def test_the_sensor_starts_no_observation_while_one_is_queued_or_running(defs, scan: Path, tmp_path: Path):
    sensor = defs.resolve_sensor_def(RAW_FILES_SENSOR)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        context = _sensor_context(instance, scan.parent, tmp_path / "data")
        result = sensor(context)
        assert [request.job_name or OBSERVE_RAW_FILES_JOB for request in result.run_requests] == [
            OBSERVE_RAW_FILES_JOB
        ]
        run = instance.create_run_for_job(
            job_def=defs.resolve_job_def(OBSERVE_RAW_FILES_JOB), status=dg.DagsterRunStatus.STARTED
        )
        skipped = sensor(_sensor_context(instance, scan.parent, tmp_path / "data"))
        assert isinstance(skipped, dg.SkipReason)
        assert "still queued or running" in skipped.skip_message
        instance.report_run_failed(run)
        assert not isinstance(
            sensor(_sensor_context(instance, scan.parent, tmp_path / "data")), dg.SkipReason
        )


SCAN_CHAIN = {"rgbd_frames", "rgbd_scenes", "scene_geometry", "frame_visibility", "dge_tasks"}


@pytest.mark.slow
@pytest.mark.timeout(900)  # a thousand partitions observed and evaluated: about a minute on 2 idle cores
def test_a_thousand_new_scans_are_registered_observed_and_requested_like_one(
    defs, scan: Path, tmp_path: Path
):
    """1,000 scan folders (hard links of one) arriving at once: one partition request, one observation of
    every scan, and one backfill whose per-scan assets cover them as one range (one run per wave under the
    single-run backfill policy)."""
    # the daemon's own grouping of what one tick requested into runs and backfills
    from dagster._core.definitions.automation_tick_evaluation_context import build_run_requests

    scans = scan.parent
    names = [f"scene{index:04d}_00" for index in range(1, 1001)]
    for name in names:
        shutil.copytree(scan, scans / name, copy_function=os.link)
    shutil.rmtree(scan)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        instance.report_runless_asset_event(dg.AssetMaterialization("sample_world"))
        before = evaluate_tick(defs, instance)  # a tick before the scans
        result = defs.resolve_sensor_def(RAW_FILES_SENSOR)(
            _sensor_context(instance, scans, tmp_path / "data")
        )
        (request,) = result.dynamic_partitions_requests
        assert list(request.partition_keys) == names
        instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, list(request.partition_keys))
        resources = {
            "sources": {"config": {"scannet_root": str(scans)}},
            "storage": {"config": {"root": str(tmp_path / "data")}},
        }
        observed = defs.resolve_job_def(OBSERVE_RAW_FILES_JOB).execute_in_process(
            instance=instance, run_config={"resources": resources}
        )
        assert observed.success
        records = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("raw_scan_files")), limit=2000
        ).records
        assert sorted(record.partition_key for record in records) == names
        assert len({record.asset_observation.data_version for record in records}) == 1  # the same content
        evaluation = evaluate_tick(defs, instance, before.cursor)
        for name in SCAN_CHAIN:
            assert set(evaluation.get_requested_partitions(dg.AssetKey(name))) == set(names), name
        requests = list(
            build_run_requests(
                evaluation._requested_subsets,  # noqa: SLF001 - the subsets the daemon turns into runs
                defs.resolve_asset_graph(),
                run_tags={},
                emit_backfills=True,
            )
        )
    backfills = [request for request in requests if request.requires_backfill_daemon()]
    assert len(backfills) == 1
    subset = backfills[0].asset_graph_subset
    for name in SCAN_CHAIN:
        keys = subset.get_partitions_subset(dg.AssetKey(name)).get_partition_keys()
        assert sorted(keys) == names, name


def test_a_cache_from_before_recording_observations_is_migrated_with_its_files_seen(
    scan: Path, tmp_path: Path
):
    path = tmp_path / "hashes.sqlite"
    with FileHashCache(path) as cache:
        observe_roots([scan], cache)
    with sqlite3.connect(path) as connection:  # the cache as the previous release wrote it
        connection.execute("CREATE TABLE old AS SELECT path, size, mtime_ns, inode, sha256 FROM file_hashes")
        connection.execute("DROP TABLE file_hashes")
        connection.execute("ALTER TABLE old RENAME TO file_hashes")
    (scan / "pose" / "0.txt").write_text("edited")
    with FileHashCache(path) as cache:
        assert observe_roots([scan], cache, record=True)[1] == FileChanges(edited=("pose/0.txt",))
