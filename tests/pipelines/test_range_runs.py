"""Runs of every shape Dagster launches for partitioned assets (``assets.partition_ranges`` with the Parquet IO
manager, on a real SQLite instance).

Two small partitioned assets (a table with a quarantine and a blocking check, and a downstream table
of the same partitioning that reads its input per partition) are built as one range run over every
partition, as one-partition range runs (what a backfill or the automation launches for partitions that
are not adjacent), as plain one-partition runs, and as a non-adjacent subset split into stretches, each
into its own root: the files must be byte-equal, every partition must show its own figures, the range's
totals must be the sums of those figures, and a failing partition must publish nothing.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.partition_ranges import SINGLE_RUN, PartitionTables, range_metadata, run_partitions
from data_contracts.storage import read_table
from pipelines.cli import partition_range_tags
from pipelines.io_manager import ParquetIOManager

pytestmark = pytest.mark.slow  # small builds, each paying Dagster's run set-up

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]

KEYS = ["a", "b", "c"]
ROWS = {"a": 2, "b": 0, "c": 5}
"""Rows of each partition of ``numbers``; ``b`` is empty, and rows with odd values are quarantined."""
partitions = dg.StaticPartitionsDefinition(KEYS)


def _numbers(key: str, fail_on: str | None):
    if key == fail_on:
        raise dg.Failure(description=f"partition {key} is broken")
    values = [10 * KEYS.index(key) + i for i in range(ROWS[key])]
    kept = pl.DataFrame(
        {"key": [key] * len(values), "value": values}, schema={"key": pl.String, "value": pl.Int64}
    )
    quarantine = kept.filter(pl.col("value") % 2 == 1)
    kept = kept.filter(pl.col("value") % 2 == 0)
    yield dg.Output(
        kept,
        output_name="numbers",
        metadata={"dagster/row_count": kept.height, "share": 0.5, "contract_version": "3"},
    )
    yield dg.AssetCheckResult(
        asset_key="numbers", check_name="no_big_values", passed=bool((kept["value"] < 24).all())
    )
    yield dg.Output(
        quarantine, output_name="numbers_quarantine", metadata={"dagster/row_count": quarantine.height}
    )


def _assets(fail_on: str | None = None):
    @dg.multi_asset(
        outs={"numbers": dg.AssetOut(), "numbers_quarantine": dg.AssetOut()},
        check_specs=[dg.AssetCheckSpec("no_big_values", asset="numbers")],
        partitions_def=partitions,
        backfill_policy=SINGLE_RUN,
        code_version="1",
    )
    def numbers_asset(context: dg.AssetExecutionContext):
        yield from run_partitions(context, lambda key: _numbers(key, fail_on))

    @dg.asset(partitions_def=partitions, backfill_policy=SINGLE_RUN, code_version="1")
    def doubled(context: dg.AssetExecutionContext, numbers: PartitionTables):
        def one(key: str):
            table = numbers[key]
            yield dg.Output(
                table.with_columns(pl.col("value") * 2), metadata={"dagster/row_count": table.height}
            )

        yield from run_partitions(context, one)

    return [numbers_asset, doubled]


def _files(root: Path) -> list[Path]:
    return [
        path
        for path in sorted(root.rglob("*.parquet"))
        if not any(part.startswith(".") for part in path.relative_to(root).parts)
    ]


def _hashes(root: Path) -> dict[str, str]:
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in _files(root)
    }


def _contents(root: Path) -> dict[str, tuple]:
    """Every file's rows and its key-value metadata (input and content versions included)."""
    contents = {}
    for path in _files(root):
        metadata = {
            key.decode(): value.decode()
            for key, value in (pq.read_metadata(path).metadata or {}).items()
            if key != b"ARROW:schema"  # it repeats them
        }
        frame = pl.read_parquet(path)
        contents[path.relative_to(root).as_posix()] = (frame.schema, frame.rows(), metadata)
    return contents


def _materializations(result, key: str) -> dict[str, dict]:
    return {
        event.partition: {name: value.value for name, value in event.materialization.metadata.items()}
        for event in result.get_asset_materialization_events()
        if event.asset_key.to_user_string() == key
    }


