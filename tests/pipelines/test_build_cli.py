"""``spatial-build`` materialises the whole graph on a small sample world and summarises it."""

import dagster as dg
import polars as pl
import pytest

from pipelines.cli import build_waves, main
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
