"""The worker pool of range runs (``assets.partition_ranges``) and the waves ``spatial-build`` runs.

The pool's results are checked against the same functions called in this process; the pool is the
process's own, so the tests configure two workers and leave the setting as they found it.
"""

import io
import operator
import os
import time

import dagster as dg
import polars as pl
import pytest

from assets import partition_ranges
from assets.partition_ranges import (
    configure_workers,
    drop_prefetched,
    partition_events,
    partition_results,
    prefetch,
    prefetch_in_background,
    restore_events,
    same_arguments,
    worker_count,
)
from pipelines.cli import build_waves
from pipelines.definitions import ALL_ASSETS


@pytest.fixture
def two_workers():
    before = partition_ranges._workers
    configure_workers(2)
    yield
    configure_workers(before)


def _body(value: int, fail: bool = False):
    """A one-partition body of plain arguments (module level, so that a worker can unpickle it)."""
    if fail:
        raise dg.Failure(description=f"value {value} is broken")
    yield dg.Output(value * 2, output_name="doubled", metadata={"value": value})
    yield dg.AssetCheckResult(asset_key="doubled", check_name="even", passed=value % 2 == 0)


def test_worker_count_is_configurable(two_workers):
    assert worker_count() == 2
    configure_workers(None)
    assert worker_count() == min(partition_ranges.usable_cpus(), partition_ranges.MAX_WORKERS)  # the default
    with pytest.raises(ValueError, match="at least 1"):
        configure_workers(0)


@pytest.mark.slow  # starts the pool's fork server (a few seconds on 2 busy cores)
def test_pool_results_are_the_in_process_results_in_key_order(two_workers):
    arguments = {key: (base, exponent) for key, base, exponent in [("a", 2, 10), ("b", 3, 4), ("c", 7, 0)]}
    with partition_results(operator.pow, arguments) as result:
        pooled = [result(key) for key in ("c", "a", "b")]
    assert pooled == [1, 1024, 81]  # 7**0, 2**10, 3**4
    with partition_results(os.getpid, {"a": (), "b": ()}) as result:
        assert os.getpid() not in {result("a"), result("b")}  # computed in the pool's worker processes
    with partition_results(operator.pow, arguments, parallel=False) as result:
        assert [result(key) for key in ("c", "a", "b")] == pooled


@pytest.mark.slow
def test_pool_events_and_errors_come_back_as_in_process(two_workers):
    arguments = {"x": (_body, 3), "y": (_body, 4)}
    with partition_results(partition_events, arguments) as result:
        events = {key: list(restore_events(result(key))) for key in ("x", "y")}
    for key, value in (("x", 3), ("y", 4)):
        output, check = events[key]
        assert (output.value, output.output_name, output.metadata["value"].value) == (
            2 * value,
            "doubled",
            value,
        )
        assert check.passed == (value % 2 == 0) and check.check_name == "even"
    failing = {"x": (_body, 3), "y": (_body, 5, True)}
    with partition_results(partition_events, failing) as result:
        assert len(result("x")) == 2
        with pytest.raises(dg.Failure, match="value 5 is broken"):
            result("y")


def _pid_and_total(table: pl.DataFrame, label: str) -> tuple[int, str, int]:
    """The worker's process id beside a value computed from a table (module level, for the pool)."""
    return os.getpid(), label, int(table["x"].sum())


def _through_parquet(table: pl.DataFrame) -> pl.DataFrame:
    buffer = io.BytesIO()
    table.write_parquet(buffer)
    buffer.seek(0)
    return pl.read_parquet(buffer)


def test_tables_read_back_from_parquet_are_the_same_arguments():
    built = pl.concat([pl.DataFrame({"x": [1, 2], "s": ["a", "b"]}), pl.DataFrame({"x": [3], "s": ["c"]})])
    read_back = _through_parquet(built)
    assert same_arguments(("f", built, {"row": [1.5, 2.5]}), ("f", read_back, {"row": [1.5, 2.5]}))
    assert not same_arguments((built,), (read_back.with_columns(pl.col("x") + 1),))  # one value differs
    assert not same_arguments((built,), (read_back.cast({"x": pl.Int32}),))  # same values, other type
    assert not same_arguments((built,), (read_back.head(2),))


