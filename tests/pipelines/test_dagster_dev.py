"""``dagster dev`` (no flags, from the project root) serves the asset graph on loopback."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
@pytest.mark.server
def test_dagster_dev_serves_the_graph(tmp_path):
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "SPATIAL_DATA_ROOT": str(tmp_path / "data")}
    dagster = Path(sys.executable).parent / "dagster"
    process = subprocess.Popen(
        [str(dagster), "dev", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 120
        keys: list[str] = []
        while time.monotonic() < deadline:
            try:
                data = _graphql(port, "{ assetNodes { assetKey { path } } }")
                keys = ["/".join(node["assetKey"]["path"]) for node in data["data"]["assetNodes"]]
                if keys:
                    break
            except (urllib.error.URLError, ConnectionError, KeyError, TypeError, json.JSONDecodeError):
                pass
            time.sleep(1)
        assert {"sample_world", "mcq_questions", "scene_graphs", "rgbd_frames", "rgbd_scenes"} <= set(keys)
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
