"""``ray_address`` reaches a cluster started apart from the run (``ray start --head``), as a deployment has it.

The test starts a one-CPU head node with the ``ray`` command in a temporary folder, then builds a scan
in a separate Python process whose only link to the cluster is ``ray_address`` (Ray is not initialised
there, so :func:`assets.compute.partition_results` connects and disconnects), with the cluster's
authentication token in its environment. The row must equal local mode's. Every process of the head node (found by its temporary folder) is ended afterwards.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import pytest

from assets.dge.assets import scene_geometry_partition
from assets.dge.geometry import SceneGeometrySettings
from assets.partition_ranges import restore_events
from data_contracts.storage import table_path
from readers.scannet import read_scannet
from tests.ray.conftest import output_plans, scan_files, written_files

pytestmark = [pytest.mark.ray, pytest.mark.slow]

CHILD = """
import sys
from pathlib import Path

from assets.compute import ComputeSettings, partition_results
from assets.dge.assets import scene_geometry_partition
from assets.dge.geometry import SceneGeometrySettings
from assets.partition_ranges import restore_events
from tests.ray.conftest import output_plans, written_files

scene_id, scenes_file, frames_file = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
address, storage = sys.argv[4], Path(sys.argv[5])
compute = ComputeSettings(compute="ray", ray_address=address)
plans = output_plans(storage, "scene_geometry", "scene_geometry_quarantine")
arguments = {scene_id: (scene_id, scenes_file, frames_file, SceneGeometrySettings(), storage, plans)}
with partition_results(scene_geometry_partition, arguments, workers=1, compute=compute) as result:
    written_files(list(restore_events(result(scene_id))))
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _pids_using(folder: str) -> list[int]:
    """PIDs of the processes whose command line names ``folder`` (the head node's processes)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if folder.encode() in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:  # ended while being read
                continue
    return pids


def _stop_head(head: subprocess.Popen, folder: str) -> None:
    if head.poll() is None:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait(timeout=10)
    for pid in _pids_using(folder):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def test_ray_address_reaches_a_cluster_started_by_ray_start(small_world, tmp_path):
    pytest.importorskip("ray", reason="the 'ray' extra is not installed: pip install -e '.[ray]'")
    import open3d as o3d

    scans = small_world / "scannet" / "scans"
    folder = tempfile.mkdtemp(prefix="rayh")  # short: Ray's socket paths must fit in 107 characters
    port = _free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    # Ray 2.60 authenticates with a token: the head and the client share one, as a deployment must.
    environment |= {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    head = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=1",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={folder}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        start_new_session=True,
    )
    try:
        started = time.monotonic()
        for line in head.stdout:
            if "Ray runtime started" in line:
                break
            assert time.monotonic() - started < 120, "the head node did not start in 2 minutes"
        else:
            pytest.fail("ray start --head exited before the runtime started")
        tables = read_scannet(scans)
        scene_id = tables.scenes["scene_id"][0]
        files = scan_files(tables.frames, tables.scenes, scene_id, tmp_path / "inputs")
        child = subprocess.run(
            [
                sys.executable,
                "-c",
                CHILD,
                scene_id,
                *map(str, files),
                f"127.0.0.1:{port}",
                str(tmp_path / "ray"),
            ],
            capture_output=True,
            text=True,
            env=environment,
            timeout=600,
            check=False,
        )
        assert child.returncode == 0, child.stderr[-3000:]
    finally:
        _stop_head(head, folder)
    assert not _pids_using(folder), "a process of the head node is still running"

    previous = o3d.utility.get_max_threads()
    o3d.utility.set_max_threads(1)  # as the task does (see test_scene_geometry_on_ray)
    try:
        plans = output_plans(tmp_path / "local", "scene_geometry", "scene_geometry_quarantine")
        events = scene_geometry_partition(
            scene_id, *files, SceneGeometrySettings(), tmp_path / "local", plans
        )
    finally:
        o3d.utility.set_max_threads(previous)
    local = written_files(restore_events(events))["scene_geometry"]
    remote = table_path(tmp_path / "ray", "scene_geometry", scene_id)
    remote_frame, local_frame = pl.read_parquet(remote), pl.read_parquet(local)
    differing = [name for name in local_frame.columns if not local_frame[name].equals(remote_frame[name])]
    assert remote.read_bytes() == local.read_bytes(), f"columns that differ: {differing}"
