"""The DGE contracts accept valid rows and reject each kind of broken one."""

import json

import polars as pl
import pytest

from assets.dge.geometry import ScanGeometry
from data_contracts.dge_tasks import DgeTasks
from data_contracts.frame_visibility import FrameVisibility
from data_contracts.scene_geometry import SceneGeometry
from data_contracts.validation import check_frame, polars_schema

IMAGE = {"bytes": b"\x89PNG\r\n\x1a\n", "path": "s/0.png"}


def _task(**changes):
    row = {
        "task_id": "s/depth_order/abc",
        "scene_id": "s",
        "task_type": "depth_order",
        "images": [IMAGE],
        "frame_indices": [0],
        "question": "Which is closer?",
        "options": ["chair", "table"],
        "answer_index": 1,
        "answer": "B",
        "numeric_answer": None,
        "unit": None,
        "facts": json.dumps({"spec": {}}),
        "geometry_source": "scanned",
        "split": "train",
        "origin": "real",
        "dataset": "scannet",
    }
    row.update(changes)
    return pl.DataFrame([row], schema=polars_schema(DgeTasks))


NUMERIC = {
    "task_type": "object_size",
    "options": [],
    "answer_index": None,
    "answer": "86",
    "numeric_answer": 86.0,
    "unit": "cm",
}


@pytest.mark.parametrize(
    "changes, valid",
    [
        ({}, True),  # a multiple-choice row
        (NUMERIC, True),  # a numeric row with a unit
        (
            {**NUMERIC, "task_type": "object_count", "unit": None, "answer": "2", "numeric_answer": 2.0},
            True,
        ),  # a count
        ({"answer": "A"}, False),  # letter disagrees with the index
        ({"answer_index": 2, "answer": "C"}, False),  # index past the options
        ({"numeric_answer": 1.0}, False),  # choice and number at once
        ({**NUMERIC, "numeric_answer": None}, False),  # numeric row without its number
        ({**NUMERIC, "unit": "inch"}, False),  # unknown unit
        ({"task_type": "object_colour"}, False),  # unknown task type
        ({"frame_indices": [0, 1]}, False),  # two frames, one image
        ({"geometry_source": "guessed"}, False),  # geometry is scanned or estimated
        ({"dataset": "arkitscenes"}, True),  # a question about an ARKitScenes scan
        ({"dataset": "visual_genome", "geometry_source": "estimated"}, True),  # one image's estimated depth
        ({"dataset": "matterport"}, False),  # a data set no reader reads
    ],
)
def test_dge_tasks(changes, valid):
    assert check_frame(_task(**changes), DgeTasks).passed is valid


def _visibility(**changes):
    row = {
        "scene_id": "s",
        "frame_index": 0,
        "object_id": 1,
        "label": "chair",
        "image_width": 320,
        "image_height": 240,
        "visibility_ratio": 0.8,
        "in_frame_ratio": 1.0,
        "visible_area_px": 900.0,
        "truncated": False,
        "occluded": True,
        "bbox": [100, 200, 300, 400],
        "bbox_px": [32.0, 48.0, 96.0, 96.0],
        "bbox_source": "instance_mask",
        "centroid_depth_m": 2.0,
        "centroid_distance_m": 2.1,
        "centroid_px": [60.0, 70.0],
        "camera_position": [0.0, 0.0, 1.5],
        "camera_pose": [float(v) for v in range(16)],
    }
    row.update(changes)
    return pl.DataFrame([row], schema=polars_schema(FrameVisibility))


@pytest.mark.parametrize(
    "changes, valid",
    [
        ({}, True),  # a visible object
        (
            {"bbox": None, "bbox_px": None, "bbox_source": None, "visibility_ratio": 0.0},
            True,
        ),  # hidden entirely
        ({"bbox_source": None}, False),  # a box without its source
        ({"bbox": [300, 200, 100, 400]}, False),  # x2 < x1
        ({"visibility_ratio": 1.2}, False),  # ratio above 1
        ({"bbox_source": "guess"}, False),  # unknown box source
    ],
)
def test_frame_visibility(changes, valid):
    assert check_frame(_visibility(**changes), FrameVisibility).passed is valid


def test_scene_geometry_rules(scan_geometries):
    frame = next(iter(scan_geometries.values())).to_frame()
    assert check_frame(frame, SceneGeometry).passed
    broken_cloud = frame.with_columns(pl.col("num_cloud_points") + 1)
    assert not check_frame(broken_cloud, SceneGeometry).passed
    unknown_source = frame.with_columns(pl.lit("lidar").alias("object_points_source"))
    assert not check_frame(unknown_source, SceneGeometry).passed
    wrong_count = frame.with_columns(pl.col("num_objects") - 1)
    assert not check_frame(wrong_count, SceneGeometry).passed


MEASUREMENT_CONFIDENCE = {
    "observed_views": pl.Int64,
    "extent_coverage": pl.Float64,
    "depth_noise_m": pl.Float64,
    "position_uncertainty_m": pl.Float64,
    "size_uncertainty_m": pl.Float64,
}


def _geometry_frame_with(row: dict, **changes) -> pl.DataFrame:
    objects = [dict(item) for item in row["objects"]]
    objects[0].update(changes)
    return pl.DataFrame([{**row, "objects": objects}], schema=polars_schema(SceneGeometry))


def test_scene_geometry_carries_measurement_confidence(scan_geometries):
    geometry = next(iter(scan_geometries.values()))
    frame = geometry.to_frame()
    fields = {field.name: field.dtype for field in frame.schema["objects"].inner.fields}
    for name, dtype in MEASUREMENT_CONFIDENCE.items():
        assert fields[name] == dtype, name
    row = geometry.to_row()
    assert all(item["observed_views"] >= 1 for item in row["objects"])
    assert check_frame(_geometry_frame_with(row), SceneGeometry).passed
    assert not check_frame(_geometry_frame_with(row, extent_coverage=1.5), SceneGeometry).passed
    assert not check_frame(_geometry_frame_with(row, size_uncertainty_m=-0.1), SceneGeometry).passed
    assert not check_frame(_geometry_frame_with(row, observed_views=-1), SceneGeometry).passed
    restored = ScanGeometry.from_row(row)
    for before, after in zip(geometry.objects, restored.objects, strict=True):
        assert after.observed_views == before.observed_views
        assert after.size_uncertainty_m == pytest.approx(before.size_uncertainty_m)
