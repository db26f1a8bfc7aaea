"""Real depth: scikit-image's Middlebury "Motorcycle" pair with ground-truth disparity.

Calibration (valid for the bundled, 4x down-sampled images): f 994.978 px, principal point
(311.193, 254.877), baseline 193.001 mm, doffs 31.086 px; ``Z = f * B / (d + doffs)``; missing
disparity is ``+inf``; ``left[y, x] <-> right[y, x - d]``, so the right camera sits ``B`` along +x
with its principal point ``doffs`` further right.
"""

import numpy as np
import polars as pl
import pytest
from PIL import Image

from assets.dge.camera import backproject_depth, intrinsics_matrix, project_points, transform_points
from assets.dge.fusion import FrameRecord, FusionSettings, frame_points
from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.single_image import SingleImageSettings, single_image_tasks
from data_contracts.boxes import pixels_to_grid
from data_contracts.images import encode_image
from data_contracts.scene_graphs import SceneGraphs
from data_contracts.validation import polars_schema

skimage_data = pytest.importorskip("skimage.data")

FOCAL, CX, CY, BASELINE_M, DOFFS = 994.978, 311.193, 254.877, 0.193001, 31.086


@pytest.fixture(scope="module")
def motorcycle():
    left, right, disparity = skimage_data.stereo_motorcycle()
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(np.isfinite(disparity), FOCAL * BASELINE_M / (disparity + DOFFS), 0.0)
    return left, right, depth


def _scan_folder(tmp_path, left, depth):
    """The left view as a one-frame ScanNet-style scan (millimetre PNG depth, identity pose)."""
    height, width = depth.shape
    color_path, depth_path = tmp_path / "0.jpg", tmp_path / "0.png"
    Image.fromarray(left).save(color_path, quality=95)
    Image.fromarray(np.round(depth * 1000.0).astype(np.uint16)).save(depth_path)
    k = [FOCAL, 0.0, CX, 0.0, FOCAL, CY, 0.0, 0.0, 1.0]
    return {
        "scene_id": "motorcycle",
        "frame_index": 0,
        "color_path": str(color_path),
        "depth_path": str(depth_path),
        "instance_path": None,
        "depth_scale": 1000.0,
        "color_width": width,
        "color_height": height,
        "depth_width": width,
        "depth_height": height,
        "color_intrinsics": k,
        "depth_intrinsics": k,
        "pose": np.eye(4).reshape(-1).tolist(),
        "source": "middlebury",
    }


def test_depth_round_trips_through_the_millimetre_png(tmp_path, motorcycle):
    left, _, depth = motorcycle
    row = _scan_folder(tmp_path, left, depth)
    points = frame_points(FrameRecord.from_row(row), FusionSettings(pixel_stride=1)).points
    valid = depth[depth > 0]
    # Every valid pixel but the flying pixels on depth edges (fewer than 2 neighbours on their surface).
    assert 0.98 * valid.size <= len(points) <= valid.size
    assert np.median(points[:, 2]) == pytest.approx(np.median(valid), abs=0.01)  # millimetres became metres
    assert 1.0 < points[:, 2].min() and points[:, 2].max() < 6.0  # a desk-top scene a few metres deep


def test_back_projection_reproduces_the_right_view(motorcycle):
    left, right, depth = motorcycle
    k_left = intrinsics_matrix([FOCAL, 0, CX, 0, FOCAL, CY, 0, 0, 1])
    k_right = intrinsics_matrix([FOCAL, 0, CX + DOFFS, 0, FOCAL, CY, 0, 0, 1])
    points, rows, cols = backproject_depth(depth, k_left, stride=2)
    right_from_left = np.eye(4)
    right_from_left[0, 3] = -BASELINE_M  # the right camera is B along +x
    uv, _ = project_points(transform_points(right_from_left, points), k_right)
    # Where the ground truth is known the projection lands on the same scanline, d pixels to the left.
    np.testing.assert_allclose(uv[:, 1], rows, atol=1e-6)
    u = np.round(uv[:, 0]).astype(int)
    inside = (u >= 0) & (u < right.shape[1])
    warped = right[rows[inside], u[inside]].astype(float)
    original = left[rows[inside], cols[inside]].astype(float)
    unshifted = right[rows[inside], cols[inside]].astype(float)
    error = np.abs(warped - original).mean()
    assert error < 0.5 * np.abs(unshifted - original).mean()
    assert error < 20.0  # grey levels, over occlusions and non-Lambertian surfaces


def test_scan_geometry_on_real_depth(tmp_path, motorcycle):
    left, _, depth = motorcycle
    frames = pl.DataFrame([_scan_folder(tmp_path, left, depth)])
    scene = {
        "scene_id": "motorcycle",
        "scene_dir": str(tmp_path),
        "mesh_path": None,
        "segs_path": None,
        "aggregation_path": None,
        "objects": [],
        "num_frames": 1,
        "source": "middlebury",
    }
    geometry = build_scan_geometry(frames, scene, SceneGeometrySettings())
    assert geometry.used_frames == [0]
    assert geometry.object_points_source == "none"
    assert len(geometry.cloud_points) > 1000
    assert np.isfinite(geometry.world_to_gravity).all()
    assert geometry.room.area_m2 > 0


def test_single_image_mode_orders_real_depths(tmp_path, motorcycle):
    left, _, depth = motorcycle
    height, width = depth.shape
    Image.fromarray(np.round(depth * 1000.0).astype(np.uint16)).save(tmp_path / "moto.png")
    boxes = {"wheel": [90, 300, 230, 470], "box": [560, 20, 700, 140]}
    objects = [
        {
            "object_id": str(i),
            "name": name,
            "names": [name],
            "attributes": [],
            "bbox": pixels_to_grid(box, width, height),
            "bbox_px": [float(v) for v in box],
        }
        for i, (name, box) in enumerate(boxes.items())
    ]
    graphs = pl.DataFrame(
        [
            {
                "image_id": "moto",
                "image": encode_image(Image.fromarray(left), path="moto.png"),
                "image_width": width,
                "image_height": height,
                "objects": objects,
                "relationships": [],
                "source": "middlebury",
            }
        ],
        schema=polars_schema(SceneGraphs),
    )
    settings = SingleImageSettings(
        depth_dir=str(tmp_path),
        horizontal_fov_deg=2 * np.degrees(np.arctan(width / 2 / FOCAL)),
        max_tasks_per_type=5,
    )
    tasks = single_image_tasks(graphs, settings)
    medians = {
        name: np.median(depth[y1:y2, x1:x2][depth[y1:y2, x1:x2] > 0])
        for name, (x1, y1, x2, y2) in boxes.items()
    }
    order = tasks.filter(pl.col("task_type") == "depth_order")
    assert order.height == 1
    row = order.row(0, named=True)
    assert row["options"][row["answer_index"]] == min(medians, key=medians.get)
