"""Concurrent and interrupted builds lose nothing.

- two ``spatial-build --select sample_world`` on an empty root build one whole world, stamped with a
  manifest that matches its files;
- several processes writing the same partition leave whole files;
- a step's outputs are written one whole file each: a step that fails after its first output leaves that
  output's new file beside the previous version of the others, and its next run writes them all;
- ``spatial-build`` killed (SIGKILL) at random points, 10 times and more, two builds at a time on one
  root: after every kill each Parquet file reads, and a rebuild gives files byte-equal to a clean
  build at the same path (tables hold absolute paths), with nothing left over.

Every ``spatial-build`` here (the concurrent sample world builds; the clean, killed and rebuilt builds of
the kill test) runs the same ``main`` of ``pipelines.cli`` in a process of its own, forked from one server
per file that has done the imports that start no thread (Dagster's, the slowest), so those are paid once
instead of per build; each kill lands at a random moment of a build's work, as in a started
``spatial-build``.
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
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest

from assets.sample_world import SampleWorldConfig, generate_sample_world
from assets.sample_world.completion import MANIFEST_FILE, verify_world
from assets.sample_world.config import (
    DEFAULT_WORLD_ARKITSCENES_VIDEOS,
    DEFAULT_WORLD_CAMERA_PATH,
    DEFAULT_WORLD_SCANNETPP_SCENES,
)
from assets.sample_world.generator import stamp_config
from data_contracts.parquet_files import read_parquet_file
from data_contracts.storage import read_table, table_path
from pipelines.io_manager import ParquetIOManager

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
TINY_WORLD = {"scenes": 1, "views": 2}
"""The world of the concurrent sample world builds."""
KILLED_BUILD_WORLD = {"scenes": 2, "views": 2}
"""The world of the killed builds: smaller, so each build (and so each kill) costs less."""
KILLED_BUILD_SELECTION = " or ".join(
    f"key:{key}"
    for key in (
        "sample_world",
        "mcq_questions",
        "mcq_images",
        "mcq_questions_quarantine",
        "scene_graphs",
        "scene_graphs_quarantine",
        "rgbd_scenes",
        "rgbd_frames",
        "rgbd_frames_quarantine",
    )
)
"""The sample world and the source tables: three multi-output assets (tables, quarantines, previews)."""
MIN_KILLS = 10


def _dagster_home(tmp_path: Path, name: str = "dagster_home") -> Path:
    home = tmp_path / name
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


_FORK_SERVER = """
import json, os, sys
import dagster, dash  # the slowest imports of a build that start no thread (dash comes with open3d)

# fork() copies only the calling thread: forking is safe only while this process has no other thread.
single_threaded = len(os.listdir("/proc/self/task")) == 1
sys.stdout.write(json.dumps({"single_threaded": single_threaded}) + "\\n")
sys.stdout.flush()
for line in sys.stdin if single_threaded else ():
    request = json.loads(line)
    if "wait" in request:
        reply = {"returncode": os.waitstatus_to_exitcode(os.waitpid(request["wait"], 0)[1])}
    else:
        pid = os.fork()
        if pid == 0:  # the build: its own output file, environment and exit status
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.environ.clear()
            os.environ.update(request["environment"])
            from pipelines.cli import main

            raise SystemExit(main(request["argv"]))
        reply = {"pid": pid}
    sys.stdout.write(json.dumps(reply) + "\\n")
    sys.stdout.flush()
