"""The worker processes of a range run's step (``assets.compute.partition_results``) and the waves of ``spatial-build``.

The pool's results are checked against the same functions called in this process; a step's workers end
with the step, and the fork server and workers of a build killed with SIGKILL end within seconds.
"""

import operator
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import dagster as dg
import pytest

from assets.compute import default_workers, partition_results
from assets.partition_ranges import portable_events, restore_events
from assets.resources import WorkersResource
from pipelines.cli import build_waves
from pipelines.definitions import ALL_ASSETS

pytestmark = pytest.mark.slow  # each pool starts from multiprocessing's fork server (seconds on 2 busy cores)


def _events(value: int, fail: bool = False) -> list:
    """A one-partition body of plain arguments (module level, so that a worker can unpickle it)."""
    if fail:
        raise dg.Failure(description=f"value {value} is broken")
    return portable_events(
        [
            dg.Output(value * 2, output_name="doubled", metadata={"value": value}),
            dg.AssetCheckResult(asset_key="doubled", check_name="even", passed=value % 2 == 0),
        ]
    )


def test_the_workers_resource_defaults_to_one_per_core():
    assert WorkersResource().count() == default_workers() >= 1
    assert WorkersResource(max_workers=3).count() == 3
    with pytest.raises(ValueError, match="at least 1"):
        WorkersResource(max_workers=0).count()


def test_pool_results_are_the_in_process_results():
    arguments = {key: (base, exponent) for key, base, exponent in [("a", 2, 10), ("b", 3, 4), ("c", 7, 0)]}
    with partition_results(operator.pow, arguments, workers=2) as result:
        pooled = [result(key) for key in ("c", "a", "b")]
    assert pooled == [1, 1024, 81]  # 7**0, 2**10, 3**4
    with partition_results(os.getpid, {"a": (), "b": ()}, workers=2) as result:
        assert os.getpid() not in {result("a"), result("b")}  # computed in worker processes
    with partition_results(os.getpid, {"a": (), "b": ()}, workers=1) as result:
        assert {result("a"), result("b")} == {os.getpid()}  # one worker: in this process
    with partition_results(os.getpid, {"a": ()}, workers=2) as result:
        assert result("a") == os.getpid()  # one partition: in this process


def test_pool_events_and_errors_come_back_as_in_process():
    with partition_results(_events, {"x": (3,), "y": (4,)}, workers=2) as result:
        events = {key: list(restore_events(result(key))) for key in ("x", "y")}
    for key, value in (("x", 3), ("y", 4)):
        output, check = events[key]
        assert (output.value, output.output_name, output.metadata["value"].value) == (
            2 * value,
            "doubled",
            value,
        )
        assert check.passed == (value % 2 == 0) and check.check_name == "even"
    with partition_results(_events, {"x": (3,), "y": (5, True)}, workers=2) as result:
        assert len(result("x")) == 2
        with pytest.raises(dg.Failure, match="value 5 is broken"):
            result("y")


def test_the_workers_end_with_the_step():
    with partition_results(os.getpid, {"a": (), "b": (), "c": ()}, workers=2) as result:
        workers = {result(key) for key in ("a", "b", "c")}
    assert workers and os.getpid() not in workers
    assert not any(_alive(pid) for pid in workers)  # the pool was shut down with the block


def _descendants(pid: int) -> set[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    children = {int(child) for child in path.read_text().split()} if path.exists() else set()
    return children | {grandchild for child in children for grandchild in _descendants(child)}


BUILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from assets.compute import partition_results

    with partition_results(time.sleep, {"a": (120,), "b": (120,)}, workers=2) as result:
        Path(sys.argv[1]).write_text(str(os.getpid()))
        result("a")
    """
)


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()  # a zombie has stopped running


def test_no_worker_outlives_a_killed_build(tmp_path):
    ready = tmp_path / "ready"
    build = subprocess.Popen([sys.executable, "-c", BUILD, str(ready)], start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ready.exists(), "the pool did not start"
        time.sleep(1)  # the workers have taken their calls
        descendants = _descendants(build.pid)
        assert len(descendants) >= 3  # the fork server and two workers
        build.send_signal(signal.SIGKILL)
        build.wait()
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in descendants) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(pid) for pid in descendants)
    finally:
        try:
            os.killpg(build.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_waves_are_as_few_as_the_partitionings_allow():
    waves = build_waves(ALL_ASSETS, dg.AssetSelection.all())
    names = [sorted(node.node_def.name for node in wave) for wave in waves]
    assert names[0] == ["sample_world_asset"]  # alone: the raw files are observed after it
    partitionings = [repr(wave[0].partitions_def) for wave in waves if wave[0].partitions_def is not None]
    assert len(partitionings) == len(set(partitionings)) == 3  # each partitioning in one wave
    kinds = [wave[0].partitions_def is None for wave in waves[1:]]
    assert not any(first and second for first, second in zip(kinds, kinds[1:], strict=False)), names
    assert len(waves) == 6, names  # sample world, sources and their tables, 3 partitionings, the rest
