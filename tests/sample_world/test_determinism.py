"""Two runs with the same config write byte-identical files; the output folder is replaced safely."""

from __future__ import annotations

import json

import pytest

from assets.sample_world import generate_sample_world
from assets.sample_world.completion import MANIFEST_FILE
from tests.sample_world.world_helpers import World, small_config


def _files(root) -> dict[str, bytes]:
    """Every file of the world (the completion stamp records the root and the build time: left out)."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.name != MANIFEST_FILE
    }


def test_two_runs_are_byte_identical(small_world: World, tmp_path):
    again = tmp_path / "elsewhere" / "world"
    generate_sample_world(small_config(again))
    first, second = _files(small_world.root), _files(again)
    assert sorted(first) == sorted(second)
    different = [name for name in first if first[name] != second[name]]
    assert different == []
    manifests = [json.loads((root / MANIFEST_FILE).read_text()) for root in (small_world.root, again)]
    assert manifests[0]["files"] == manifests[1]["files"]
    assert sorted(manifests[0]["files"]) == sorted(first)


def test_another_seed_gives_another_world(small_world: World, tmp_path):
    other = tmp_path / "other"
    generate_sample_world(small_config(other, seed=4))
    first = json.loads((small_world.root / "truth" / "world.json").read_text())
    second = json.loads((other / "truth" / "world.json").read_text())
    assert first["scenes"][0]["objects"] != second["scenes"][0]["objects"]


def test_rerun_replaces_a_previous_world(tmp_path):
    root = tmp_path / "world"
    generate_sample_world(small_config(root, num_scenes=2, views_per_scene=1))
    generate_sample_world(small_config(root, num_scenes=1, views_per_scene=1))
    assert sorted(path.name for path in (root / "scannet" / "scans").iterdir()) == ["scene0000_00"]


def test_refuses_to_replace_a_folder_that_is_not_a_world(tmp_path):
    root = tmp_path / "precious"
    root.mkdir()
    (root / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a sample world"):
        generate_sample_world(small_config(root, num_scenes=1, views_per_scene=1))
    assert (root / "notes.txt").read_text() == "keep me"