@pytest.mark.slow  # starts the pool's fork server
def test_a_prefetched_call_is_taken_only_by_the_same_call_of_the_same_run(two_workers):
    table = pl.DataFrame({"x": [1, 2, 3]})
    early = prefetch("run-1", _pid_and_total, (table, "a"))
    assert early is not None
    early_pid = early.result()[0]
    arguments = {"a": (_through_parquet(table), "a"), "b": (table, "b")}
    with partition_results(_pid_and_total, arguments, run_id="run-1") as result:
        taken = result("a")
        assert taken == (early_pid, "a", 6)  # the prefetched result itself (its worker), the same value
        assert result("b")[1:] == ("b", 6)
    assert not partition_ranges._prefetched  # taken: nothing left behind
    prefetch("run-1", _pid_and_total, (table, "a"))
    changed = {"a": (table.with_columns(pl.col("x") * 2), "a"), "b": (table, "b")}
    with partition_results(_pid_and_total, changed, run_id="run-1") as result:
        assert result("a")[1:] == ("a", 12)  # other arguments: computed again, not the prefetched 6
    prefetch("run-2", _pid_and_total, (table, "a"))
    assert len(partition_ranges._prefetched) == 1  # a new run drops what an earlier run left
    with partition_results(_pid_and_total, arguments, run_id="run-3") as result:
        assert result("a")[1:] == ("a", 6)
    assert len(partition_ranges._prefetched) == 1  # another run's prefetch is never taken
    assert drop_prefetched() == 1


@pytest.mark.slow  # starts the pool's fork server
def test_background_calls_are_taken_by_any_later_run_and_dropped_when_unused(two_workers):
    table = pl.DataFrame({"x": [4, 5]})
    drop_prefetched()
    assert prefetch_in_background(_pid_and_total, (table, "a"))
    assert prefetch_in_background(_pid_and_total, (table, "unused"))
    queued = {entry.arguments[1]: entry for entry in partition_ranges._prefetched}
    for _ in range(600):  # the feeder submits both: fewer calls than workers are running
        if all(entry.future is not None for entry in queued.values()):
            break
        time.sleep(0.05)
    early = queued["a"].future.result()
    with partition_results(
        _pid_and_total, {"a": (table, "a"), "b": (table, "b")}, run_id="any-run"
    ) as result:
        assert result("a") == early  # the background result itself
        assert result("b")[1:] == ("b", 9)
    assert drop_prefetched() == 1  # "unused" was never asked for
    assert not partition_ranges._prefetched


def test_background_calls_need_a_pool():
    before = partition_ranges._workers
    configure_workers(1)
    try:
        assert not prefetch_in_background(_pid_and_total, (pl.DataFrame({"x": [1]}), "a"))
        assert not partition_ranges._prefetched
    finally:
        configure_workers(before)


def test_waves_are_as_few_as_the_partitionings_allow():
    waves = build_waves(ALL_ASSETS, dg.AssetSelection.all())
    names = [sorted(node.node_def.name for node in wave) for wave in waves]
    assert names[0] == ["sample_world_asset"]  # alone: the raw files are observed after it
    partitionings = [repr(wave[0].partitions_def) for wave in waves if wave[0].partitions_def is not None]
    assert len(partitionings) == len(set(partitionings)) == 3  # each partitioning in one wave
    kinds = [wave[0].partitions_def is None for wave in waves[1:]]
    assert not any(first and second for first, second in zip(kinds, kinds[1:], strict=False)), names
    assert len(waves) == 6, names  # sample world, sources and their tables, 3 partitionings, the rest


def test_the_scans_are_queued_only_between_their_inputs_and_their_run():
    from pipelines.cli import _wave_index

    waves = build_waves(ALL_ASSETS, dg.AssetSelection.all())
    inputs, scans = _wave_index(waves, "rgbd_frames"), _wave_index(waves, "scene_geometry")
    assert inputs is not None and scans is not None and inputs + 1 < scans  # waves to overlap the scans with
    without_scans = build_waves(ALL_ASSETS, dg.AssetSelection.from_string("+key:stvqa_validated"))
    assert _wave_index(without_scans, "scene_geometry") is None  # nothing to queue: no scan run ahead
    assert _wave_index(without_scans, "rgbd_frames", -1) == -1
