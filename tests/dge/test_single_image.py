"""Single-image mode: estimated geometry from a depth file or a (tiny, local) depth model."""

import json

import numpy as np
import polars as pl
import pytest
from PIL import Image

from assets.dge.single_image import (
    ORDINAL_TASK_TYPES,
    SingleImageSettings,
    estimate_objects,
    pinhole_intrinsics,
    relative_inverse_to_depth,
    single_image_tasks,
)
from data_contracts.boxes import pixels_to_grid
from data_contracts.dge_tasks import DgeTasks
from data_contracts.images import encode_image
from data_contracts.quarantine import QuarantineLog
from data_contracts.scene_graphs import SceneGraphs
from data_contracts.validation import check_frame, polars_schema

WIDTH, HEIGHT = 96, 64
BOXES = {"cup": [10, 20, 30, 44], "vase": [60, 16, 80, 48], "book": [38, 40, 56, 60]}
DEPTHS = {"cup": 1.5, "vase": 3.0, "book": 2.2}


def _scene_graphs() -> pl.DataFrame:
    objects = []
    for index, (name, box) in enumerate(BOXES.items()):
        objects.append(
            {
                "object_id": str(index),
                "name": name,
                "names": [name],
                "attributes": [],
                "bbox": pixels_to_grid(box, WIDTH, HEIGHT),
                "bbox_px": [float(v) for v in box],
            }
        )
    row = {
        "image_id": "17",
        "image": encode_image(Image.new("RGB", (WIDTH, HEIGHT), "white"), path="17.png"),
        "image_width": WIDTH,
        "image_height": HEIGHT,
        "objects": objects,
        "relationships": [],
        "source": "test",
        "origin": "real",
    }
    return pl.DataFrame([row], schema=polars_schema(SceneGraphs))


def _depth_file(folder, image_id="17"):
    depth = np.full((HEIGHT, WIDTH), 5.0)
    for name, (x1, y1, x2, y2) in BOXES.items():
        depth[y1:y2, x1:x2] = DEPTHS[name]
    Image.fromarray(np.round(depth * 1000).astype(np.uint16)).save(folder / f"{image_id}.png")
    return depth


def test_depth_file_gives_metric_estimated_tasks(tmp_path):
    _depth_file(tmp_path)
    frame = single_image_tasks(
        _scene_graphs(), SingleImageSettings(depth_dir=str(tmp_path), max_tasks_per_type=10)
    )
    assert frame.height > 0
    assert check_frame(frame, DgeTasks).passed
    assert set(frame["geometry_source"]) == {"estimated"}
    assert set(frame["origin"]) == {"real"}  # the image's scene_graphs.origin
    for row in frame.filter(pl.col("task_type") == "depth_order").iter_rows(named=True):
        names = row["options"]
        nearest = min(names, key=DEPTHS.get)
        assert names[row["answer_index"]] == nearest
        facts = json.loads(row["facts"])
        assert facts["provenance"]["depth_kind"] == "file"
        assert facts["provenance"]["validity"]["cup"] == pytest.approx(1.0)
    distances = frame.filter(pl.col("task_type") == "camera_object_distance")
    assert distances.height > 0 and set(distances["unit"]) == {"m"}


def test_images_without_depth_get_no_rows(tmp_path):
    frame = single_image_tasks(_scene_graphs(), SingleImageSettings(depth_dir=str(tmp_path)))
    assert frame.height == 0


def test_unreadable_depth_is_quarantined(tmp_path):
    (tmp_path / "17.png").write_bytes(b"broken")
    log = QuarantineLog("dge_image_tasks")
    frame = single_image_tasks(_scene_graphs(), SingleImageSettings(depth_dir=str(tmp_path)), log)
    assert frame.height == 0
    assert log.rows[0]["record_id"] == "17" and "no usable depth" in log.rows[0]["reason"]


def test_validity_falls_with_missing_and_spread_depth():
    depth = np.full((40, 40), 2.0)
    depth[:, 20:] = 0.0  # the right half has no reading
    noisy = np.random.default_rng(0).uniform(1.0, 3.0, (40, 40))
    intrinsics = pinhole_intrinsics(40, 40, 60.0)
    box = [[0, 0, 40, 40]]
    clean = estimate_objects(depth, intrinsics, [(0, "a", box[0])], prior=1.0, core_fraction=1.0)[0]
    spread = estimate_objects(noisy, intrinsics, [(0, "a", box[0])], prior=1.0, core_fraction=1.0)[0]
    assert clean.validity == pytest.approx(0.5)
    assert spread.validity < 0.8


def test_relative_inverse_depth_keeps_the_order():
    inverse = np.array([[4.0, 2.0, 1.0]])
    depth = relative_inverse_to_depth(inverse)
    assert list(np.argsort(depth[0])) == [0, 1, 2]


@pytest.mark.slow
def test_tiny_local_depth_model_gives_ordinal_tasks_only(tmp_path):
    import torch
    from transformers import DPTConfig, DPTForDepthEstimation
    from transformers.models.dpt.image_processing_pil_dpt import DPTImageProcessorPil

    config = DPTConfig(
        hidden_size=32,
        num_hidden_layers=4,
        num_attention_heads=2,
        intermediate_size=37,
        image_size=64,
        patch_size=16,
        backbone_out_indices=[0, 1, 2, 3],
        neck_hidden_sizes=[8, 16, 32, 32],
        fusion_hidden_size=16,
        head_in_index=-1,
        is_hybrid=False,
    )
    torch.manual_seed(
        0
    )  # random weights: a fixed draw, so the depth map (and the tasks it allows) is reproducible
    DPTForDepthEstimation(config).save_pretrained(tmp_path)
    DPTImageProcessorPil(size={"height": 64, "width": 64}, keep_aspect_ratio=False).save_pretrained(tmp_path)
    settings = SingleImageSettings(
        depth_model_path=str(tmp_path), depth_model_output="relative", min_validity=0.0
    )
    frame = single_image_tasks(_scene_graphs(), settings)
    assert frame.height > 0
    assert check_frame(frame, DgeTasks).passed
    assert set(frame["task_type"]) <= set(ORDINAL_TASK_TYPES)
    assert set(frame["geometry_source"]) <= {"estimated"}
    for row in frame.iter_rows(named=True):
        assert json.loads(row["facts"])["provenance"]["depth_kind"] == "model_relative"
