"""Walk the automation live, as an operator leaves it running: ``dagster dev``, both sensors on, then edits.

Usage:
    python benchmarks/walk_automation.py              # 2 scenes x 3 views
    python benchmarks/walk_automation.py --scenes 4

Builds a world with ``spatial-build`` into a temporary ``DAGSTER_HOME`` (the shipped
``pipelines/deploy/dagster.yaml``: run queue, one automation run at a time), starts ``dagster dev``
(webserver and daemon) on a free port, turns ``datasets_automation_sensor`` and ``raw_files_sensor``
on, and then, one step at a time:

1. **pose edit**: rewrites one pose file of the first scan (same numbers, new bytes);
2. **pose delete**: deletes that pose file (its frame is quarantined);
3. **pose restore**: writes it back;
4. **question edit**: changes the wording of one OmniSpatial question;
5. **break**: writes ``[]`` to the OmniSpatial file (an empty source);
6. **restore**: writes the original file back.

Nothing launches the observation: ``raw_files_sensor`` does, when its file watcher sees the edit
(:mod:`pipelines.file_watch`). After each edit the walk waits until the daemon has nothing queued or
running for two sensor intervals. It prints, per step, the seconds from the edit to the observation
run and to the last automation run's end, the runs the daemon launched (job, partition, status,
``spatial/trigger`` and ``spatial/changed_files`` as set when the run was queued, seconds), whether each
table that must not change kept its file, and for the question edit whether ``spatialcore_train`` ran
after every ``pseudo_gt_boxes`` run. Exit status 0 when every expectation held.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines.run_tags import PARTITION_RANGE_START_TAG, PARTITION_TAG

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPOSITORY_ROOT / "pipelines" / "deploy" / "dagster.yaml"
AUTOMATION_TAG = "dagster/from_automation_condition"
SETTLE_SECONDS = 150  # two evaluations of the automation sensor (every 60 s) with nothing to do


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dagster(environment: dict, *arguments: str) -> None:
    subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), *arguments],
        env=environment,
        cwd=REPOSITORY_ROOT,
        check=True,
        capture_output=True,
    )


def _records(instance, since: float) -> list:
    """The run records created since ``since``, oldest first."""
    records = [
        record for record in instance.get_run_records() if record.create_timestamp.timestamp() >= since
    ]
    return sorted(records, key=lambda record: record.create_timestamp)


def _settle(instance, since: float, timeout: float) -> float:
    """Wait until no run created since ``since`` is unfinished and none was created for SETTLE_SECONDS;
    return the end time of the last automation run (or ``since``)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        records = _records(instance, since)
        last_created = max((record.create_timestamp.timestamp() for record in records), default=since)
        if (
            all(record.dagster_run.is_finished for record in records)
            and time.time() - last_created > SETTLE_SECONDS
        ):
            automation = [record for record in records if AUTOMATION_TAG in record.dagster_run.tags]
            return max((record.end_time or since for record in automation), default=since)
        time.sleep(5)
    raise SystemExit(f"the automation did not settle within {timeout:.0f} s")


def _describe(instance, since: float) -> list[dict]:
    rows = []
    for record in _records(instance, since):
        run = record.dagster_run
        rows.append(
            {
                "job": run.job_name,
                "assets": sorted(key.to_user_string() for key in run.asset_selection or []),
                "partition": run.tags.get(PARTITION_TAG) or run.tags.get(PARTITION_RANGE_START_TAG),
                "status": run.status.value,
                "trigger": run.tags.get("spatial/trigger", ""),
                "changed_files": run.tags.get("spatial/changed_files", ""),
                "created": record.create_timestamp.timestamp(),
                "start": record.start_time,
                "end": record.end_time,
                "seconds": round((record.end_time or 0) - (record.start_time or 0), 1),
            }
        )
    return rows


