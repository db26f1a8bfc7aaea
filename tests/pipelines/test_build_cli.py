"""``spatial-build`` materialises the whole graph on a small sample world and summarises it."""

import logging
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.partitions import SCENES_PARTITIONS_NAME
from pipelines.cli import build_waves, main, sqlite_commits_without_fsync
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
def test_build_everything_on_a_small_world(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    status = main(["--storage-root", str(tmp_path / "data"), "--scenes", "2", "--views", "3", "--quiet"])
    out = capsys.readouterr().out
    assert status == 0, out
    assert "(0 failed)" in out and "Quarantined rows:" in out
    data = tmp_path / "data"
    for table in ("mcq_questions", "spatialcore_train", "stvqa", "sft_cold_start", "eval_items"):
        assert pl.read_parquet(data / f"{table}.parquet").height > 0, table
    assert pl.read_parquet(list((data / "dge_tasks").glob("*.parquet"))).height > 0
    instance = dg.DagsterInstance.from_config(str(tmp_path / "dagster_home"))
    assert instance.get_latest_materialization_event(dg.AssetKey("spatialcore_train")) is not None


BUILD_TIMEOUT_S = 1500  # two small builds, one of them a run per partition: minutes on 2 busy cores
PARTITIONED_SELECTION = "+key:dge_tasks or +key:stvqa_validated or +key:pseudo_gt_boxes"


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
    """Rows, schema and key-value metadata less the inputs' data versions (Dagster versions a partitioned
    input by the partitions the step read: one in a partition's run, the range in a range run), with the
    storage root's path taken out."""
    skipped = (b"input_data_versions", b"source_fingerprint", b"ARROW:schema")  # the schema repeats them
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
                "--scenes",
                "2",
                "--views",
                "3",
                "--select",
                PARTITIONED_SELECTION,
                *flags,
            ]
        )
    return status, data


@pytest.mark.slow
@pytest.mark.timeout(BUILD_TIMEOUT_S)
def test_range_runs_write_what_runs_per_partition_write(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="spatial_build")

    def partition_waves() -> list[str]:
        waves = [record.getMessage() for record in caplog.records if "partitions ok" in record.getMessage()]
        caplog.clear()
        return waves

    ranged_status, ranged = _build(tmp_path, "ranged")
    ranged_waves = partition_waves()
    single_status, single = _build(tmp_path, "single", "--run-per-partition")
    single_waves = partition_waves()
    assert ranged_status == single_status == 0
    assert len(ranged_waves) == len(single_waves) == 3  # DGE scans, Grounding DINO shards, STVQA shards
    assert all("0 failed (1 run," in wave for wave in ranged_waves), ranged_waves
    for wave in single_waves:  # "<n> partitions ok, 0 failed (<n> runs, ...)"
        partitions = wave.split(": ")[-1].split(" partitions ok")[0]
        assert f"0 failed ({partitions} runs," in wave, wave
    ranged_files, single_files = _table_files(ranged), _table_files(single)
    assert set(ranged_files) == set(single_files)
    assert {name.split("/")[0] for name in ranged_files} >= {
        "dge_tasks",
        "stvqa_validated",
        "pseudo_gt_boxes",
    }
    for name, path in ranged_files.items():
        assert _content(path, ranged) == _content(single_files[name], single), name


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
    status = main(
        ["--storage-root", str(data), "--scenes", "2", "--views", "3", "--select", "+key:dge_tasks"]
    )
    assert status == 1
    messages = [record.getMessage() for record in caplog.records]
    assert any("failed; building them one run each" in message for message in messages)
    assert any("2 partitions ok, 1 failed (scene_without_scan)" in message for message in messages), messages
    built = sorted(path.stem for path in (data / "dge_tasks").glob("*.parquet"))
    assert len(built) == 2 and "scene_without_scan" not in built


def test_the_instance_databases_are_held_open_so_a_write_does_not_checkpoint(tmp_path, monkeypatch):
    import shutil

    from pipelines.cli import sqlite_kept_open

    home = tmp_path / "dagster_home"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))  # the template names it
    shutil.copy(Path(__file__).parents[2] / "pipelines" / "deploy" / "dagster.yaml", home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(home))
    wal = home / "event_log.db-wal"

    def store_one_event() -> None:
        instance.report_engine_event("a build event", job_name="sources_job", run_id="held-open-test")

    store_one_event()
    assert not wal.exists()  # the storage's connection closed last: SQLite checkpointed and removed the log
    with sqlite_kept_open(str(home)) as held:
        assert {path.relative_to(home).as_posix() for path in held} >= {"event_log.db", "history/runs.db"}
        store_one_event()
        assert wal.exists()  # not checkpointed at the storage's close: the held connection keeps the log
    assert len(instance.all_logs("held-open-test")) == 2  # both events stored, and the instance still reads
    with sqlite_kept_open(None) as held:
        assert held == []  # an ephemeral instance has no files


def test_sqlite_connections_opened_during_the_build_skip_the_fsync_per_commit(tmp_path):
    import sqlalchemy

    engine = sqlalchemy.create_engine(
        f"sqlite:///{tmp_path / 'events.db'}", poolclass=sqlalchemy.pool.NullPool
    )

    def synchronous() -> int:
        with engine.connect() as connection:
            return connection.exec_driver_sql("PRAGMA synchronous").scalar()

    assert synchronous() == 2  # FULL, SQLite's default
    with sqlite_commits_without_fsync():
        assert synchronous() == 1  # NORMAL
    assert synchronous() == 2  # the listener is gone after the build