"""


class ForkServer:
    """A process that has done the imports of a build that start no thread, and forks builds on request.

    Its children run ``main`` of ``pipelines.cli`` as ``python -m pipelines.cli`` does, without the
    seconds a new interpreter pays for those imports. It reaps them when asked (until then an ended
    child stays a zombie, so its process id is not reused). Where those imports start a thread (a
    new version of a dependency), forking would be unsafe: ``usable`` is False and builds start as
    new processes.
    """

    def __init__(self, dagster_home: Path, logs: Path) -> None:
        self.environment = _environment(dagster_home)
        self.logs = logs
        logs.mkdir(exist_ok=True)
        self.started = 0
        self.process = subprocess.Popen(
            [sys.executable, "-c", _FORK_SERVER],
            cwd=REPOSITORY_ROOT,
            env=self.environment,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.usable = json.loads(self.process.stdout.readline() or "{}").get("single_threaded", False)

    def _ask(self, request: dict) -> dict:
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"the fork server ended (status {self.process.poll()})"
        return json.loads(line)

    def start(self, argv: list[str], dagster_home: Path) -> ForkedBuildProcess:
        self.started += 1
        log = self.logs / f"build_{self.started}.log"
        environment = {**self.environment, "DAGSTER_HOME": str(dagster_home)}
        pid = self._ask({"argv": argv, "environment": environment, "log": str(log)})["pid"]
        return ForkedBuildProcess(self, pid, log)

    def reap(self, pid: int) -> int:
        return self._ask({"wait": pid})["returncode"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory) -> Iterator[ForkServer]:
    """The :class:`ForkServer` of this file's builds (each build names its own ``DAGSTER_HOME``)."""
    folder = tmp_path_factory.mktemp("fork_server")
    server = ForkServer(_dagster_home(folder), folder / "build_logs")
    yield server
    server.close()


