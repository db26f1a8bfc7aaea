"""Time ``spatial-build`` on the default sample world, old mode and new mode side by side.

Usage:
    python benchmarks/bench_build.py            # the default world (12 scenes x 6 views)
    python benchmarks/bench_build.py --tiny     # smoke run: 1 scene x 2 views, the sources only

Each case runs ``spatial-build`` as a user does (a subprocess with its own ``DAGSTER_HOME``, the
shipped instance template ``pipelines/deploy/dagster.yaml``, and an empty storage root), one after
the other in the same run of this script, so the machine's load affects both alike:

- ``run per partition``: ``spatial-build --run-per-partition``, every partition its own run (the
  old mode);
- ``range runs``: ``spatial-build``, all partitions of a wave in one run (single-run backfills).

Prints, per case, the wall time of the whole command, the graph time
that ``spatial-build`` reports, the time of every wave, and the ratio of the two graph times.
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
WAVE = re.compile(
    r"spatial_build: (?P<job>\w+) (?P<assets>[\w, ]+): (?P<outcome>.*) \((?:\d+ runs?, )?(?P<seconds>[0-9.]+) s\)$"
)
CASES = {"run per partition": ["--run-per-partition"], "range runs": []}


def _build(name: str, flags: list[str], scenes: int, views: int, work: Path, select: str) -> dict:
    home, storage = work / name / "dagster_home", work / name / "data"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(TEMPLATE.read_text())
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
        *flags,
    ]
    environment = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    environment.pop("SPATIAL_DATA_ROOT", None)
    started = time.perf_counter()
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    match = SUMMARY.search(completed.stdout)
    if completed.returncode != 0 or match is None:
        raise SystemExit(
            f"{name}: spatial-build failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    waves = []
    for line in completed.stderr.splitlines():
        wave = WAVE.search(line)
        if wave:
            label = wave["assets"].replace("_asset", "")
            waves.append((f"{wave['job']}: {label}", float(wave["seconds"])))
    return {
        "wall": wall,
        "graph": float(match["graph"]),
        "after": float(match["after"]),
        "waves": waves,
        "console_lines": len(completed.stdout.splitlines()) + len(completed.stderr.splitlines()),
    }


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
    with tempfile.TemporaryDirectory() as folder:
        results = {
            name: _build(name.replace(" ", "_"), flags, scenes, views, Path(folder), select)
            for name, flags in CASES.items()
        }
    old, new = results["run per partition"], results["range runs"]
    sys.stdout.write(f"spatial-build, {scenes} scenes x {views} views, {os.cpu_count()} cores\n")
    sys.stdout.write(f"{'':<58}{'per partition':>15}{'range runs':>12}\n")
    rows = [("wall s (whole command)", old["wall"], new["wall"])]
    rows.append(("graph s (spatial-build's figure)", old["graph"], new["graph"]))
    rows.append(("graph s after the sample world", old["after"], new["after"]))
    for (label, old_seconds), (_, new_seconds) in zip(old["waves"], new["waves"], strict=True):
        rows.append((f"  {label}"[:58], old_seconds, new_seconds))
    for label, old_value, new_value in rows:
        sys.stdout.write(f"{label:<58}{old_value:>15.1f}{new_value:>12.1f}\n")
    sys.stdout.write(f"{'console lines':<58}{old['console_lines']:>15d}{new['console_lines']:>12d}\n")
    sys.stdout.write(f"graph time ratio per partition / range runs: {old['graph'] / new['graph']:.2f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
