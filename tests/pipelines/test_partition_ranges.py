"""Range runs of partitioned assets (``assets.partition_ranges`` with the Parquet IO manager).

Two small partitioned assets (a table with a quarantine and a blocking check, and a downstream table
of the same partitioning) are built once as one range run and once as one run per partition into
separate roots: the files must be byte-equal, every partition must show its own figures, the
range's totals must be the sums of those figures, and a failing partition must publish nothing.
"""

import hashlib
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.partition_ranges import SINGLE_RUN, partition_input, run_partitions, totals_metadata
from data_contracts.storage import read_table
from pipelines.cli import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pipelines.io_manager import ParquetIOManager

pytestmark = pytest.mark.slow  # small builds, each paying Dagster's run set-up

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
    def doubled(context: dg.AssetExecutionContext, numbers):
        def one(key: str):
            table = partition_input(numbers, key)
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
    """Every file's rows and its key-value metadata, less the input versions (see the test)."""
    contents = {}
    for path in _files(root):
        metadata = {
            key.decode(): value.decode()
            for key, value in (pq.read_metadata(path).metadata or {}).items()
            if key not in (b"input_data_versions", b"source_fingerprint", b"ARROW:schema")  # it repeats them
        }
        frame = pl.read_parquet(path)
        contents[path.relative_to(root).as_posix()] = (frame.schema, frame.rows(), metadata)
    return contents


def _range_tags(first: str, last: str) -> dict[str, str]:
    return {ASSET_PARTITION_RANGE_START_TAG: first, ASSET_PARTITION_RANGE_END_TAG: last}


def _materializations(result, key: str) -> dict[str, dict]:
    return {
        event.partition: {name: value.value for name, value in event.materialization.metadata.items()}
        for event in result.get_asset_materialization_events()
        if event.asset_key.to_user_string() == key
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The same assets built as one range run and as one run per partition, in two roots (once: the tests only read)."""
    folder = tmp_path_factory.mktemp("built")
    range_root, single_root = folder / "range", folder / "single"
    with dg.instance_for_test() as instance:
        ranged = dg.materialize(
            _assets(),
            resources={"io_manager": ParquetIOManager(root=str(range_root))},
            tags=_range_tags("a", "c"),
            instance=instance,
        )
        singles = [
            dg.materialize(
                _assets(),
                resources={"io_manager": ParquetIOManager(root=str(single_root))},
                partition_key=key,
                instance=instance,
            )
            for key in KEYS
        ]
    return range_root, single_root, ranged, singles


def test_a_range_run_writes_what_runs_per_partition_write(built):
    """Byte-equal files where the inputs are unpartitioned; elsewhere equal rows and key-value metadata
    except the inputs' data versions (Dagster versions a partitioned input by the partitions the step
    read: one in a partition's run, the whole range in a range run)."""
    range_root, single_root, ranged, singles = built
    assert ranged.success and all(result.success for result in singles)
    ranged_hashes, single_hashes = _hashes(range_root), _hashes(single_root)
    for table in ("numbers", "numbers_quarantine"):
        for key in KEYS:
            assert ranged_hashes[f"{table}/{key}.parquet"] == single_hashes[f"{table}/{key}.parquet"]
    assert _contents(range_root) == _contents(single_root)
    assert set(_hashes(range_root)) == {
        f"{table}/{key}.parquet" for table in ("numbers", "numbers_quarantine", "doubled") for key in KEYS
    }
    doubled = read_table(range_root, "doubled")
    numbers = read_table(range_root, "numbers")
    assert doubled["value"].to_list() == [2 * value for value in numbers["value"].to_list()]


def test_every_partition_shows_its_own_figures_and_the_totals(built):
    _, _, ranged, singles = built
    metadata = _materializations(ranged, "numbers")
    assert set(metadata) == set(KEYS)
    kept = {"a": 1, "b": 0, "c": 3}  # even values of 0..1, none, 20..24
    for key in KEYS:
        assert metadata[key]["dagster/row_count"] == kept[key]
        assert metadata[key]["total_rows"] == sum(kept.values())
        assert metadata[key]["partitions_in_run"] == 3
        assert metadata[key]["by_partition"][key]["dagster/row_count"] == kept[key]
        single = _materializations(singles[KEYS.index(key)], "numbers")[key]
        assert single["dagster/row_count"] == kept[key]
    assert "total_share" not in metadata["a"]  # a ratio is not summed
    quarantine = _materializations(ranged, "numbers_quarantine")
    assert [quarantine[key]["total_rows"] for key in KEYS] == [3, 3, 3]  # 1 (a) + 0 (b) + 2 (c)


def test_the_check_is_combined_over_the_partitions(built):
    _, _, ranged, _ = built
    (check,) = ranged.get_asset_check_evaluations()
    assert not check.passed  # partition c holds 24
    assert check.metadata["partitions_failed"].value == ["c"]
    assert check.metadata["partitions_checked"].value == 3


def test_a_failing_partition_fails_the_range_and_publishes_nothing(tmp_path):
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            _assets(fail_on="b"),
            resources={"io_manager": ParquetIOManager(root=str(tmp_path))},
            tags=_range_tags("a", "c"),
            instance=instance,
            raise_on_error=False,
        )
    assert not result.success
    assert _hashes(tmp_path) == {}


def test_totals_sum_counts_only():
    totals = totals_metadata(
        {"x": {"dagster/row_count": 4, "seconds": 1.5, "name": "x"}, "y": {"dagster/row_count": 1}}
    )
    assert totals["total_rows"] == 5 and totals["partitions_in_run"] == 2
    assert "total_seconds" not in totals and "total_name" not in totals
    assert totals["by_partition"].value == {
        "x": {"dagster/row_count": 4, "seconds": 1.5},
        "y": {"dagster/row_count": 1},
    }