def _build(root: Path, instance, **run) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        _assets(), resources={"io_manager": ParquetIOManager(root=str(root))}, instance=instance, **run
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The same assets built by runs of every shape, each into its own root (once: the tests only read)."""
    folder = tmp_path_factory.mktemp("built")
    with dg.instance_for_test() as instance:
        ranged = _build(folder / "range", instance, tags=partition_range_tags("a", "c"))
        one_partition_ranges = [
            _build(folder / "one_partition_ranges", instance, tags=partition_range_tags(key, key))
            for key in KEYS
        ]
        singles = [_build(folder / "single", instance, partition_key=key) for key in KEYS]
        # A backfill or the automation asking for a and c (not adjacent) launches a...a and c...c, then b...b.
        subset = [
            _build(folder / "subset", instance, tags=partition_range_tags(key, key)) for key in ("a", "c")
        ]
        subset.append(_build(folder / "subset", instance, tags=partition_range_tags("b", "b")))
    return folder, ranged, one_partition_ranges, singles, subset


def test_dagster_reads_the_range_tags_as_the_range_of_the_run():
    """``partition_range_tags`` is how a run covers a range (``execute_in_process`` has no range argument):
    pinned here to what Dagster gives the asset."""
    seen = []

    @dg.asset(partitions_def=partitions, backfill_policy=SINGLE_RUN)
    def keys_seen(context: dg.AssetExecutionContext) -> None:
        seen.append(list(context.partition_keys))

    with dg.instance_for_test() as instance:
        assert dg.materialize([keys_seen], instance=instance, tags=partition_range_tags("b", "c")).success
        assert dg.materialize([keys_seen], instance=instance, tags=partition_range_tags("a", "a")).success
    assert seen == [["b", "c"], ["a"]]


def test_runs_of_every_shape_write_the_same_files(built):
    """Byte-equal files where the inputs are unpartitioned; elsewhere equal rows and key-value metadata,
    the input and content versions included: a partition's file records what that partition read,
    however the partitions were grouped into runs."""
    folder, ranged, one_partition_ranges, singles, subset = built
    assert all(result.success for result in [ranged, *one_partition_ranges, *singles, *subset])
    roots = [folder / name for name in ("range", "one_partition_ranges", "single", "subset")]
    expected = {
        f"{table}/{key}.parquet" for table in ("numbers", "numbers_quarantine", "doubled") for key in KEYS
    }
    hashes = [_hashes(root) for root in roots]
    assert all(set(found) == expected for found in hashes)
    for found in hashes[1:]:
        for table in ("numbers", "numbers_quarantine"):
            for key in KEYS:
                assert found[f"{table}/{key}.parquet"] == hashes[0][f"{table}/{key}.parquet"]
    assert all(_contents(root) == _contents(roots[0]) for root in roots[1:])
    doubled = read_table(roots[0], "doubled")
    numbers = read_table(roots[0], "numbers")
    assert doubled["value"].to_list() == [2 * value for value in numbers["value"].to_list()]


def test_every_partition_shows_its_own_figures_and_the_totals(built):
    _, ranged, one_partition_ranges, singles, _ = built
    metadata = _materializations(ranged, "numbers")
    assert set(metadata) == set(KEYS)
    kept = {"a": 1, "b": 0, "c": 3}  # even values of 0..1, none, 20..24
    for key in KEYS:
        assert metadata[key]["dagster/row_count"] == kept[key]
        assert metadata[key]["total_rows"] == sum(kept.values())
        assert metadata[key]["partitions_in_run"] == 3
        assert "by_partition" not in metadata[key]  # nothing on a partition grows with the run
        for run in (singles[KEYS.index(key)], one_partition_ranges[KEYS.index(key)]):
            assert _materializations(run, "numbers")[key]["dagster/row_count"] == kept[key]
    assert "total_share" not in metadata["a"]  # a ratio is not summed
    quarantine = _materializations(ranged, "numbers_quarantine")
    assert [quarantine[key]["total_rows"] for key in KEYS] == [3, 3, 3]  # 1 (a) + 0 (b) + 2 (c)


def test_the_check_is_combined_over_the_partitions(built):
    _, ranged, one_partition_ranges, _, _ = built
    (check,) = ranged.get_asset_check_evaluations()
    assert not check.passed  # partition c holds 24
    assert check.metadata["partitions_failed"].value == ["c"]
    assert check.metadata["partitions_checked"].value == 3
    checks = [run.get_asset_check_evaluations()[0] for run in one_partition_ranges]
    assert [check.passed for check in checks] == [True, True, False]  # each partition's own result


def test_a_failing_partition_fails_the_range_and_publishes_nothing(tmp_path):
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            _assets(fail_on="b"),
            resources={"io_manager": ParquetIOManager(root=str(tmp_path))},
            tags=partition_range_tags("a", "c"),
            instance=instance,
            raise_on_error=False,
        )
    assert not result.success
    assert _hashes(tmp_path) == {}


def test_range_metadata_sums_counts_only():
    metadata = range_metadata(
        {
            "x": {"dagster/row_count": 4, "seconds": 1.5, "name": "x", "v": "1"},
            "y": {"dagster/row_count": 1, "v": "1"},
        }
    )
    assert metadata["total_rows"] == 5 and metadata["partitions_in_run"] == 2 and metadata["v"] == "1"
    assert "total_seconds" not in metadata and "total_name" not in metadata and "name" not in metadata
    assert set(metadata) == {"v", "partitions_in_run", "total_rows"}


def test_dagster_cli_one_partition_range_run_on_a_built_world(dev_build):
    """The shape a backfill of non-adjacent scans launches, through Dagster's own command line, on the
    instance and storage of a real build: it materialises that scan's geometry and nothing else."""
    from assets.partitions import SCENES_PARTITIONS_NAME

    scene = dev_build.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME)[-1]
    before = dev_build.instance.get_latest_materialization_event(dg.AssetKey("scene_geometry"))
    command = [sys.executable, "-m", "dagster", "asset", "materialize", "-m", "pipelines.definitions"]
    select = [
        "--select",
        "scene_geometry,scene_geometry_quarantine",
        "--partition-range",
        f"{scene}...{scene}",
    ]
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(dev_build.dagster_home),
        "SPATIAL_DATA_ROOT": str(dev_build.storage),
    }
    done = subprocess.run(
        [*command, *select], cwd=REPOSITORY_ROOT, env=environment, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    latest = dev_build.instance.get_latest_materialization_event(dg.AssetKey("scene_geometry"))
    assert latest.run_id != before.run_id and latest.asset_materialization.partition == scene
    assert read_table(dev_build.storage, "scene_geometry", [scene])["scene_id"].to_list() == [scene]


def test_a_range_runs_per_partition_metadata_reads_the_dynamic_partitions_once_per_output():
    """Dagster checks each partition's metadata against the run's range by reading every key of a dynamic
    partitions definition; the run reads them once per output, not once per partition (which made a range
    run's metadata cost the square of its partitions)."""
    scans = dg.DynamicPartitionsDefinition(name="scans_read_once")
    keys = [f"scan_{index:02d}" for index in range(12)]

    def _scan(key: str):
        yield dg.Output(pl.DataFrame({"value": [1]}), output_name="scan_table", metadata={"key": key})

    @dg.multi_asset(outs={"scan_table": dg.AssetOut()}, partitions_def=scans, backfill_policy=SINGLE_RUN)
    def scan_table_asset(context: dg.AssetExecutionContext):
        yield from run_partitions(context, _scan)

    class _Discard(dg.IOManager):
        def handle_output(self, context: dg.OutputContext, obj) -> None:
            pass

        def load_input(self, context: dg.InputContext):
            raise NotImplementedError

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(scans.name, keys)
        reads = []
        read = instance.get_dynamic_partitions

        def counted(*args, **kwargs):
            reads.append((args, kwargs))
            return read(*args, **kwargs)

        instance.get_dynamic_partitions = counted
        result = dg.materialize(
            [scan_table_asset],
            instance=instance,
            resources={"io_manager": _Discard()},
            tags=partition_range_tags(keys[0], keys[-1]),
        )
        assert result.success
        metadata = _materializations(result, "scan_table")
        assert {key: metadata[key]["key"] for key in keys} == {key: key for key in keys}
        assert len(reads) < len(keys)  # without the read-once block: one read per partition and more
        assert instance.get_dynamic_partitions is counted  # what the instance had before the block
