"""``spatial-build`` materialises the whole graph on a small sample world and summarises it."""

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.partitions import SCENES_PARTITIONS_NAME
from pipelines.cli import EXIT_INTERRUPTED, build_waves, main
from pipelines.definitions import ALL_ASSETS


def test_waves_respect_dependencies_and_partitions():
    waves = build_waves(ALL_ASSETS, dg.AssetSelection.all())
    position = {key: index for index, wave in enumerate(waves) for node in wave for key in node.keys}
    assert set(position) == {key for node in ALL_ASSETS for key in node.keys}
    for wave in waves:
        assert len({repr(node.partitions_def) for node in wave}) == 1  # one partitioning per wave
        for node in wave:
            for deps in node.asset_deps.values():
                for dep in deps:
                    if dep in position and dep not in node.keys:
                        assert position[dep] <= position[next(iter(node.keys))]


@pytest.mark.slow
def test_build_everything_on_a_small_world(dev_build, monkeypatch, capsys):
    """The whole graph on a small world (the shared ``dev_build``): every table filled but those whose
    backend is off, which the summary says why; then the cost table of the built world, calling no model."""
    out = dev_build.output
    assert "(0 failed)" in out and "Quarantined rows:" in out
    assert "(off until eval_report_asset's model is set)" in out  # why an empty table is empty
    assert "(off until depth_dir or depth_model_path is set)" in out
    data = dev_build.storage
    for table in ("mcq_questions", "spatialcore_train", "stvqa", "sft_cold_start", "eval_items"):
        assert pl.read_parquet(data / f"{table}.parquet").height > 0, table
    assert pl.read_parquet(list((data / "dge_tasks").glob("*.parquet"))).height > 0
    assert dev_build.instance.get_latest_materialization_event(dg.AssetKey("spatialcore_train")) is not None
    monkeypatch.setenv("DAGSTER_HOME", str(dev_build.dagster_home))
    assert main(["--storage-root", str(data), "--estimate-cost"]) == 0  # no model is called
    table = capsys.readouterr().out
    assert "stvqa_candidates" in table and "TOTAL" in table


BUILD_TIMEOUT_S = 900  # two small builds: minutes on 2 busy cores
PARTITIONED_SELECTION = "+key:dge_tasks or +key:stvqa_validated or +key:pseudo_gt_boxes"
TINY_WORLD = ["--scenes", "1", "--views", "2"]
"""One ScanNet scan besides the default world's ARKitScenes video and ScanNet++ scene: three scan partitions,
enough for a range run on two workers."""


def _table_files(root: Path) -> dict[str, Path]:
    return {
        path.relative_to(root).as_posix(): path
        for path in sorted(root.rglob("*.parquet"))
        if path.relative_to(root).parts[0] not in ("sample_world", "previews", "llm_cache")
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
    }


def _without_root(value, root: str):
    """``value`` with the storage root in its text replaced (tables name files under the root)."""
    if isinstance(value, str):
        return value.replace(root, "<root>")
    if isinstance(value, (list, tuple)):
        return [_without_root(item, root) for item in value]
    if isinstance(value, dict):
        return {key: _without_root(item, root) for key, item in value.items()}
    return value


def _content(path: Path, root: Path) -> tuple:
    """Rows, schema and key-value metadata (the content versions included: they do not depend on how the
    partitions were grouped into runs), with the storage root's path taken out."""
    skipped = (b"ARROW:schema",)  # it repeats the metadata
    metadata = {k: v for k, v in (pq.read_metadata(path).metadata or {}).items() if k not in skipped}
    frame = pl.read_parquet(path)
    return frame.schema, _without_root(frame.rows(), str(root)), _without_root(metadata, str(root))


