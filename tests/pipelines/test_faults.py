"""Concurrent and interrupted builds lose nothing.

- two ``spatial-build --select sample_world`` on an empty root build one whole world, stamped with a
  manifest that matches its files;
- several processes writing the same partition (and the same table set) leave whole files, and the
  table and quarantine of a set always come from the same writer;
- a step's outputs become visible together, and a failed step publishes none of them;
- ``spatial-build`` killed (SIGKILL) at random points, 20 times and more, two builds at a time on one
  root: after every kill each Parquet file reads, and a rebuild gives files byte-equal to a clean
  build at the same path (tables hold absolute paths), with nothing left over.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.sample_world import SampleWorldConfig, generate_sample_world
from assets.sample_world.completion import MANIFEST_FILE, verify_world
from assets.sample_world.generator import stamp_config
from data_contracts.storage import STAGING_FOLDER, read_parquet_file, read_table, table_path
from pipelines.io_manager import ParquetIOManager

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
SMALL_WORLD = ["--scenes", "2", "--views", "3"]
SOURCES_STAMP = "sample_world_config.json"
"""The ``sample_world`` asset's own stamp (it records build times: compared by its configuration)."""
KILLED_BUILD_SELECTION = " or ".join(
    f"key:{key}"
    for key in (
        "sample_world",
        "mcq_questions",
        "mcq_questions_quarantine",
        "scene_graphs",
        "scene_graphs_quarantine",
        "rgbd_scenes",
        "rgbd_frames",
        "rgbd_frames_quarantine",
    )
)
"""The sample world and the source tables: three multi-output assets (tables, quarantines, previews)."""
MIN_KILLS = 20


def _dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("")
    return home


def _environment(dagster_home: Path) -> dict[str, str]:
    environment = {
        **os.environ,
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONPATH": str(REPOSITORY_ROOT),
        "PYTHONWARNINGS": "ignore",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    environment.pop("SPATIAL_DATA_ROOT", None)
    return environment


class Build:
    """``spatial-build`` in a subprocess; its output lines are read on a thread, with their times."""

    def __init__(self, root: Path, dagster_home: Path, select: str) -> None:
        self.started = time.monotonic()
        self.ready = threading.Event()
        self.lines: list[tuple[float, str]] = []
        self.first_log: int | None = None
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pipelines.cli",
                "--storage-root",
                str(root),
                "--select",
                select,
                *SMALL_WORLD,
            ],
            cwd=REPOSITORY_ROOT,
            env=_environment(dagster_home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic(), line))
            if self.first_log is None and " INFO " in line:  # the first log line: imports are done
                self.first_log = len(self.lines) - 1
                self.ready.set()
        self.ready.set()

    def log_lines(self) -> int:
        """Lines written since the imports ended."""
        return 0 if self.first_log is None else len(self.lines) - self.first_log

    def seconds_since_line(self, index: int) -> float | None:
        """Seconds since the ``index``-th line after the imports was written; None before it was."""
        if self.first_log is None or self.first_log + index >= len(self.lines):
            return None
        return time.monotonic() - self.lines[self.first_log + index][0]

    def wait(self, timeout: float = 600) -> int:
        """Wait for the end; the exit status."""
        status = self.process.wait(timeout=timeout)
        self.reader.join(timeout=10)
        return status

    def kill(self) -> bool:
        """SIGKILL the build; whether it was still running."""
        running = self.process.poll() is None
        if running:
            self.process.send_signal(signal.SIGKILL)
        self.wait()
        return running and self.process.returncode == -signal.SIGKILL

    @property
    def output(self) -> str:
        return "".join(line for _, line in self.lines[-60:])


@dataclasses.dataclass
class KillPlan:
    """Where kills may land: the log lines and the seconds (after the imports) of a whole build."""

    lines: int
    seconds: float

    def moment(self, rng: random.Random) -> tuple[int, float]:
        """A kill point: after a random log line and a random extra moment, or at a random time."""
        if rng.random() < 0.5:
            return rng.randrange(self.lines), rng.uniform(0.0, 0.5)
        return 0, rng.uniform(0.0, self.seconds)

    def shrink_to(self, build: Build) -> None:
        """A build ended before its kill: aim inside builds as long as that one."""
        self.lines = min(self.lines, max(2, build.log_lines() - 1))
        since_imports = build.seconds_since_line(0)
        if since_imports is not None:
            self.seconds = min(self.seconds, max(0.5, since_imports))