class ForkedBuildProcess:
    """A build forked by :class:`ForkServer`, with the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, server: ForkServer, pid: int, log: Path) -> None:
        self.server, self.pid, self.log = server, pid, log
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            if stat[stat.rindex(")") + 2] == "Z":  # ended, not yet reaped
                self.returncode = self.server.reap(self.pid)
        return self.returncode

    def wait(self, timeout: float = 600) -> int:
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"build {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, signal_number: int) -> None:
        os.kill(self.pid, signal_number)


class Build:
    """``spatial-build`` in a subprocess (output drained on a thread), or forked by a :class:`ForkServer`.

    It counts as *working* from the first moment it holds a file of its Dagster instance or its
    storage root open: its imports are done and the build has begun (a Linux ``/proc`` look-up).
    """

    def __init__(
        self,
        root: Path,
        dagster_home: Path,
        select: str,
        server: ForkServer | None = None,
        world: dict[str, int] = TINY_WORLD,
    ) -> None:
        self.watched = (str(root), str(dagster_home))
        self.working_since: float | None = None
        self.lines: list[str] = []
        argv = ["--storage-root", str(root), "--select", select]
        argv += ["--scenes", str(world["scenes"]), "--views", str(world["views"])]
        self.reader: threading.Thread | None = None
        if server is not None and server.usable:
            self.process = server.start(argv, dagster_home)
            return
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipelines.cli", *argv],
            cwd=REPOSITORY_ROOT,
            env=_environment(dagster_home),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self.reader.start()

    def working_for(self) -> float | None:
        """Seconds since the build began working (None before); call often, it looks at open files."""
        if self.working_since is None and self.process.poll() is None:
            folder = Path(f"/proc/{self.process.pid}/fd")
            try:
                targets = [os.readlink(entry) for entry in folder.iterdir()]
            except (FileNotFoundError, ProcessLookupError):  # a descriptor closed, or the process ended
                targets = []
            if any(target.startswith(self.watched) for target in targets):
                self.working_since = time.monotonic()
        return None if self.working_since is None else time.monotonic() - self.working_since

    def _ended(self) -> None:
        if self.reader is not None:
            self.reader.join(timeout=10)
        else:
            self.lines = self.process.log.read_text(errors="replace").splitlines(keepends=True)

    def wait(self, timeout: float = 600) -> int:
        """Wait for the end (noting when the build began working); the exit status."""
        deadline = time.monotonic() + timeout
        while self.process.poll() is None and time.monotonic() < deadline:
            self.working_for()
            time.sleep(0.01)
        status = self.process.wait(timeout=max(1.0, deadline - time.monotonic()))
        self._ended()
        return status

    def kill(self) -> bool:
        """SIGKILL the build; whether it was still running."""
        running = self.process.poll() is None
        if running:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self._ended()
        return running and self.process.returncode == -signal.SIGKILL

    @property
    def output(self) -> str:
        return "".join(self.lines[-60:])


def _kill_at_random_moments(builds: list[Build], rng: random.Random, seconds: float) -> tuple[int, float]:
    """Kill each build at a random moment of its first ``seconds`` of work.

    Returns the kills, and ``seconds`` shortened to the work time of a build that finished first
    (so later kills land inside builds of that length).
    """
    moments = {id(build): rng.uniform(0.0, seconds) for build in builds}
    kills, pending = 0, list(builds)
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for build in list(pending):
            working = build.working_for()
            if build.process.poll() is not None or (working is not None and working >= moments[id(build)]):
                killed = build.kill()
                kills += killed
                if not killed and build.process.returncode == 0 and build.working_since is not None:
                    seconds = min(seconds, max(0.5, time.monotonic() - build.working_since))
                pending.remove(build)
        time.sleep(0.005)
    return kills + sum(build.kill() for build in pending), seconds


def _world_files(world: Path) -> dict[str, bytes]:
    return {
        path.relative_to(world).as_posix(): path.read_bytes()
        for path in sorted(world.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def _snapshot(root: Path) -> dict[str, object]:
    """Every file under ``root``: its bytes; the manifest stamp by what it certifies (not build times).

    SQLite caches (the raw-file hash cache) are named, not compared: their pages record when and in
    which order entries came, and SQLite repairs them itself after a kill.
    """
    snapshot: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.name.endswith((".sqlite-journal", ".sqlite-wal", ".sqlite-shm")):
            continue
        relative = path.relative_to(root).as_posix()
        if path.suffix == ".sqlite":
            snapshot[relative] = "a SQLite cache"
        elif path.name == MANIFEST_FILE:
            stamp = json.loads(path.read_text())
            snapshot[relative] = {"config": stamp["config"], "files": stamp["files"]}
        else:
            snapshot[relative] = path.read_bytes()
    return snapshot


def _assert_parquet_files_read(root: Path) -> int:
    files = sorted(root.rglob("*.parquet"))
    for path in files:
        assert pq.read_table(path).num_rows == pl.read_parquet(path).height, path
    return len(files)


def _built_world_config(root: Path, world: dict[str, int] = TINY_WORLD) -> SampleWorldConfig:
    """The world ``spatial-build --scenes S --views V`` builds (the asset's defaults otherwise)."""
    return SampleWorldConfig(
        root=root / "sample_world",
        seed=0,
        num_scenes=world["scenes"],
        views_per_scene=world["views"],
        width=320,
        height=240,
        camera_path=DEFAULT_WORLD_CAMERA_PATH,
        arkitscenes_videos=DEFAULT_WORLD_ARKITSCENES_VIDEOS,
        scannetpp_scenes=DEFAULT_WORLD_SCANNETPP_SCENES,
        show_progress=False,
    )


@pytest.mark.slow
def test_concurrent_sample_world_builds_on_an_empty_root(tmp_path, fork_server):
    """Two build processes on one storage root; each has its own Dagster instance (what is shared is the
    root)."""
    root = tmp_path / "data"
    builds = [
        Build(root, _dagster_home(tmp_path, f"dagster_home_{index}"), "sample_world", fork_server)
        for index in range(2)
    ]
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
    beside = sorted(path.name for path in root.iterdir() if path.name.startswith(".sample_world"))
    assert beside == [".sample_world.lock"]  # no staging of either build left over
    assert [path.name for path in root.rglob("*.tmp")] == []


_WRITER = """
import sys, time
from pathlib import Path
import polars as pl
from data_contracts.storage import table_path, write_table
root, writer, rounds = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
while not (root / "go").exists():
    time.sleep(0.01)
for step in range(rounds):
    tag = f"{writer}-{step}"
    frame = pl.DataFrame({"tag": [tag] * 5000, "value": list(range(5000))})
    write_table(frame, table_path(root, "shared", "partition=0"))
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
    assert [p.name for p in tmp_path.rglob("*.tmp")] == []
    assert reads > 0


def _pair_assets(fail: bool, tag: str):
    @dg.multi_asset(outs={"pair": dg.AssetOut(), "pair_quarantine": dg.AssetOut()})
    def pair(context):
        yield dg.Output(pl.DataFrame({"tag": [tag]}), "pair")
        if fail:
            raise RuntimeError("the step fails after its first output")
        yield dg.Output(pl.DataFrame({"tag": [tag]}), "pair_quarantine")

    return pair


def test_a_step_writes_each_output_whole_and_its_next_run_writes_them_all(tmp_path):
    resources = {"io_manager": ParquetIOManager(root=str(tmp_path))}
    assert dg.materialize([_pair_assets(False, "first")], resources=resources).success
    result = dg.materialize([_pair_assets(True, "second")], resources=resources, raise_on_error=False)
    assert not result.success
    assert read_table(tmp_path, "pair")["tag"].to_list() == ["second"]  # written when it was handed over
    assert read_table(tmp_path, "pair_quarantine")["tag"].to_list() == [
        "first"
    ]  # the previous version, whole
    assert [path.name for path in tmp_path.rglob("*.tmp")] == []
    assert dg.materialize([_pair_assets(False, "third")], resources=resources).success
    assert read_table(tmp_path, "pair")["tag"].to_list() == ["third"]
    assert read_table(tmp_path, "pair_quarantine")["tag"].to_list() == ["third"]


@pytest.mark.slow
@pytest.mark.timeout(900)  # about 2 minutes on two idle cores; allow for a machine shared with other work
def test_builds_killed_at_random_points_lose_nothing(tmp_path, fork_server):
    """Builds run two at a time on one root and are killed at random points, until 10 kills.

    Every build here (the clean one, the killed ones, the rebuild) is forked from the file's server that has
    done part of the imports (see :class:`ForkServer`), and works on a smaller world, so a kill costs less.
    """
    seed = int(time.time())
    rng = random.Random(seed)
    home = _dagster_home(tmp_path)
    root = tmp_path / "data"
    clean = Build(root, home, KILLED_BUILD_SELECTION, fork_server, KILLED_BUILD_WORLD)
    assert clean.wait() == 0, clean.output
    seconds = clean.working_for()  # how long a whole build works
    expected = _snapshot(root)
    assert any(name.endswith("_quarantine.parquet") for name in expected) and seconds is not None
    os.rename(root, tmp_path / "clean")

    kills = builds = files_checked = 0
    for round_number in range(MIN_KILLS):
        if kills >= MIN_KILLS:
            break
        if round_number % 3 == 1:  # now and then the world is gone, so kills land in its generation too
            shutil.rmtree(root / "sample_world", ignore_errors=True)
        pair = [Build(root, home, KILLED_BUILD_SELECTION, fork_server, KILLED_BUILD_WORLD) for _ in range(2)]
        builds += len(pair)
        killed, seconds = _kill_at_random_moments(pair, rng, seconds)
        kills += killed
        if root.exists():
            files_checked += _assert_parquet_files_read(root)
    assert kills >= MIN_KILLS, f"only {kills} kills in {builds} builds (seed {seed})"

    rebuild = Build(root, home, KILLED_BUILD_SELECTION, fork_server, KILLED_BUILD_WORLD)
    assert rebuild.wait() == 0, rebuild.output
    _assert_parquet_files_read(root)
    actual = _snapshot(root)
    assert sorted(actual) == sorted(expected), f"seed {seed}"  # no leftovers, nothing missing
    different = [name for name in expected if actual[name] != expected[name]]
    assert different == [], f"seed {seed}: {different}"
    config = _built_world_config(root, KILLED_BUILD_WORLD)
    assert verify_world(config.root, stamp_config(config)) is not None
    sys.stderr.write(
        f"{kills} kills in {builds} builds (seed {seed}), {files_checked} Parquet files read after kills, "
        f"{len(actual)} files compared with the clean build\n"
    )