def _build(tmp_path: Path, name: str, *flags: str) -> tuple[int, Path]:
    home, data = tmp_path / name / "dagster_home", tmp_path / name / "data"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGSTER_HOME", str(home))
        status = main(
            [
                "--storage-root",
                str(data),
                *TINY_WORLD,
                "--select",
                PARTITIONED_SELECTION,
                *flags,
            ]
        )
    return status, data


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S)
def test_worker_processes_write_what_the_run_process_writes(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="spatial_build")

    def partition_waves() -> list[str]:
        waves = [record.getMessage() for record in caplog.records if "partitions ok" in record.getMessage()]
        caplog.clear()
        return waves

    pooled_status, pooled = _build(tmp_path, "pooled", "--workers", "2")
    pooled_waves = partition_waves()
    serial_status, serial = _build(tmp_path, "serial", "--workers", "1")
    serial_waves = partition_waves()
    assert pooled_status == serial_status == 0
    assert len(pooled_waves) == len(serial_waves) == 3  # DGE scans, Grounding DINO shards, STVQA shards
    assert all("0 failed (1 run," in wave for wave in pooled_waves + serial_waves), (
        pooled_waves + serial_waves
    )
    pooled_files, serial_files = _table_files(pooled), _table_files(serial)
    assert set(pooled_files) == set(serial_files)
    assert {name.split("/")[0] for name in pooled_files} >= {
        "dge_tasks",
        "stvqa_validated",
        "pseudo_gt_boxes",
    }
    for name, path in pooled_files.items():
        assert _content(path, pooled) == _content(serial_files[name], serial), name


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S)
def test_a_failed_range_is_built_again_one_partition_at_a_time(tmp_path, monkeypatch, caplog):
    """A scan partition with no scan fails the range run; the good scans are still built, the bad one
    is named, and the build fails."""
    caplog.set_level(logging.INFO, logger="spatial_build")
    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dg.DagsterInstance.get().add_dynamic_partitions(SCENES_PARTITIONS_NAME, ["scene_without_scan"])
    data = tmp_path / "data"
    status = main(["--storage-root", str(data), *TINY_WORLD, "--select", "+key:dge_tasks"])
    assert status == 1
    messages = [record.getMessage() for record in caplog.records]
    assert any("failed; building them one run each" in message for message in messages)
    # the ScanNet scan and the default world's ARKitScenes video and ScanNet++ scene
    assert any("3 partitions ok, 1 failed (scene_without_scan)" in message for message in messages), messages
    built = sorted(path.stem for path in (data / "dge_tasks").glob("*.parquet"))
    assert len(built) == 3 and "scene_without_scan" not in built


STOP_AFTER = "grounding_shards_job pseudo_gt_boxes_asset:"
"""The console line after which the test stops a build: the STVQA shards run next, in worker processes."""
WORKERS_START_TIMEOUT_S = 120
STOPPED_BUILD_SELECTION = "+key:stvqa or +key:pseudo_gt_boxes"
"""What the stopped build builds: the Grounding DINO shards, the STVQA shards, then ``stvqa`` (which the signal
keeps from starting); no DGE scans."""


def _descendants(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    children = {int(child) for child in path.read_text().split()} if path.exists() else set()
    return children | {grandchild for child in children for grandchild in _descendants(child)}


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()  # a zombie has stopped running


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S)
def test_sigterm_stops_the_build_with_its_summary_and_leaves_no_process(tmp_path):
    home = tmp_path / "dagster_home"
    command = [
        sys.executable,
        "-m",
        "pipelines.cli",
        "--storage-root",
        str(tmp_path / "data"),
        "--scenes",
        "2",
        "--views",
        "3",
        "--select",
        STOPPED_BUILD_SELECTION,
    ]
    build = subprocess.Popen(
        [*command, "--workers", "2"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        for line in build.stderr:
            if STOP_AFTER in line:
                break
        processes = _descendants(build.pid)
        deadline = time.monotonic() + WORKERS_START_TIMEOUT_S
        while len(processes) < 2 and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # into the STVQA shards' run: its fork server and a worker started
            processes = _descendants(build.pid)
        signalled = time.monotonic()
        build.send_signal(signal.SIGTERM)
        out, err = build.communicate(timeout=120)
        seconds_to_exit = time.monotonic() - signalled
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
    assert build.returncode == EXIT_INTERRUPTED, err[-2000:]
    assert "Stopped after building" in out and "Parquet caches under" in out
    assert "stopped by a signal" in err
    assert len(processes) >= 2  # the fork server and the workers of the step
    # The build ends what it started before it exits (the fork server too): at most init's reaping is left.
    deadline = time.monotonic() + 1
    while any(_alive(pid) for pid in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [pid for pid in processes if _alive(pid)]
    assert not left, [Path(f"/proc/{pid}/cmdline").read_text() for pid in left if _alive(pid)]
    ended = [line for line in err.splitlines() if "processes the build had started" in line]
    logging.getLogger(__name__).info("SIGTERM to exit: %.1f s; %s", seconds_to_exit, ended)
    instance = dg.DagsterInstance.from_config(str(home))
    jobs = [run.job_name for run in instance.get_runs()]
    later = [run for run in instance.get_runs() if dg.AssetKey("stvqa") in (run.asset_selection or ())]
    assert "stvqa_shards_job" in jobs and not later  # the run in progress ended, no later one started
    (stopped,) = instance.get_runs(filters=dg.RunsFilter(job_name="stvqa_shards_job"))
    assert stopped.status in (
        dg.DagsterRunStatus.FAILURE,
        dg.DagsterRunStatus.CANCELED,
    )  # ended, or never started
