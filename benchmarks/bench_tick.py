"""Time a no-change automation tick on a built world: what a scheduled rebuild costs when nothing changed.

Usage:
    python benchmarks/bench_tick.py                 # the default world (12 scenes x 6 views)
    python benchmarks/bench_tick.py --tiny          # smoke run: 2 scenes x 3 views built by 1 worker, one repeat

Builds the world with ``spatial-build`` into a temporary ``DAGSTER_HOME`` (the shipped
``pipelines/deploy/dagster.yaml``) and storage root, then, in this process, against that instance:

- ``observe_raw_files_job``: what the cron of ``datasets_automation_sensor`` runs first (content
  fingerprints of every raw file; the hash cache makes unchanged files a ``stat``), timed cold (the
  first observation after the build) and warm;
- one evaluation of the automation conditions of every asset (what each sensor tick evaluates), which
  must request nothing.

Prints one table of seconds (best of ``--repeats``).
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPOSITORY_ROOT / "pipelines" / "deploy" / "dagster.yaml"


def _build(home: Path, storage: Path, scenes: int, views: int, workers: int | None) -> float:
    command = [
        str(Path(sys.executable).parent / "spatial-build"),
        "--storage-root",
        str(storage),
        "--scenes",
        str(scenes),
        "--views",
        str(views),
        "--quiet",
    ]
    if workers is not None:
        command += ["--workers", str(workers)]
    environment = {**os.environ, "DAGSTER_HOME": str(home)}
    environment.pop("SPATIAL_DATA_ROOT", None)
    started = time.perf_counter()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"spatial-build failed:\n{completed.stdout[-3000:]}\n{completed.stderr[-3000:]}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=12)
    parser.add_argument("--views", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--workers", type=int, default=None, help="spatial-build --workers N (default: its own)"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 scenes x 3 views built by 1 worker, one repeat (a smoke run; a smaller world has no OmniSpatial "
        "test item; the build's worker processes would cost more CPU than its partitions)",
    )
    args = parser.parse_args(argv)
    if args.tiny:
        args.scenes, args.views, args.repeats, args.workers = 2, 3, 1, 1
    with tempfile.TemporaryDirectory(prefix="bench_tick_") as folder:
        home, storage = Path(folder) / "dagster_home", Path(folder) / "data"
        home.mkdir()
        (home / "dagster.yaml").write_text(TEMPLATE.read_text())
        build_seconds = _build(home, storage, args.scenes, args.views, args.workers)
        os.environ["DAGSTER_HOME"] = str(home)

        import dagster as dg

        warnings.filterwarnings("ignore", category=dg.BetaWarning)  # Dagster's own evaluator uses a beta API
        from pipelines.automation import OBSERVE_RAW_FILES_JOB
        from pipelines.definitions import build_definitions

        instance = dg.DagsterInstance.get()
        defs = build_definitions(str(storage))
        observe_job = defs.resolve_job_def(OBSERVE_RAW_FILES_JOB)
        observations = []
        for _ in range(args.repeats + 1):
            started = time.perf_counter()
            if not observe_job.execute_in_process(instance=instance).success:
                raise SystemExit("observing the raw files failed")
            observations.append(time.perf_counter() - started)
        ticks, cursor, requested = [], None, 0
        for minute in range(args.repeats):
            started = time.perf_counter()
            result = dg.evaluate_automation_conditions(
                defs=defs,
                instance=instance,
                cursor=cursor,
                evaluation_time=datetime.datetime.now() + datetime.timedelta(minutes=minute),
            )
            ticks.append(time.perf_counter() - started)
            cursor = result.cursor
            requested += result.total_requested
        instance.dispose()
    rows = [
        ("spatial-build (for reference)", build_seconds),
        ("observe raw files, first after the build", observations[0]),
        ("observe raw files, unchanged (best)", min(observations[1:])),
        ("automation tick, nothing changed (best)", min(ticks)),
        ("no-change tick in all (observe + evaluate)", min(observations[1:]) + min(ticks)),
    ]
    sys.stdout.write(
        f"world: {args.scenes} scenes x {args.views} views; partitions requested by the ticks: {requested}\n"
    )
    width = max(len(name) for name, _ in rows)
    for name, seconds in rows:
        sys.stdout.write(f"{name:<{width}}  {seconds:8.2f} s\n")
    return 0 if requested == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