def _kill_at_random_points(builds: list[Build], rng: random.Random, plan: KillPlan) -> int:
    """Kill each build at a random point of ``plan``; returns the kills."""
    moments = {id(build): plan.moment(rng) for build in builds}
    kills, pending = 0, list(builds)
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for build in list(pending):
            line, extra = moments[id(build)]
            since = build.seconds_since_line(line)
            if build.process.poll() is not None or (since is not None and since >= extra):
                killed = build.kill()
                kills += killed
                if not killed:
                    plan.shrink_to(build)
                pending.remove(build)
        time.sleep(0.005)
    return kills + sum(build.kill() for build in pending)


def _world_files(world: Path) -> dict[str, bytes]:
    return {
        path.relative_to(world).as_posix(): path.read_bytes()
        for path in sorted(world.rglob("*"))
        if path.is_file() and path.name not in (MANIFEST_FILE, SOURCES_STAMP)
    }


def _snapshot(root: Path) -> dict[str, object]:
    """Every file under ``root``: its bytes; the two stamps by what they certify (not build times)."""
    snapshot: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        relative = path.relative_to(root).as_posix()
        if path.name == MANIFEST_FILE:
            stamp = json.loads(path.read_text())
            snapshot[relative] = {"config": stamp["config"], "files": stamp["files"]}
        elif path.name == SOURCES_STAMP:
            snapshot[relative] = json.loads(path.read_text())["config"]
        else:
            snapshot[relative] = path.read_bytes()
    return snapshot


def _assert_parquet_files_read(root: Path) -> int:
    files = sorted(root.rglob("*.parquet"))
    for path in files:
        assert pq.read_table(path).num_rows == pl.read_parquet(path).height, path
    return len(files)


def _built_world_config(root: Path) -> SampleWorldConfig:
    """The world ``spatial-build --scenes 2 --views 3`` builds (the asset's defaults otherwise)."""
    return SampleWorldConfig(
        root=root / "sample_world",
        seed=0,
        num_scenes=2,
        views_per_scene=3,
        width=320,
        height=240,
        show_progress=False,
    )


@pytest.mark.slow
def test_concurrent_sample_world_builds_on_an_empty_root(tmp_path):
    home = _dagster_home(tmp_path)
    root = tmp_path / "data"
    builds = [Build(root, home, "sample_world") for _ in range(2)]
    for build in builds:
        assert build.wait() == 0, build.output
        assert "(0 failed)" in build.output, build.output
    config = _built_world_config(root)
    stamp = verify_world(config.root, stamp_config(config))
    assert stamp is not None, "the world does not match its manifest"
    reference = generate_sample_world(
        dataclasses.replace(config, root=tmp_path / "reference" / "sample_world")
    )
    built, expected = _world_files(config.root), _world_files(reference.root)
    assert sorted(built) == sorted(expected) == sorted(stamp["files"])
    assert [name for name in built if built[name] != expected[name]] == []
    truth = json.loads((config.root / "truth" / "world.json").read_text())
    assert len(truth["questions"]) == len(
        json.loads((reference.root / "truth" / "world.json").read_text())["questions"]
    )
    assert sorted(path.name for path in root.iterdir()) == [".sample_world.lock", "sample_world"]


_WRITER = """
import sys, time
from pathlib import Path
import polars as pl
from data_contracts.storage import StagedTables, table_path, write_table
root, writer, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
while not (root / "go").exists():
    time.sleep(0.01)
for step in range(rounds):
    tag = f"{writer}-{step}"
    frame = pl.DataFrame({"tag": [tag] * 5000, "value": list(range(5000))})
    write_table(frame, table_path(root, "shared", "partition=0"))
    tables = StagedTables(root, f"run{writer}.{step}.step")
    tables.add("table", frame.head(10 + writer), table_path(root, "pair", "partition=0"))
    tables.add("quarantine", frame.head(writer), table_path(root, "pair_quarantine", "partition=0"))
    tables.commit()
"""


def _check_shared(path: Path) -> str:
    frame = read_parquet_file(path)  # one open (a path-reading reader may pair two versions' parts)
    assert frame.height == 5000 and frame["tag"].n_unique() == 1, "a mixed or partial file"
    return frame["tag"][0]


