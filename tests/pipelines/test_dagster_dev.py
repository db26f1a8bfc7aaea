"""``dagster dev`` (no flags, from the project root, the shipped instance template) serves the graph and runs jobs.

A run launched as from the UI goes through the run queue, is started by the daemon and succeeds;
it is listed under its job's name.
"""

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


SMALL_WORLD_RUN_CONFIG = {
    "ops": {
        "sample_world_asset": {"config": {"num_scenes": 1, "views_per_scene": 2, "width": 64, "height": 48}}
    },
}
LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}
"""


def _launch(port: int, job: str, run_config: dict) -> str:
    """Launch ``job`` as the UI's launchpad does; return the run id."""
    params = {
        "selector": {
            "repositoryLocationName": "spatial_grounding",
            "repositoryName": "__repository__",
            "jobName": job,
        },
        "runConfigData": run_config,
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": LAUNCH, "variables": {"params": params}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        result = json.loads(response.read())["data"]["launchRun"]
    assert result["__typename"] == "LaunchRunSuccess", result
    return result["run"]["runId"]


def _wait_for_run(port: int, run_id: str, timeout: float) -> str:
    """Poll the run until it ends (the daemon dequeues and starts it); return its final status."""
    deadline = time.monotonic() + timeout
    status = "UNKNOWN"
    while time.monotonic() < deadline:
        data = _graphql(port, f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status }} }} }}')
        status = data["data"]["runOrError"]["status"]
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            return status
        time.sleep(0.5)
    return status


@pytest.mark.slow
@pytest.mark.server
def test_dagster_dev_serves_the_graph(tmp_path):
    port = _free_port()
    (tmp_path / "dagster.yaml").write_text((ROOT / "pipelines" / "deploy" / "dagster.yaml").read_text())
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
            time.sleep(0.5)
        assert {"sample_world", "mcq_questions", "scene_graphs", "rgbd_frames", "rgbd_scenes"} <= set(keys)
        run_id = _launch(port, "sources_job", SMALL_WORLD_RUN_CONFIG)
        status = _wait_for_run(port, run_id, timeout=240)
        assert status == "SUCCESS", status
        runs = _graphql(port, "{ runsOrError { ... on Runs { results { runId jobName } } } }")
        assert {"runId": run_id, "jobName": "sources_job"} in runs["data"]["runsOrError"]["results"]
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
