"""Time ``spatial-build`` old and new side by side: wall time, graph time and the CPU of every process it starts.

Usage:
    python benchmarks/bench_build.py                         # HEAD against the working tree, 12 scenes x 6 views
    python benchmarks/bench_build.py --baseline REV --repeats 5
    python benchmarks/bench_build.py --baseline REV --scenes 24 --views 6 --workers 2
    python benchmarks/bench_build.py --tiny                  # smoke run: 2 scenes x 3 views, one repeat

Two variants build the whole graph (``--select`` narrows it) on the built-in sample world:

- ``old``: the code of ``--baseline`` (a git revision of this repository, exported with ``git archive``
  into a temporary folder, or a folder holding a copy of the repository; default ``HEAD``);
- ``new``: this working tree, or what ``--new`` names (a revision or a folder, as ``--baseline``).

Each runs ``spatial-build`` as a user does: a subprocess (``python -c`` with the console script's body,
that variant's folder first on ``PYTHONPATH`` and as working directory) with its own ``DAGSTER_HOME``
holding that variant's instance template ``pipelines/deploy/dagster.yaml``, and an empty storage root.
The runs are interleaved (old, new, old, new, ...; ``--repeats`` of each), so a machine's changing load
stretches both alike. A variant is passed only the flags its ``spatial-build --help`` lists: an old
revision without ``--workers`` runs with its own default, and says so.

CPU time is that of every process the build starts, grandchildren included, and those its parent never
waits for (the multiprocessing fork server, whose children it reaps itself, and the resource tracker):
this script makes itself the *child subreaper* of its descendants (Linux ``prctl``), so every orphaned
process of the build is re-parented to it; after the build exits, it waits for every remaining
descendant (killing, after ``--grace`` seconds, those still running: the "processes left behind",
which must be 0), and the difference of its ``getrusage(RUSAGE_CHILDREN)`` before and after is the user
+ system CPU of all of them. The CPU that ``/usr/bin/time`` would show (the build's process and the
children it waited for) is printed beside it, to show what that misses.

Prints one line per run, then per variant the median over its runs of: the wall time of the whole
command; the graph time from ``spatial-build``'s summary line (also after the sample world; a blank where
a revision prints none); CPU seconds of every process and per scene; the processes still running when
the build exited and those left behind (sums over the runs); and the ratios new/old. Last, the Parquet
tables of each variant's first run: how many files are byte-equal, and how many hold equal rows and
schema (differing files are named).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import logging
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("bench_build")

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path("pipelines") / "deploy" / "dagster.yaml"
"""The instance template, relative to a variant's folder (the working tree's where a revision has none)."""
SUMMARY = re.compile(
    r"^Built (?P<what>.*?) in (?P<graph>[0-9.]+) s(?: \((?P<after>[0-9.]+) s after the sample world\))?",
    re.MULTILINE,
)
"""``spatial-build``'s summary line; revisions before the sample world's share was reported lack ``after``."""
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
BUILD = "import sys\nfrom pipelines.cli import main\nsys.exit(main(sys.argv[1:]))\n"
"""What runs ``spatial-build`` (the console script's body), so the same command runs a baseline's code."""
PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` option (``<linux/prctl.h>``): orphaned descendants are re-parented to this process."""
DEFAULT_SCENES, DEFAULT_VIEWS = 12, 6
TINY_SCENES, TINY_VIEWS = 2, 3


def become_subreaper() -> None:
    """Make this process the child subreaper of its descendants, so that their CPU time reaches its
    ``RUSAGE_CHILDREN`` whoever started them."""
    if not sys.platform.startswith("linux"):
        raise SystemExit(
            "bench_build.py counts the CPU of every process of a build with Linux's prctl: run it on Linux"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(code)}")


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _running_children() -> list[int]:
    """This process's children that are still running (not zombies), from ``/proc``."""
    own = os.getpid()
    running = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = (Path("/proc") / entry / "stat").read_text()
        except (FileNotFoundError, ProcessLookupError):  # it exited meanwhile
            continue
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(parent) == own and state != "Z":
            running.append(int(entry))
    return running


def reap_descendants(grace: float) -> list[int]:
    """Wait for every child of this process until none is left; kill those still running after ``grace``
    seconds (and, in turn, their children, re-parented here). Returns the killed processes' ids."""
    deadline = time.monotonic() + grace
    killed: list[int] = []
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() >= deadline:
            for child in _running_children():
                if child not in killed:
                    try:
                        os.kill(child, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    killed.append(child)
        time.sleep(0.02)


def options_of(code: Path, environment: dict[str, str]) -> set[str]:
    """The flags that ``spatial-build --help`` of the code in ``code`` lists."""
    completed = subprocess.run(
        [sys.executable, "-c", BUILD, "--help"],
        env=environment,
        cwd=code,
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise SystemExit(f"spatial-build --help failed in {code}:\n{completed.stderr[-3000:]}")
    return set(OPTION.findall(completed.stdout))


def _environment(code: Path, home: Path | None = None) -> dict[str, str]:
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    environment.pop("SPATIAL_DATA_ROOT", None)
    environment.pop("DAGSTER_HOME", None)
    if home is not None:
        environment["DAGSTER_HOME"] = str(home)
    environment["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(code), os.environ.get("PYTHONPATH", "")) if part
    )
    return environment


def run_build(code: Path, flags: list[str], folder: Path, grace: float) -> dict:
    """Run ``spatial-build`` of the code in ``code`` once, into ``folder``; its figures and outputs."""
    home, storage = folder / "dagster_home", folder / "data"
    home.mkdir(parents=True)
    template = code / TEMPLATE if (code / TEMPLATE).is_file() else REPOSITORY_ROOT / TEMPLATE
    (home / "dagster.yaml").write_text(template.read_text())
    command = [sys.executable, "-c", BUILD, "--storage-root", str(storage), *flags]
    reap_descendants(grace)  # nothing of an earlier command may count here
    cpu_before = _cpu_of_children()
    load = os.getloadavg()[0]
    with (folder / "stdout.txt").open("w") as stdout, (folder / "stderr.txt").open("w") as stderr:
        started = time.perf_counter()
        # Files, not pipes: a descendant that outlives the build keeps its inherited stdout open.
        with subprocess.Popen(
            command, env=_environment(code, home), cwd=code, stdout=stdout, stderr=stderr
        ) as build:
            _, status, usage = os.wait4(build.pid, 0)
            wall = time.perf_counter() - started
            build.returncode = os.waitstatus_to_exitcode(status)
    outlived = len(_running_children())
    left_behind = reap_descendants(grace)
    cpu = _cpu_of_children() - cpu_before
    output = (folder / "stdout.txt").read_text()
    summary = SUMMARY.search(output)
    if build.returncode != 0 or summary is None:
        raise SystemExit(
            f"spatial-build in {code} exited with {build.returncode}"
            + ("" if summary else " without its summary line")
            + f":\n{(folder / 'stderr.txt').read_text()[-3000:]}"
        )
    return {
        "wall": wall,
        "graph": float(summary["graph"]),
        "after": float(summary["after"]) if summary["after"] else None,
        "cpu": cpu,
        "cpu_waited": usage.ru_utime + usage.ru_stime,
        "outlived": outlived,
        "left_behind": len(left_behind),
        "load": load,
        "storage": storage,
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
        text = repr((frame.schema, frame.rows())).replace(str(storage), "<root>")
        rows = hashlib.sha256(text.encode()).hexdigest()
        digests[relative.as_posix()] = (hashlib.sha256(path.read_bytes()).hexdigest(), rows)
    return digests


def export_revision(revision: str, folder: Path) -> Path:
    """The repository's files at ``revision``, unpacked into ``folder``."""
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY_ROOT), "archive", revision], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def code_of(role: str, given: str | None, work: Path) -> tuple[str, Path]:
    """A variant's name and folder: the working tree (``given`` None), a folder, or a git revision exported
    under ``work``."""
    if given is None:
        return f"{role} (working tree)", REPOSITORY_ROOT
    if Path(given).is_dir():
        return f"{role} ({Path(given).resolve().name})", Path(given).resolve()
    return f"{role} ({given})", export_revision(given, work / f"{role}_code")


def flags_for(name: str, options: set[str], args: argparse.Namespace, scenes: int, views: int) -> list[str]:
    """The flags of one variant's build: the world's size always, the others only where its ``--help``
    lists them."""
    required = ["--scenes", str(scenes), "--views", str(views)]
    if args.select != "*":
        required += ["--select", args.select]
    missing = [flag for flag in required[::2] if flag not in options]
    if missing or "--storage-root" not in options:
        raise SystemExit(f"{name}: spatial-build has no {', '.join(missing or ['--storage-root'])}")
    flags = list(required)
    if args.workers is not None:
        if "--workers" in options:
            flags += ["--workers", str(args.workers)]
        else:
            logger.warning("%s: spatial-build has no --workers; it runs with its own default", name)
    return flags


def _median(values: list[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.median(present) if len(present) == len(values) and present else None


def write_report(
    runs: dict[str, list[dict]], scenes: int, views: int, load_before: float, grace: float
) -> None:
    """The side-by-side table of the variants' medians and the ratios new/old."""
    names = list(runs)
    width = max(12, *(len(name) + 2 for name in names))
    old, new = names
    sys.stdout.write(
        f"spatial-build, {scenes} scenes x {views} views, {os.cpu_count()} cores, "
        f"load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after; "
        f"medians of {len(runs[old])} and {len(runs[new])} runs\n"
    )
    label_width = 58
    sys.stdout.write(
        f"{'':<{label_width}}" + "".join(f"{name:>{width}}" for name in names) + f"{'new/old':>10}\n"
    )

    def row(label: str, key: str, scale: float = 1.0) -> None:
        """The median of each variant's runs (divided by ``scale``) and their ratio new/old."""
        values = [_median([run[key] for run in runs[name]]) for name in names]
        values = [None if value is None else value / scale for value in values]
        cells = "".join(f"{'':>{width}}" if value is None else f"{value:>{width}.2f}" for value in values)
        ratio = "" if None in values or not values[0] else f"{values[1] / values[0]:>10.2f}"
        sys.stdout.write(f"{label:<{label_width}}{cells}{ratio}\n")

    def count(label: str, key: str) -> None:
        """The sum over each variant's runs."""
        cells = "".join(f"{sum(run[key] for run in runs[name]):>{width}d}" for name in names)
        sys.stdout.write(f"{label:<{label_width}}{cells}\n")

    row("wall s (whole command)", "wall")
    row("graph s (spatial-build's summary)", "graph")
    row("graph s after the sample world", "after")
    row("CPU s (user + sys, every process of the build)", "cpu")
    row("CPU s per scene", "cpu", scale=scenes)
    row("CPU s the build waited for (/usr/bin/time's figure)", "cpu_waited")
    count("processes still running when the build exited", "outlived")
    count(f"processes left behind (killed after {grace:g} s)", "left_behind")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--baseline",
        default="HEAD",
        help="The old code: a git revision of this repository, or a folder holding a copy of it (default HEAD).",
    )
    parser.add_argument(
        "--new",
        default=None,
        help="The new code: a git revision or a folder, as --baseline (default: this working tree).",
    )
    parser.add_argument(
        "--scenes", type=int, default=None, help=f"Sample world scenes (default {DEFAULT_SCENES})."
    )
    parser.add_argument("--views", type=int, default=None, help=f"Views per scene (default {DEFAULT_VIEWS}).")
    parser.add_argument(
        "--repeats", type=int, default=None, help="Runs of each variant, interleaved (default 3)."
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="spatial-build --workers N (default: its own)."
    )
    parser.add_argument("--select", default="*", help="Asset selection to build (default: everything).")
    parser.add_argument(
        "--grace",
        type=float,
        default=5.0,
        help="Seconds the build's processes may run on after it exits before they are killed (default 5).",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help=f"Smoke run: {TINY_SCENES} scenes x {TINY_VIEWS} views, one repeat (explicit flags still win).",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    scenes = args.scenes or (TINY_SCENES if args.tiny else DEFAULT_SCENES)
    views = args.views or (TINY_VIEWS if args.tiny else DEFAULT_VIEWS)
    repeats = args.repeats or (1 if args.tiny else 3)
    become_subreaper()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench_build_") as temporary:
        work = Path(temporary)
        variants = dict(
            code_of(role, given, work) for role, given in (("old", args.baseline), ("new", args.new))
        )
        flags = {
            name: flags_for(name, options_of(code, _environment(code)), args, scenes, views)
            for name, code in variants.items()
        }
        runs: dict[str, list[dict]] = {name: [] for name in variants}
        tables: dict[str, dict[str, tuple[str, str]]] = {}
        for repeat in range(repeats):
            for name, code in variants.items():
                logger.info("run %d of %d: %s", repeat + 1, repeats, name)
                folder = work / f"{name.split()[0]}_{repeat}"
                run = run_build(code, flags[name], folder, args.grace)
                if name not in tables:
                    tables[name] = table_digests(run["storage"])
                shutil.rmtree(folder)
                runs[name].append(run)
                sys.stdout.write(
                    f"run {repeat + 1} {name}: wall {run['wall']:.1f} s, graph {run['graph']:.1f} s, "
                    f"CPU {run['cpu']:.1f} s every process ({run['cpu_waited']:.1f} s waited for by the build), "
                    f"{run['outlived']} outlived the build, {run['left_behind']} left behind, "
                    f"load {run['load']:.1f}\n"
                )
                sys.stdout.flush()
    write_report(runs, scenes, views, load_before, args.grace)
    (old, theirs), (new, ours) = tables.items()
    same_bytes = [path for path in ours if path in theirs and ours[path][0] == theirs[path][0]]
    same_rows = [path for path in ours if path in theirs and ours[path][1] == theirs[path][1]]
    differ = sorted(set(ours) ^ set(theirs)) + [
        path for path in ours if path in theirs and ours[path][1] != theirs[path][1]
    ]
    sys.stdout.write(
        f"Parquet tables of {new} against {old}: {len(ours)} files ({len(theirs)}), "
        f"{len(same_bytes)} byte-equal, {len(same_rows)} with equal rows and schema"
        + (f"; differ: {', '.join(differ[:12])}" if differ else "")
        + (
            f"; bytes differ: {', '.join(sorted(set(same_rows) - set(same_bytes))[:12])}"
            if same_rows != same_bytes
            else ""
        )
        + "\n"
    )
    left_behind = sum(run["left_behind"] for variant in runs.values() for run in variant)
    if left_behind:
        logger.warning(
            "%d processes of the builds were still running %.0f s after they exited", left_behind, args.grace
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
