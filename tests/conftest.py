"""Shared test set-up: offline hubs, a small sample world, a tiny Grounding DINO, a temporary storage root.

The suite runs on pytest-xdist workers (``-n auto --dist loadfile`` in ``pyproject.toml``: one worker per
core plus one; ``-n 0`` runs it in one process). Each test file runs on one worker, in its order, with its
module fixtures built once; the files that take a session fixture that tests modify or that costs much to
start (``dev_build``, the local Ray cluster) run on one worker together. Each worker has its own session,
so a session fixture runs once per worker: the expensive read-only ones (the sample worlds, the tiny
Grounding DINO) are built once per run through :func:`build_once_per_run` and shared by every worker.
"""

import json
import os
import re
import resource

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One OpenMP thread per process (torch, and the processes the tests start inherit it): the parallelism is
# the xdist workers'. Two workers whose torch each spins two OpenMP threads on two cores made a tiny GRPO
# step 10x slower (8.8 s instead of 0.75 s).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import shutil  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from filelock import FileLock  # noqa: E402

SMALL_WORLD = {
    "seed": 7,
    "num_scenes": 2,
    "views_per_scene": 3,
    "width": 160,
    "height": 120,
    "camera_path": "loop",
}
LAYOUT_WORLD = {
    "seed": 3,
    "num_scenes": 0,
    "views_per_scene": 4,
    "width": 160,
    "height": 120,
    "arkitscenes_videos": 4,
    "scannetpp_scenes": 2,
    "scan_realism": "exact",
    "camera_path": "loop",
}
"""The rooms written as ARKitScenes videos (sky directions Left, Up, Right, Down) and ScanNet++ scenes, exact."""


def build_once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]
) -> Path:
    """A folder ``name`` that ``build(folder)`` fills once per test run; every xdist worker gets the same one.

    The pytest-xdist pattern: the first worker to take the file lock builds in the run's shared temporary
    folder (the parent of every worker's base temporary folder) and leaves a done-marker; the others wait
    on the lock and find the marker. A worker that died mid-build left no marker, so the next one starts
    over. Without xdist workers (``-n 0``) the folder is this session's own. Read it; never modify it.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name, numbered=True)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            if folder.exists():
                shutil.rmtree(folder)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def small_world(tmp_path_factory) -> Path:
    """A small sample world (2 scenes, 3 views, 160x120), built once per test run. Do not modify it."""
    from assets.sample_world import SampleWorldConfig, generate_sample_world

    def build(folder: Path) -> None:
        config = SampleWorldConfig(root=folder / "sample_world", show_progress=False, **SMALL_WORLD)
        generate_sample_world(config)

    return build_once_per_run(tmp_path_factory, "world", build) / "sample_world"


@pytest.fixture(scope="session")
def tiny_grounding_dino(tmp_path_factory) -> Path:
    """A Grounding DINO with random weights, tokenizer and image processor saved to a folder, built once per
    test run (the grounding and the Ray tests use it). Do not modify it."""
    from assets.grounding.detector import build_tiny_grounding_dino

    def build(folder: Path) -> None:
        build_tiny_grounding_dino(folder / "tiny-grounding-dino", seed=0)

    return build_once_per_run(tmp_path_factory, "models", build) / "tiny-grounding-dino"


@pytest.fixture(scope="session")
def layout_world(tmp_path_factory) -> Path:
    """A world of scans in ARKitScenes' and ScanNet++'s layouts (:data:`LAYOUT_WORLD`), built once per test run. Do
    not modify it."""
    from assets.sample_world import SampleWorldConfig, generate_sample_world

    def build(folder: Path) -> None:
        generate_sample_world(
            SampleWorldConfig(root=folder / "sample_world", show_progress=False, **LAYOUT_WORLD)
        )

    return build_once_per_run(tmp_path_factory, "layout_world", build) / "sample_world"


@pytest.fixture
def world_copy(small_world, tmp_path) -> Path:
    """A private copy of the small world that a test may break."""
    target = tmp_path / "sample_world"
    shutil.copytree(small_world, target)
    return target


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core, plus one.

    About a third of the suite's time is spent waiting on the processes and servers that tests start
    (spatial-build, dagster dev, PostgreSQL, Ray, benchmark scripts): with one worker per core, two cores
    were 69% busy; with a third worker 83%, and the suite took 442 s instead of 518 s.
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


SHARED_SESSION_FIXTURES = ("dev_build", "ray_local_cluster")
"""Session fixtures that tests change or that cost much to start twice (the ``spatial-build`` that the
pipeline tests build on and modify, the local Ray cluster): the test files that take one run on one worker."""


def _files_sharing_a_fixture(root: Path) -> dict[str, str]:
    """Test file (path from the root) -> the fixture of :data:`SHARED_SESSION_FIXTURES` a function of it takes.

    Read from the source (the xdist controller collects nothing): a function whose parameters name the
    fixture. A file this misses only builds its own copy of the fixture on its worker.
    """
    files = {}
    for path in sorted((root / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        for name in SHARED_SESSION_FIXTURES:
            if re.search(rf"def \w+\([^)]*\b{name}\b", text):
                files[path.relative_to(root).as_posix()] = name
                break
    return files


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadfile``, where the test files that share a fixture of :data:`SHARED_SESSION_FIXTURES` are
    one unit: one worker runs them one after another, and builds the fixture once."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    units = _files_sharing_a_fixture(config.rootpath)

    class SharedFixtureFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            return units.get(file, file)

    return SharedFixtureFileScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On xdist workers, the test files with the most ``slow`` tests come first; each file keeps its order.

    ``--dist loadfile`` hands whole files to the workers in collection order (``--no-loadscope-reorder``),
    so the long files start first and no long file is left running alone at the end.
    """
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return
    slow_tests: dict[str, int] = {}
    for item in items:
        file = item.nodeid.split("::")[0]
        slow_tests[file] = slow_tests.get(file, 0) + (item.get_closest_marker("slow") is not None)
    items.sort(key=lambda item: -slow_tests[item.nodeid.split("::")[0]])


CPU_REPORT_FOLDER_VARIABLE = "SPATIAL_TEST_CPU_REPORT"
"""Set to a folder, each pytest process writes there the CPU seconds each test file cost it
(``benchmarks/suite_cost.py`` sets it and sums the files)."""

_cpu_seconds_by_file: dict[str, float] = {}


def _cpu_seconds() -> float:
    """User + system CPU of this process and of the children it has waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With :data:`CPU_REPORT_FOLDER_VARIABLE` set, add the CPU of the test (set-up and tear-down included:
    a module fixture counts in its file) to its file's total."""
    if not os.environ.get(CPU_REPORT_FOLDER_VARIABLE):
        yield
        return
    before = _cpu_seconds()
    yield
    file = item.nodeid.split("::")[0]
    _cpu_seconds_by_file[file] = _cpu_seconds_by_file.get(file, 0.0) + _cpu_seconds() - before


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Write this process's CPU per test file to the report folder (one JSON file per xdist worker)."""
    folder = os.environ.get(CPU_REPORT_FOLDER_VARIABLE)
    if folder and _cpu_seconds_by_file:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(folder) / f"{worker}.json").write_text(json.dumps(_cpu_seconds_by_file), encoding="utf-8")


# Loopback OpenAI / Anthropic servers (real HTTP on 127.0.0.1) shared by every test folder.
from tests.fakes.llm_servers import anthropic_server, llm_server_factory, openai_server  # noqa: E402, F401
