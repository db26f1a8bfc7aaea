"""Fixtures of the DGE tests: a small sample world (2 scenes, 6 views at 320x240) and its tables.

These fixtures use the generator's exact scans (``scan_realism="exact"``): the tests built on them
compare with truth at exact-geometry tolerances. ``realistic_world`` is the default, realistic
mode (noisy depth, pose error, over-segmented mesh with annotated room surfaces).
"""

import json
from pathlib import Path

import polars as pl
import pytest

from assets.dge.geometry import ScanGeometry, SceneGeometrySettings, build_scan_geometry
from assets.dge.visibility import build_frame_visibility
from assets.sample_world.config import SampleWorldConfig
from assets.sample_world.generator import generate_sample_world
from readers.scannet import ScanNetTables
from tests.dge.scans import read_sample_scans


@pytest.fixture(scope="session")
def sample_world(tmp_path_factory) -> Path:
    """Root of a two-scene sample world."""
    root = tmp_path_factory.mktemp("dge") / "sample_world"
    generate_sample_world(
        SampleWorldConfig(
            root=root, seed=0, num_scenes=2, views_per_scene=6, scan_realism="exact", show_progress=False
        )
    )
    return root


@pytest.fixture(scope="session")
def long_scan_world(tmp_path_factory) -> Path:
    """A one-scene world with a 36-frame camera loop (every task type, camera motion included, has clear cases)."""
    root = tmp_path_factory.mktemp("dge_long") / "sample_world"
    generate_sample_world(
        SampleWorldConfig(
            root=root,
            seed=5,
            num_scenes=1,
            views_per_scene=36,
            width=256,
            height=192,
            scan_realism="exact",
            show_progress=False,
        )
    )
    return root


@pytest.fixture(scope="session")
def realistic_world(tmp_path_factory) -> Path:
    """Root of a two-scene realistic sample world (the default mode) with 12 views per scene."""
    root = tmp_path_factory.mktemp("dge_realistic") / "sample_world"
    generate_sample_world(
        SampleWorldConfig(root=root, seed=0, num_scenes=2, views_per_scene=12, show_progress=False)
    )
    return root


@pytest.fixture(scope="session")
def world_truth(sample_world) -> dict:
    """The generator's exact truth (``truth/world.json``)."""
    return json.loads((sample_world / "truth" / "world.json").read_text())


@pytest.fixture(scope="session")
def scannet_tables(sample_world) -> ScanNetTables:
    """``rgbd_frames`` / ``rgbd_scenes`` of the sample world, read by the project's source reader."""
    return read_sample_scans(sample_world / "scannet" / "scans")


@pytest.fixture(scope="session")
def scan_geometries(scannet_tables) -> dict[str, ScanGeometry]:
    """Every scene's geometry (default configuration: objects from the segmented mesh)."""
    return {
        scene["scene_id"]: build_scan_geometry(scannet_tables.frames, scene, SceneGeometrySettings())
        for scene in scannet_tables.scenes.iter_rows(named=True)
    }


@pytest.fixture(scope="session")
def visibility_tables(scan_geometries, scannet_tables) -> dict[str, pl.DataFrame]:
    """Every scene's ``frame_visibility`` rows."""
    return {
        scene_id: build_frame_visibility(geometry, scannet_tables.frames)
        for scene_id, geometry in scan_geometries.items()
    }
