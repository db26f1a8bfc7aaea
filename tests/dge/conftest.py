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
from assets.dge.tasks import GenerationReport, build_scene_tasks
from assets.dge.tasks.facts import ObjectFact
from assets.dge.visibility import build_frame_visibility
from assets.sample_world.config import SampleWorldConfig
from assets.sample_world.generator import generate_sample_world
from readers.scan_tables import ScanTables
from tests.conftest import build_once_per_run
from tests.dge.scans import read_sample_scans


def generated_world(tmp_path_factory: pytest.TempPathFactory, name: str, **config) -> Path:
    """Root of a sample world generated once per test run (shared by the xdist workers; do not modify it)."""

    def build(folder: Path) -> None:
        generate_sample_world(SampleWorldConfig(root=folder / "sample_world", show_progress=False, **config))

    return build_once_per_run(tmp_path_factory, name, build) / "sample_world"


def truth_by_scene(root: Path) -> dict[str, dict]:
    """The generator's truth of the world at ``root`` (``truth/world.json``), per scene id."""
    truth = json.loads((root / "truth" / "world.json").read_text())
    return {scene["scene_id"]: scene for scene in truth["scenes"]}


def scene_tasks(
    frames: pl.DataFrame, scene: dict, source: str, report: GenerationReport
) -> tuple[ScanGeometry, pl.DataFrame, pl.DataFrame]:
    """One scene's geometry (objects from ``source``), frame visibility and tasks, as the DGE assets build them."""
    geometry = build_scan_geometry(frames, scene, SceneGeometrySettings(object_points_source=source))
    visibility = build_frame_visibility(geometry, frames, scene=scene)
    return geometry, visibility, build_scene_tasks(geometry.to_row(), visibility, frames, report=report)


def object_fact(obj) -> ObjectFact:
    """A measured object as the questions read it (its box and measurement confidence)."""
    return ObjectFact(
        object_id=obj.object_id,
        label=obj.label,
        centroid=obj.centroid,
        extents=obj.obb_extents,
        observed_views=obj.observed_views,
        extent_coverage=obj.extent_coverage,
        depth_noise_m=obj.depth_noise_m,
        position_uncertainty_m=obj.position_uncertainty_m,
        size_uncertainty_m=obj.size_uncertainty_m,
    )


@pytest.fixture(scope="session")
def sample_world(tmp_path_factory) -> Path:
    """Root of a two-scene sample world."""
    return generated_world(
        tmp_path_factory,
        "dge",
        seed=0,
        num_scenes=2,
        views_per_scene=6,
        scan_realism="exact",
        camera_path="loop",
    )


@pytest.fixture(scope="session")
def long_scan_world(tmp_path_factory) -> Path:
    """A one-scene world with a 36-frame camera loop (every task type, camera motion included, has clear cases)."""
    return generated_world(
        tmp_path_factory,
        "dge_long",
        seed=5,
        num_scenes=1,
        views_per_scene=36,
        width=256,
        height=192,
        scan_realism="exact",
        camera_path="loop",
    )


@pytest.fixture(scope="session")
def realistic_world(tmp_path_factory) -> Path:
    """Root of a two-scene realistic sample world (the default mode) with 12 views per scene."""
    return generated_world(
        tmp_path_factory, "dge_realistic", seed=0, num_scenes=2, views_per_scene=12, camera_path="loop"
    )


@pytest.fixture(scope="session")
def world_truth(sample_world) -> dict:
    """The generator's exact truth (``truth/world.json``)."""
    return json.loads((sample_world / "truth" / "world.json").read_text())


@pytest.fixture(scope="session")
def scannet_tables(sample_world) -> ScanTables:
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
