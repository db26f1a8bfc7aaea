"""The `sample_world` asset's settings reach the generator, and each configuration is its own data version."""

from __future__ import annotations

import json

import pytest

from assets.sources.sample_world import SampleWorldAssetConfig, build_sample_world

SMALL = {"num_scenes": 1, "views_per_scene": 4, "width": 64, "height": 48}


def test_camera_path_and_scan_realism_reach_the_world(tmp_path):
    _, rebuilt, loop_version = build_sample_world(tmp_path / "loop", SampleWorldAssetConfig(**SMALL))
    assert rebuilt
    settings = SampleWorldAssetConfig(**SMALL, camera_path="handheld", scan_realism="exact")
    _, rebuilt, handheld_version = build_sample_world(tmp_path / "handheld", settings)
    config = json.loads((tmp_path / "handheld" / "truth" / "world.json").read_text())["config"]
    assert rebuilt and config["camera_path"] == "handheld" and config["scan_realism"] == "exact"
    assert handheld_version != loop_version
    _, rebuilt, again = build_sample_world(tmp_path / "handheld", settings)
    assert not rebuilt and again == handheld_version


def test_an_unknown_camera_path_is_refused(tmp_path):
    with pytest.raises(ValueError, match="camera_path='spiral' must be one of 'loop', 'handheld', 'partial'"):
        build_sample_world(tmp_path / "w", SampleWorldAssetConfig(**SMALL, camera_path="spiral"))
