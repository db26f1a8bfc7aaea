"""A world is trusted only when its stamp's manifest matches its files; builds lock, stage and swap."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assets.sample_world import completion, ensure_sample_world, generate_sample_world
from assets.sample_world.completion import MANIFEST_FILE, lock_path, verify_world
from assets.sample_world.generator import stamp_config
from tests.sample_world.world_helpers import World, small_config

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def _world_files(root: Path) -> dict[str, bytes]:
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


@pytest.fixture
def world(small_world: World, tmp_path) -> Path:
    """A private copy of the session's small world (with its stamp)."""
    root = tmp_path / "sample_world"
    shutil.copytree(small_world.root, root)
    return root


def test_stamp_lists_every_file_with_size_and_hash(small_world: World):
    stamp = json.loads((small_world.root / MANIFEST_FILE).read_text())
    files = _world_files(small_world.root)
    assert sorted(stamp["files"]) == sorted(files)
    assert all(stamp["files"][name]["size"] == len(data) for name, data in files.items())
    assert all(len(entry["sha256"]) == 64 for entry in stamp["files"].values())
    assert stamp["config"] == stamp_config(small_world.config)
    assert stamp["summary"]["num_views"] == small_world.summary.num_views
    assert verify_world(small_world.root, stamp_config(small_world.config)) is not None


def test_a_complete_world_is_reused(small_world: World, world: Path):
    config = small_config(world)
    before = (world / "truth" / "world.json").stat().st_ino
    summary, rebuilt = ensure_sample_world(config)
    assert not rebuilt
    assert summary.num_omnispatial_questions == small_world.summary.num_omnispatial_questions
    assert (world / "truth" / "world.json").stat().st_ino == before


@pytest.mark.parametrize(
    "damage",
    ["delete", "truncate", "same_size_edit", "unlisted_file", "garbled_stamp", "other_config", "no_stamp"],
)
def test_a_world_that_does_not_match_its_manifest_is_rebuilt(small_world: World, world: Path, damage: str):
    config = small_config(world)
    data = world / "omnispatial" / "data.json"
    stamp = world / MANIFEST_FILE
    if damage == "delete":
        data.unlink()
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:10])
    elif damage == "same_size_edit":
        content = bytearray(data.read_bytes())
        content[5] = ord("X") if content[5] != ord("X") else ord("Y")
        data.write_bytes(bytes(content))
    elif damage == "unlisted_file":
        (world / "spatialab" / "images" / "stray.png").write_bytes(b"not from this build")
    elif damage == "garbled_stamp":
        stamp.write_text(stamp.read_text()[:100])
    elif damage == "other_config":
        record = json.loads(stamp.read_text())
        record["config"]["seed"] += 1
        stamp.write_text(json.dumps(record))
    else:
        stamp.unlink()
    assert verify_world(world, stamp_config(config)) is None
    _, rebuilt = ensure_sample_world(config)
    assert rebuilt
    assert verify_world(world, stamp_config(config)) is not None
    assert _world_files(world) == _world_files(small_world.root)


def test_files_other_tools_add_beside_the_world_are_allowed(world: Path):
    (world / "sample_world_config.json").write_text("{}")  # the source asset's own stamp
    assert verify_world(world, stamp_config(small_config(world))) is not None


def test_force_rebuilds_a_complete_world(world: Path):
    _, rebuilt = ensure_sample_world(small_config(world), force=True)
    assert rebuilt


def test_leftovers_of_killed_builds_are_removed(world: Path):
    for name in (".sample_world.partial", ".sample_world.partial-0123456789ab", ".sample_world.old-0123"):
        (world.parent / name / "scannet").mkdir(parents=True)
    generate_sample_world(small_config(world))
    assert sorted(path.name for path in world.parent.iterdir()) == [".sample_world.lock", "sample_world"]


def test_swap_without_renameat2(small_world: World, world: Path, monkeypatch):
    monkeypatch.setattr(completion, "_exchange", lambda first, second: False)
    generate_sample_world(small_config(world))
    assert _world_files(world) == _world_files(small_world.root)
    assert sorted(path.name for path in world.parent.iterdir()) == [".sample_world.lock", "sample_world"]


def test_a_build_waits_for_the_lock(world: Path):
    """While another process holds the world's lock, a build does not start."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; handle = open(sys.argv[1], 'a'); fcntl.flock(handle, fcntl.LOCK_EX); "
            "print('locked', flush=True); time.sleep(3)",
            str(lock_path(world)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        _, rebuilt = ensure_sample_world(small_config(world))
        assert not rebuilt
        assert time.monotonic() - started > 1.0
    finally:
        holder.kill()
        holder.wait()


_GENERATE = """
import sys
from pathlib import Path
from assets.sample_world import generate_sample_world
from tests.sample_world.world_helpers import small_config
summary = generate_sample_world(small_config(Path(sys.argv[1]), **eval(sys.argv[2])))
print(summary.num_omnispatial_questions)
"""


def _generate_process(root: Path, **overrides) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _GENERATE, str(root), repr(overrides)],
        cwd=REPOSITORY_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_concurrent_builds_of_one_folder(small_world: World, tmp_path):
    root = tmp_path / "sample_world"
    processes = [_generate_process(root) for _ in range(3)]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0], [err for _, err in outputs]
    assert {out.strip() for out, _ in outputs} == {str(small_world.summary.num_omnispatial_questions)}
    assert verify_world(root, stamp_config(small_config(root))) is not None
    assert _world_files(root) == _world_files(small_world.root)
    assert sorted(path.name for path in tmp_path.iterdir()) == [".sample_world.lock", "sample_world"]


@pytest.mark.slow
def test_a_killed_build_leaves_the_previous_world_whole(small_world: World, world: Path):
    """Kill builds of another configuration at several points: the folder is always one whole world."""
    for delay in (0.5, 1.5, 3.0):
        process = _generate_process(world, seed=5, num_scenes=3)
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        seed = 3 if verify_world(world, stamp_config(small_config(world))) is not None else 5
        if seed == 5:  # the build finished before the kill
            assert verify_world(world, stamp_config(small_config(world, seed=5, num_scenes=3))) is not None
            generate_sample_world(small_config(world))
    _, rebuilt = ensure_sample_world(small_config(world))
    assert not rebuilt
    assert _world_files(world) == _world_files(small_world.root)
    generate_sample_world(small_config(world))  # the next build clears what the killed ones left
    assert sorted(path.name for path in world.parent.iterdir()) == [".sample_world.lock", "sample_world"]