def _mtimes(storage: Path, tables: list[str]) -> dict[str, float]:
    found = {}
    for table in tables:
        single = storage / f"{table}.parquet"
        paths = [single] if single.exists() else sorted((storage / table).glob("*.parquet"))
        for path in paths:
            found[str(path.relative_to(storage))] = path.stat().st_mtime
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=2)
    parser.add_argument("--views", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds each step may take")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="walk_automation_"))
    home, storage = folder / "dagster_home", folder / "home_data"
    home.mkdir()
    (home / "dagster.yaml").write_text(TEMPLATE.read_text())
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "SPATIAL_DATA_ROOT": str(storage),
        "HF_HUB_OFFLINE": "1",
    }
    started = time.time()
    subprocess.run(
        [
            str(Path(sys.executable).parent / "spatial-build"),
            "--scenes",
            str(args.scenes),
            "--views",
            str(args.views),
            "--quiet",
        ],
        env=environment,
        check=True,
        capture_output=True,
    )
    build_seconds = time.time() - started
    port = _free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "--port", str(port)],
        env=environment,
        cwd=REPOSITORY_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=(folder / "dagster_dev.log").open("w"),
        start_new_session=True,
    )
    os.environ.update(environment)
    import dagster as dg

    instance = dg.DagsterInstance.get()
    results: list[dict] = []
    ok = True
    try:
        started_sensors = time.time()
        deadline = started_sensors + 180
        while True:
            try:
                _dagster(environment, "sensor", "start", "datasets_automation_sensor")
                _dagster(environment, "sensor", "start", "raw_files_sensor")
                break
            except subprocess.CalledProcessError:
                if time.time() > deadline:
                    raise
                time.sleep(3)
        sample = storage / "sample_world"
        scans = sample / "scannet" / "scans"
        first_scan = sorted(path.name for path in scans.iterdir())[0]
        pose = sorted((scans / first_scan / "pose").glob("*.txt"))[0]
        questions_file = sample / "omnispatial" / "data.json"
        original_questions = questions_file.read_text()
        questions = json.loads(original_questions)
        questions[0]["question"] = questions[0]["question"].rstrip("?") + " from here?"

        _settle(instance, started_sensors, args.timeout)  # the sensors' first observation and what follows

        def step(name: str, edit, unchanged: list[str], expect_failure: bool = False) -> None:
            nonlocal ok
            kept_before = _mtimes(storage, unchanged)
            since = time.time()
            edit()
            last_end = _settle(instance, since, args.timeout)
            runs = _describe(instance, since)
            observations = [run for run in runs if run["job"] == "observe_raw_files_job"]
            automation_runs = [run for run in runs if run["job"] != "observe_raw_files_job"]
            kept = _mtimes(storage, unchanged) == kept_before
            failed = [run for run in automation_runs if run["status"] == "FAILURE"]
            good = kept and (bool(failed) == expect_failure) and bool(observations)
            ok = ok and good
            results.append(
                {
                    "step": name,
                    "seconds_to_observed": round(observations[0]["created"] - since, 1)
                    if observations
                    else None,
                    "seconds_to_settled": round(last_end - since, 1),
                    "runs": automation_runs,
                    "untouched_tables_kept": kept,
                    "as_expected": good,
                }
            )

        step(
            "pose edit",
            lambda: pose.write_text(pose.read_text().replace("\n", " \n", 1)),
            ["mcq_questions", "scene_graphs"],
        )
        pose_text = pose.read_text()
        step("pose delete", pose.unlink, ["mcq_questions", "scene_graphs"])
        step("pose restore", lambda: pose.write_text(pose_text), ["mcq_questions", "scene_graphs"])
        step(
            "question edit",
            lambda: questions_file.write_text(json.dumps(questions)),
            ["scene_graphs", "rgbd_frames"],
        )
        question_runs = results[-1]["runs"]
        shard_ends = [run["end"] for run in question_runs if "pseudo_gt_boxes" in run["assets"]]
        train_starts = [run["start"] for run in question_runs if "spatialcore_train" in run["assets"]]
        ordered = bool(shard_ends) and len(train_starts) == 1 and train_starts[0] >= max(shard_ends)
        results[-1]["spatialcore_train_after_every_shard_run"] = ordered
        ok = ok and ordered
        step(
            "break: OmniSpatial []",
            lambda: questions_file.write_text("[]"),
            ["mcq_questions", "object_phrases"],
            True,
        )
        step(
            "restore", lambda: questions_file.write_text(original_questions), ["scene_graphs", "rgbd_frames"]
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        instance.dispose()
    sys.stdout.write(
        f"world: {args.scenes} scenes x {args.views} views; spatial-build {build_seconds:.1f} s\n"
    )
    for result in results:
        sys.stdout.write(
            f"\n{result['step']}: observed {result['seconds_to_observed']} s and settled "
            f"{result['seconds_to_settled']} s after the edit; "
            f"untouched tables kept: {result['untouched_tables_kept']}; as expected: {result['as_expected']}"
            + (
                f"; spatialcore_train after every shard run: {result['spatialcore_train_after_every_shard_run']}"
                if "spatialcore_train_after_every_shard_run" in result
                else ""
            )
            + "\n"
        )
        for run in result["runs"]:
            assets = ", ".join(run["assets"][:4]) + (
                f" +{len(run['assets']) - 4}" if len(run["assets"]) > 4 else ""
            )
            sys.stdout.write(
                f"  {run['status']:<8} {run['seconds']:>6} s  {run['partition'] or '-':<14} "
                f"trigger={run['trigger']!r} files={run['changed_files']!r}  [{assets}]\n"
            )
    sys.stdout.write(f"\nlogs: {folder}\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
