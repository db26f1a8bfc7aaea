"""Time ``spatial-build`` on the default sample world, side by side, under two Dagster instance settings.

Usage:
    python benchmarks/bench_build.py            # the default world (12 scenes x 6 views)
    python benchmarks/bench_build.py --tiny     # smoke run: 1 scene x 2 views, the sources only

Each case runs ``spatial-build`` as a user does (a subprocess with its own ``DAGSTER_HOME`` and an
empty storage root), one after the other in the same run of this script, so the machine's load
affects both alike:

- ``dagster defaults``: an empty ``dagster.yaml`` (one SQLite event log per run);
- ``shipped template``: ``pipelines/deploy/dagster.yaml``, which ``./dev.sh`` installs.

Prints, per case, the wall time of the whole command, of the graph (what ``spatial-build`` reports),
of the graph after the sample world, and the ratio of the two cases.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = REPOSITORY_ROOT / "pipelines" / "deploy" / "dagster.yaml"
SUMMARY = re.compile(
    r"Built (?P<unpartitioned>\d+) unpartitioned asset definitions and (?P<partitions>\d+) partitions "
    r"\((?P<failed>\d+) failed\) in (?P<graph>[0-9.]+) s \((?P<after>[0-9.]+) s after the sample world\)"
)


def _build(name: str, dagster_yaml: str, scenes: int, views: int, work: Path, select: str) -> dict:
    home, storage = work / name / "dagster_home", work / name / "data"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(dagster_yaml)
    command = [
        str(Path(sys.executable).parent / "spatial-build"),
        "--storage-root",
        str(storage),
        "--scenes",
        str(scenes),
        "--views",
        str(views),
        "--select",
        select,
        "--quiet",
    ]
    environment = {**os.environ, "DAGSTER_HOME": str(home)}
    environment.pop("SPATIAL_DATA_ROOT", None)
    started = time.perf_counter()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    match = SUMMARY.search(completed.stdout)
    if completed.returncode != 0 or match is None:
        raise SystemExit(
            f"{name}: spatial-build failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    return {"wall": wall, "graph": float(match["graph"]), "after": float(match["after"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=None, help="Sample world scenes (default 12).")
    parser.add_argument("--views", type=int, default=None, help="Views per scene (default 6).")
    parser.add_argument("--select", default="*", help="Asset selection to build (default: everything).")
    parser.add_argument(
        "--tiny", action="store_true", help="1 scene x 2 views, only the sources (a smoke run)."
    )
    args = parser.parse_args(argv)
    scenes = args.scenes or (1 if args.tiny else 12)
    views = args.views or (2 if args.tiny else 6)
    select = "*rgbd_frames" if args.tiny and args.select == "*" else args.select
    cases = {"dagster defaults": "", "shipped template": TEMPLATE.read_text()}
    with tempfile.TemporaryDirectory() as folder:
        results = {
            name: _build(name.replace(" ", "_"), yaml, scenes, views, Path(folder), select)
            for name, yaml in cases.items()
        }
    sys.stdout.write(f"spatial-build, {scenes} scenes x {views} views, {os.cpu_count()} cores\n")
    sys.stdout.write(f"{'case':<20}{'wall s':>9}{'graph s':>9}{'after world s':>15}\n")
    for name, result in results.items():
        sys.stdout.write(f"{name:<20}{result['wall']:>9.1f}{result['graph']:>9.1f}{result['after']:>15.1f}\n")
    default, template = results["dagster defaults"], results["shipped template"]
    sys.stdout.write(f"graph time ratio template/defaults: {template['graph'] / default['graph']:.2f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
