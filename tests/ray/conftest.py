"""Fixtures of the Ray tests: one real local Ray cluster (2 CPUs) for the session, and shared helpers.

The cluster is started by the test session (``ray.init``) in a short temporary folder and shut down at
the end; the modules that start it skip, with the reason, when the ``ray`` extra is not installed.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.provenance import TableFilePlan
from data_contracts.storage import table_path, write_table
from tests.grounding.conftest import single_torch_thread  # noqa: F401  (the driver's torch on one thread)

RAY_CPUS = 2


@pytest.fixture(scope="session")
def ray_local_cluster() -> Iterator[object]:
    """``ray`` connected to a local cluster of 2 CPUs started for this session (no dashboard)."""
    ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed: pip install -e '.[ray]'")
    folder = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit in 107 characters
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, _temp_dir=folder, logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """The frame written as Parquet (what the IO manager stores): equal bytes mean equal tables."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def output_plans(root: Path, *tables: str) -> dict[str, TableFilePlan]:
    """Plans that write the partition files of ``tables`` under ``root`` (no upstream versions: what an
    asset's own plans do, without a Dagster instance)."""
    return {table: TableFilePlan(root=root, table=table, code_version=None, upstream=()) for table in tables}


def scan_files(frames: pl.DataFrame, scenes: pl.DataFrame, scene_id: str, root: Path) -> tuple[Path, Path]:
    """The scan's ``rgbd_scenes`` and ``rgbd_frames`` partition files, written under ``root``."""
    files = []
    for table, rows in (("rgbd_scenes", scenes), ("rgbd_frames", frames)):
        path = table_path(root, table, scene_id)
        write_table(rows.filter(pl.col("scene_id") == scene_id), path)
        files.append(path)
    return files[0], files[1]


def written_files(events: list) -> dict[str, Path]:
    """``{output name: file}`` of the outputs a partition function wrote (its restored events)."""
    return {event.output_name: Path(event.value.path) for event in events if isinstance(event, dg.Output)}


def task_pids(task_name: str) -> list[int]:
    """PIDs of the Ray workers now running the task ``task_name`` (Ray titles them ``ray::<task>``)."""
    title = f"ray::{task_name}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(title):
                    pids.append(int(entry.name))
            except OSError:  # the process ended while being read
                continue
    return pids


@contextmanager
def first_task_killed(task_name: str, after_s: float) -> Iterator[list[int]]:
    """For the block, SIGKILL the first worker seen running ``task_name``, ``after_s`` seconds into its task;
    yields the list that receives the killed worker's PID (empty when none was killed)."""
    killed: list[int] = []
    done = threading.Event()

    def kill_the_first_worker() -> None:
        while not done.is_set():
            pids = task_pids(task_name)
            if pids:
                time.sleep(after_s)
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_the_first_worker)
    killer.start()
    try:
        yield killed
    finally:
        done.set()
        killer.join()
