"""Rows carry their origin, and the sample world never fills in for a kind of source that has real data."""

import json
import shutil

import polars as pl
import pytest

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import SOURCE_ASSETS
from data_contracts.storage import read_table
from pipelines.io_manager import ParquetIOManager
from readers.common import MissingInputError
from tests.sources.materialize import materialize_sources
from tests.sources.test_release_layouts import _omnispatial_release, _spatialab_release

SOURCE_TABLES = ("mcq_questions", "scene_graphs", "rgbd_frames", "rgbd_scenes")


def _build(root, world, assets=SOURCE_ASSETS, **fields) -> SourcesResource:
    sources = SourcesResource(sample_world_root=str(world), **fields)
    resources = {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "sources": sources,
    }
    assert all(run.success for run in materialize_sources(assets, resources))
    return sources


def test_default_build_is_all_sample_world(tmp_path, small_world):
    _build(tmp_path, small_world)
    for table in SOURCE_TABLES:
        frame = read_table(tmp_path, table)
        assert frame.height > 0 and set(frame["origin"]) == {"sample_world"}, table
    questions = read_table(tmp_path, "mcq_questions")
    assert set(questions["source"]) == {"omnispatial", "spatialab"}


def test_real_omnispatial_without_spatialab_leaves_out_the_synthetic_spatialab(tmp_path, small_world):
    synthetic = json.loads((small_world / "spatialab" / "spatialab.json").read_text())
    assert len(synthetic) > 0  # the sample world has SpatiaLab questions that could leak in
    records = _omnispatial_release(tmp_path / "OmniSpatial-test")
    sources = _build(
        tmp_path / "storage",
        small_world,
        [SOURCE_ASSETS[0]],
        omnispatial_root=str(tmp_path / "OmniSpatial-test"),
        omnispatial_split="test",
    )
    questions = read_table(tmp_path / "storage", "mcq_questions")
    assert questions.height == len(records)
    assert set(questions["source"]) == {"omnispatial"}
    assert set(questions["origin"]) == {"real"}
    assert questions.filter(pl.col("question_id").str.starts_with("spatialab/")).height == 0
    storage = StorageResource(root=str(tmp_path / "storage"))
    assert sources.raw_inputs(storage)["mcq_questions"] == [tmp_path / "OmniSpatial-test"]
    with pytest.raises(MissingInputError, match="coco_instances_path"):
        sources.coco_instances(storage)  # the sample world's boxes describe other images


def test_real_spatialab_alone_leaves_out_the_synthetic_omnispatial(tmp_path, small_world):
    records = _spatialab_release(tmp_path / "SpatiaLab")
    _build(tmp_path / "storage", small_world, [SOURCE_ASSETS[0]], spatialab_path=str(tmp_path / "SpatiaLab"))
    questions = read_table(tmp_path / "storage", "mcq_questions")
    assert questions.height == len(records)
    assert set(questions["source"]) == {"spatialab"} and set(questions["origin"]) == {"real"}


def test_real_scene_graphs_and_scans_are_marked_real(tmp_path, small_world):
    """A configured Visual Genome and ScanNet (here copies of the sample world's files in their real layouts)
    are real data; the questions, still the sample world's, stay marked as such."""
    shutil.copytree(small_world / "visual_genome", tmp_path / "vg")
    shutil.copytree(small_world / "scannet" / "scans", tmp_path / "scans")
    _build(
        tmp_path / "storage",
        small_world,
        visual_genome_root=str(tmp_path / "vg"),
        scannet_root=str(tmp_path / "scans"),
    )
    origins = {table: set(read_table(tmp_path / "storage", table)["origin"]) for table in SOURCE_TABLES}
    assert origins == {
        "mcq_questions": {"sample_world"},
        "scene_graphs": {"real"},
        "rgbd_frames": {"real"},
        "rgbd_scenes": {"real"},
    }
