"""Time ``spatial-build`` on the default sample world, old and new side by side in one run.

Usage:
    python benchmarks/bench_build.py                      # the default world (12 scenes x 6 views)
    python benchmarks/bench_build.py --baseline HEAD~3    # also the code of a git revision (the old code)
    python benchmarks/bench_build.py --tiny               # smoke run: 1 scene x 2 views, the sources only

Each case runs ``spatial-build`` as a user does (a subprocess with its own ``DAGSTER_HOME``, the
shipped instance template ``pipelines/deploy/dagster.yaml``, and an empty storage root), one after
the other in the same run of this script, so the machine's load affects all alike:

- ``baseline`` (with ``--baseline REV``): the code of that git revision (``git archive`` into a
  temporary folder, or a folder given instead of a revision, run with that folder first on
  ``PYTHONPATH``), range runs as it builds them;
- ``per partition``: ``spatial-build --run-per-partition``, every partition its own run;
- ``one process``: ``spatial-build --workers 1``, all partitions of a wave in one range run,
  computed one after another in the build's process;
- ``range runs``: ``spatial-build`` as a user runs it, range runs whose partitions are computed in a
  pool of worker processes (one per core).

``--cases`` picks among the last three (default: ``per partition`` and ``range runs``).

Prints, per case, the wall time of the whole command, its CPU time (user + system, the build and
every process it started, which a busy machine stretches less than wall time), the graph time that ``spatial-build`` reports
(with and without the sample world), the time of every wave (a blank where a case builds that set
of assets in another wave), the console lines, and the load average before and after, since a busy
machine stretches every figure. Last, each case's Parquet tables against the first case's: how many
files are byte-equal, and how many hold equal rows and schema (the files name differing ones).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import resource
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
CASES = {
    "per partition": ["--run-per-partition"],
    "one process": ["--workers", "1"],
    "range runs": [],
}
DEFAULT_CASES = "per partition,range runs"
BUILD = "import sys\nfrom pipelines.cli import main\nsys.exit(main(sys.argv[1:]))\n"
"""What runs ``spatial-build`` (the console script's body), so the same command runs a baseline's code."""


def _build(
    name: str, flags: list[str], scenes: int, views: int, work: Path, select: str, code: Path | None
) -> dict:
    home, storage = work / name / "dagster_home", work / name / "data"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(TEMPLATE.read_text())
    arguments = ["--storage-root", str(storage), "--scenes", str(scenes), "--views", str(views)]
    command = [sys.executable, "-c", BUILD, *arguments, "--select", select, *flags]
    environment = {**os.environ, "DAGSTER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    environment.pop("SPATIAL_DATA_ROOT", None)
    if code is not None:
        environment["PYTHONPATH"] = os.pathsep.join([str(code), environment.get("PYTHONPATH", "")])
    started = time.perf_counter()
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = subprocess.run(
        command,
        env=environment,
        cwd=code or REPOSITORY_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (children_after.ru_utime - children_before.ru_utime) + (
        children_after.ru_stime - children_before.ru_stime
    )
    match = SUMMARY.search(completed.stdout)
    if completed.returncode != 0 or match is None:
        raise SystemExit(
            f"{name}: spatial-build failed ({completed.returncode}):\n{completed.stderr[-3000:]}"
        )
    tables = table_digests(storage)
    waves = {}
    for line in completed.stderr.splitlines():
        wave = WAVE.search(line)
        if wave:
            label = ", ".join(sorted(name.replace("_asset", "") for name in wave["assets"].split(", ")))
            waves[f"{wave['job']}: {label}"] = float(wave["seconds"])
    return {
        "wall": wall,
        "cpu": cpu,
        "graph": float(match["graph"]),
        "after": float(match["after"]),
        "waves": waves,
        "tables": tables,
        "console_lines": len(completed.stdout.splitlines()) + len(completed.stderr.splitlines()),
    }


def table_digests(storage: Path) -> dict[str, tuple[str, str]]:
    """Every Parquet table file the build wrote: ``{relative path: (digest of its bytes, digest of its
    rows and schema)}`` (the sample world's files, previews, the LLM cache and staging left out).

    The rows' digest reads the storage root as ``<root>``: tables that name files under the root
    (``rgbd_frames``, ``pseudo_gt_boxes``) differ in bytes between builds into two roots."""
    import polars as pl

    digests = {}
    for path in sorted(storage.rglob("*.parquet")):
        relative = path.relative_to(storage)
        if relative.parts[0] in ("sample_world", "previews", "llm_cache") or any(
            part.startswith(".") for part in relative.parts
        ):
            continue
        frame = pl.read_parquet(path)
        text = repr((frame.schema, frame.rows())).replace(
            str(storage), "<root>"
        )  # paths of files under the root
        rows = hashlib.sha256(text.encode()).hexdigest()
        digests[relative.as_posix()] = (hashlib.sha256(path.read_bytes()).hexdigest(), rows)
    return digests


def _baseline(revision: str, folder: Path) -> Path:
    """The repository's files at ``revision``, unpacked into ``folder``."""
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY_ROOT), "archive", revision], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=None, help="Sample world scenes (default 12).")
    parser.add_argument("--views", type=int, default=None, help="Views per scene (default 6).")
    parser.add_argument("--select", default="*", help="Asset selection to build (default: everything).")
    parser.add_argument(
        "--baseline",
        default=None,
        help="The old code, timed too: a git revision of this repository, or a folder holding a copy of it.",
    )
    parser.add_argument(
        "--cases",
        default=DEFAULT_CASES,
        help=f"Comma-separated cases of this code to time, of {', '.join(CASES)} (default: {DEFAULT_CASES}).",
    )
    parser.add_argument(
        "--tiny", action="store_true", help="1 scene x 2 views, only the sources (a smoke run)."
    )
    args = parser.parse_args(argv)
    scenes = args.scenes or (1 if args.tiny else 12)
    views = args.views or (2 if args.tiny else 6)
    select = "*rgbd_frames" if args.tiny and args.select == "*" else args.select
    cases = {name: (CASES[name], None) for name in args.cases.split(",")}
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        if args.baseline:
            given = Path(args.baseline)
            code = given.resolve() if given.is_dir() else _baseline(args.baseline, work / "baseline_code")
            cases = {f"baseline {given.name if given.is_dir() else args.baseline}": ([], code), **cases}
        results = {
            name: _build(name.replace(" ", "_"), flags, scenes, views, work, select, code)
            for name, (flags, code) in cases.items()
        }
    load_after = os.getloadavg()[0]
    names = list(results)
    width = max(14, *(len(name) + 2 for name in names))
    sys.stdout.write(
        f"spatial-build, {scenes} scenes x {views} views, {os.cpu_count()} cores, "
        f"load average {load_before:.1f} before, {load_after:.1f} after\n"
    )
    sys.stdout.write(f"{'':<58}" + "".join(f"{name:>{width}}" for name in names) + "\n")

    def row(label: str, values: list[float | None]) -> None:
        cells = "".join(f"{value:>{width}.1f}" if value is not None else f"{'':>{width}}" for value in values)
        sys.stdout.write(f"{label[:58]:<58}{cells}\n")

    row("wall s (whole command)", [results[name]["wall"] for name in names])
    row("CPU s (user + sys, the command and its workers)", [results[name]["cpu"] for name in names])
    row("graph s (spatial-build's figure)", [results[name]["graph"] for name in names])
    row("graph s after the sample world", [results[name]["after"] for name in names])
    labels = list(dict.fromkeys(label for name in names for label in results[name]["waves"]))
    for label in labels:
        row(f"  {label}", [results[name]["waves"].get(label) for name in names])
    lines = "".join(f"{results[name]['console_lines']:>{width}d}" for name in names)
    sys.stdout.write(f"{'console lines':<58}{lines}\n")
    first = names[0]
    for name in names[1:]:
        ours, theirs = results[name]["tables"], results[first]["tables"]
        same_bytes = [path for path in ours if path in theirs and ours[path][0] == theirs[path][0]]
        same_rows = [path for path in ours if path in theirs and ours[path][1] == theirs[path][1]]
        differ = sorted(set(ours) ^ set(theirs)) + [
            path for path in ours if path in theirs and ours[path][1] != theirs[path][1]
        ]
        sys.stdout.write(
            f"Parquet tables of {name} against {first}: {len(ours)} files ({len(theirs)}), "
            f"{len(same_bytes)} byte-equal, {len(same_rows)} with equal rows and schema"
            + (f"; differ: {', '.join(differ[:12])}" if differ else "")
            + "\n"
        )
    for name in names[1:]:
        sys.stdout.write(
            f"graph time ratio {first} / {name}: {results[first]['graph'] / results[name]['graph']:.2f}\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