def test_concurrent_writes_of_one_partition(tmp_path):
    writers, rounds = 4, 15
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), str(writer), str(rounds)],
            cwd=REPOSITORY_ROOT,
            env=_environment(tmp_path),
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(writers)
    ]
    shared = table_path(tmp_path, "shared", "partition=0")
    reads = 0
    (tmp_path / "go").touch()
    while any(process.poll() is None for process in processes):
        if shared.exists():
            _check_shared(shared)  # every file a reader sees is whole
            reads += 1
    assert [process.wait() for process in processes] == [0] * writers, [p.stderr.read() for p in processes]
    assert _check_shared(shared).endswith(f"-{rounds - 1}")
    table = read_table(tmp_path, "pair", ["partition=0"])
    quarantine = read_table(tmp_path, "pair_quarantine", ["partition=0"])
    writer = int(table["tag"][0].split("-")[0])
    assert table.height == 10 + writer and quarantine.height == writer  # one writer's set
    assert quarantine.height == 0 or quarantine["tag"][0] == table["tag"][0]
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []
    assert sorted(p.name for p in (tmp_path / STAGING_FOLDER).iterdir()) == ["commit.lock"]
    assert reads > 0


def _pair_assets(seen: list[bool], fail: bool, tag: str):
    @dg.multi_asset(outs={"pair": dg.AssetOut(), "pair_quarantine": dg.AssetOut()})
    def pair(context):
        root = Path(context.resources.io_manager.root)
        yield dg.Output(pl.DataFrame({"tag": [tag]}), "pair")
        seen.append(table_path(root, "pair").exists())  # the first output was handled, not yet published
        if fail:
            raise RuntimeError("the step fails after its first output")
        yield dg.Output(pl.DataFrame({"tag": [tag]}), "pair_quarantine")

    return pair


def test_a_step_publishes_its_outputs_together(tmp_path):
    resources = {"io_manager": ParquetIOManager(root=str(tmp_path))}
    seen: list[bool] = []
    assert dg.materialize([_pair_assets(seen, False, "first")], resources=resources).success
    assert seen == [False]
    assert read_table(tmp_path, "pair")["tag"].to_list() == ["first"]
    assert read_table(tmp_path, "pair_quarantine")["tag"].to_list() == ["first"]

    result = dg.materialize([_pair_assets(seen, True, "second")], resources=resources, raise_on_error=False)
    assert not result.success
    assert read_table(tmp_path, "pair")["tag"].to_list() == ["first"]  # nothing of the failed step
    assert read_table(tmp_path, "pair_quarantine")["tag"].to_list() == ["first"]


@pytest.mark.slow
def test_builds_killed_at_random_points_lose_nothing(tmp_path):
    """Builds run two at a time on one root and are killed at random points, until 20 kills."""
    seed = int(time.time())
    rng = random.Random(seed)
    home = _dagster_home(tmp_path)
    root = tmp_path / "data"
    clean = Build(root, home, KILLED_BUILD_SELECTION)
    assert clean.wait() == 0, clean.output
    plan = KillPlan(
        lines=clean.log_lines()
        - sum("alembic" in line for _, line in clean.lines),  # a new instance's set-up
        seconds=clean.seconds_since_line(0),
    )
    expected = _snapshot(root)
    assert any(name.endswith("_quarantine.parquet") for name in expected) and plan.lines > 10
    os.rename(root, tmp_path / "clean")

    kills = builds = files_checked = 0
    for round_number in range(MIN_KILLS):
        if kills >= MIN_KILLS:
            break
        if round_number % 3 == 1:  # now and then the world is gone, so kills land in its generation too
            shutil.rmtree(root / "sample_world", ignore_errors=True)
        pair = [Build(root, home, KILLED_BUILD_SELECTION) for _ in range(2)]
        builds += len(pair)
        kills += _kill_at_random_points(pair, rng, plan)
        if root.exists():
            files_checked += _assert_parquet_files_read(root)
    assert kills >= MIN_KILLS, f"only {kills} kills in {builds} builds (seed {seed})"

    rebuild = Build(root, home, KILLED_BUILD_SELECTION)
    assert rebuild.wait() == 0, rebuild.output
    _assert_parquet_files_read(root)
    actual = _snapshot(root)
    assert sorted(actual) == sorted(expected), f"seed {seed}"  # no leftovers, nothing missing
    different = [name for name in expected if actual[name] != expected[name]]
    assert different == [], f"seed {seed}: {different}"
    config = _built_world_config(root)
    assert verify_world(config.root, stamp_config(config)) is not None
    sys.stderr.write(
        f"{kills} kills in {builds} builds (seed {seed}), {files_checked} Parquet files read after kills, "
        f"{len(actual)} files compared with the clean build\n"
    )
