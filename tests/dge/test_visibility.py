"""Visibility of synthetic plates against synthetic depth buffers."""

import numpy as np
import pytest

from assets.dge.camera import intrinsics_matrix
from assets.dge.fusion import FrameRecord
from assets.dge.objects import ObjectGeometry
from assets.dge.visibility import PreparedObjects, VisibilitySettings, mask_boxes, object_in_frame

K = intrinsics_matrix([50.0, 0, 31.5, 0, 50.0, 23.5, 0, 0, 1])
WIDTH, HEIGHT = 64, 48


def _record() -> FrameRecord:
    return FrameRecord(
        scene_id="s",
        frame_index=0,
        color_path="c.jpg",
        depth_path="d.png",
        instance_path=None,
        depth_scale=1000.0,
        color_size=(WIDTH, HEIGHT),
        depth_size=(WIDTH, HEIGHT),
        color_intrinsics=K,
        depth_intrinsics=K,
        pose=np.eye(4),
    )


def _plate(centre, size=0.4, step=0.005, normal=(0.0, 0.0, -1.0)) -> tuple[np.ndarray, np.ndarray]:
    """A square plate perpendicular to the optical axis; its normal faces the camera by default."""
    offsets = np.arange(-size / 2, size / 2 + 1e-9, step)
    xs, ys = np.meshgrid(offsets, offsets)
    points = np.stack([xs.ravel() + centre[0], ys.ravel() + centre[1], np.full(xs.size, centre[2])], axis=1)
    return points, np.tile(normal, (len(points), 1))


def _object(points, normals, object_id=1) -> ObjectGeometry:
    return ObjectGeometry(
        object_id=object_id,
        label="plate",
        point_count=len(points),
        centroid=points.mean(axis=0),
        aabb_min=points.min(axis=0),
        aabb_max=points.max(axis=0),
        obb_center=points.mean(axis=0),
        obb_extents=points.max(axis=0) - points.min(axis=0),
        obb_yaw=0.0,
        points=points,
        normals=normals,
        point_areas=np.full(len(points), 0.005**2),
    )


def _see(obj, depth, boxes=None, others=()):
    prepared = PreparedObjects([obj, *others])
    return object_in_frame(obj, prepared, np.eye(4), _record(), depth, boxes, VisibilitySettings())


def test_unoccluded_plate():
    obj = _object(*_plate([0.0, 0.0, 3.0]))
    seen = _see(obj, np.full((HEIGHT, WIDTH), 3.0))
    assert seen.visibility_ratio == pytest.approx(1.0)
    assert seen.in_frame_ratio == pytest.approx(1.0)
    assert not seen.truncated and not seen.occluded
    half = 50.0 * 0.2 / 3.0  # half the plate's width in pixels
    assert seen.bbox_px[0] == pytest.approx(np.floor(31.5 - half + 0.5), abs=1)
    assert seen.bbox_px[2] == pytest.approx(np.floor(31.5 + half + 0.5) + 1, abs=1)
    assert seen.bbox_source == "points"
    assert seen.centroid_depth_m == pytest.approx(3.0)


def test_half_hidden_by_a_nearer_surface():
    obj = _object(*_plate([0.0, 0.0, 3.0]))
    depth = np.full((HEIGHT, WIDTH), 3.0)
    depth[:, :32] = 1.0  # something 1 m away covers the left half of the image
    seen = _see(obj, depth)
    assert seen.visibility_ratio == pytest.approx(0.5, abs=0.05)
    assert seen.occluded
    assert seen.bbox_px[0] >= 31  # the visible half, give or take a point footprint


def test_a_thin_object_lying_in_front_occludes_within_the_depth_tolerance():
    table = _object(*_plate([0.0, 0.0, 3.0]))
    book = _object(
        *_plate([-0.1, 0.0, 2.98], size=0.2), object_id=2
    )  # 2 cm in front, over a quarter of the plate
    depth = np.full((HEIGHT, WIDTH), 3.0)
    columns = np.arange(WIDTH)
    rows = np.arange(HEIGHT)[:, None]
    x = (columns - K[0, 2]) * 2.98 / K[0, 0]
    y = (rows - K[1, 2]) * 2.98 / K[1, 1]
    depth[(x >= -0.2) & (x <= 0.0) & (np.abs(y) <= 0.1)] = 2.98
    seen = _see(table, depth, others=[book])
    assert seen.visibility_ratio == pytest.approx(
        0.75, abs=0.05
    )  # a quarter of the table lies under the book


def test_self_occlusion_does_not_count():
    front, front_normals = _plate([0.0, 0.0, 3.0])
    back, back_normals = _plate([0.0, 0.0, 3.04], size=0.2)  # a smaller part of the same object just behind
    obj = _object(np.vstack([front, back]), np.vstack([front_normals, back_normals]))
    seen = _see(obj, np.full((HEIGHT, WIDTH), 3.0))
    assert seen.visibility_ratio == pytest.approx(1.0)


def test_truncated_by_the_image_border():
    # Centred on the image's right edge: the right half projects outside.
    x = (WIDTH - 0.5 - K[0, 2]) * 3.0 / K[0, 0]
    obj = _object(*_plate([x, 0.0, 3.0]))
    seen = _see(obj, np.full((HEIGHT, WIDTH), 3.0))
    assert seen.in_frame_ratio == pytest.approx(0.5, abs=0.05)
    assert seen.truncated
    assert seen.visibility_ratio == pytest.approx(1.0)


@pytest.mark.parametrize(
    "centre, normal",
    [
        ([0.0, 0.0, -3.0], (0.0, 0.0, 1.0)),  # behind the camera
        ([0.0, 0.0, 3.0], (0.0, 0.0, 1.0)),  # facing away
        ([10.0, 0.0, 3.0], (0.0, 0.0, -1.0)),  # outside the field of view
    ],
)
def test_not_in_view(centre, normal):
    obj = _object(*_plate(centre, normal=normal))
    assert _see(obj, np.full((HEIGHT, WIDTH), 3.0)) is None


def test_missing_depth_says_nothing():
    obj = _object(*_plate([0.0, 0.0, 3.0]))
    depth = np.full((HEIGHT, WIDTH), 3.0)
    depth[:, :32] = 0.0  # no reading on the left half
    seen = _see(obj, depth)
    assert seen.visibility_ratio == pytest.approx(1.0)


def test_boxes_from_the_instance_mask():
    ids = np.full((HEIGHT, WIDTH), -1)
    ids[10:20, 30:41] = 1
    boxes = mask_boxes(ids)
    obj = _object(*_plate([0.0, 0.0, 3.0]))
    seen = _see(obj, np.full((HEIGHT, WIDTH), 3.0), boxes)
    assert seen.bbox_px == [30.0, 10.0, 41.0, 20.0]
    assert seen.bbox_source == "instance_mask"
    assert seen.bbox == [469, 208, 641, 417]
