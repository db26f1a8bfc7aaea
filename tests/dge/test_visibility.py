"""Visibility of synthetic plates against synthetic depth buffers."""

import numpy as np
import pytest
from PIL import Image

from assets.dge.camera import intrinsics_matrix
from assets.dge.fusion import FrameRecord, read_instance_labels
from assets.dge.objects import ObjectGeometry
from assets.dge.raycast import SceneMesh, cast_frame, first_hits, ray_grid
from assets.dge.visibility import (
    PreparedObjects,
    VisibilitySettings,
    label_boxes,
    mask_boxes,
    object_in_frame,
)

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


@pytest.mark.parametrize("mode", ["L", "I;16", "RGB"])
def test_boxes_from_the_stored_instance_image(tmp_path, mode):
    """Boxes read straight from a stored instance image (objectId + 1, 0 for none) are each id's pixel extent,
    found here by scanning the id's pixels."""
    rng = np.random.default_rng(3)
    stored = np.zeros((HEIGHT, WIDTH), dtype=np.uint16)
    stored[5:9, 2:60] = 1  # object 0
    stored[20:47, 33:34] = 12  # object 11: a one-pixel-wide pole
    stored[rng.integers(0, HEIGHT, 15), rng.integers(0, WIDTH, 15)] = 4  # object 3: scattered pixels
    image = Image.fromarray(stored.astype(np.uint8)) if mode == "L" else Image.fromarray(stored)
    if mode == "RGB":
        image = Image.fromarray(np.repeat(stored.astype(np.uint8)[..., None], 3, axis=2))
    path = tmp_path / "instance.png"
    image.save(path)
    expected = {}
    for value in np.unique(stored[stored > 0]):
        rows, cols = np.nonzero(stored == value)
        expected[int(value) - 1] = [
            float(cols.min()),
            float(rows.min()),
            float(cols.max() + 1),
            float(rows.max() + 1),
        ]
    assert label_boxes(read_instance_labels(path)) == expected


def _box_mesh(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    """The 12 triangles of an axis-aligned box (a flat box when lo and hi share a coordinate)."""
    corners = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = [tri for a, b, c, d in faces for tri in ((a, b, c), (a, c, d))]
    return corners, np.array(triangles)


def _slab_entry(direction, lo, hi) -> float:
    """Distance along a ray from the origin at which it enters an axis-aligned box (inf: it misses)."""
    near, far = -np.inf, np.inf
    for axis in range(3):
        if direction[axis] == 0:
            if not lo[axis] <= 0 <= hi[axis]:
                return np.inf
            continue
        t1, t2 = sorted((lo[axis] / direction[axis], hi[axis] / direction[axis]))
        near, far = max(near, t1), min(far, t2)
    return near if near <= far and far > 0 else np.inf


def test_cast_frame_matches_a_ray_by_ray_slab_test():
    # Two annotated boxes, the second partly behind the first, and an unannotated plate in front of the
    # second; the truth intersects every ray with each box analytically (slab test), independent of open3d.
    boxes = [
        (0, (-0.31, -0.23, 2.0), (0.13, 0.17, 2.5)),
        (1, (-0.07, -0.41, 3.0), (0.61, 0.33, 3.4)),
        (-1, (0.21, -0.9, 1.5), (0.47, 0.9, 1.5)),
    ]
    vertices, triangles, owners = [], [], []
    for object_id, lo, hi in boxes:
        corners, tris = _box_mesh(lo, hi)
        triangles.append(tris + sum(len(v) for v in vertices))
        vertices.append(corners)
        owners.append(np.full(len(tris), object_id))
    mesh = SceneMesh(np.concatenate(vertices), np.concatenate(triangles), np.concatenate(owners))
    grid = ray_grid(K, WIDTH, HEIGHT, 800)
    found = cast_frame(mesh, grid, np.eye(4), None, K, 0.03, 0.01)

    entries = np.array([[_slab_entry(d, lo, hi) for _, lo, hi in boxes] for d in grid.directions])
    first = np.argmin(entries, axis=1)
    hit = np.isfinite(entries.min(axis=1))
    assert set(found) == {0, 1}
    for index, (object_id, _, _) in enumerate(boxes[:2]):
        crosses = np.isfinite(entries[:, index])
        visible = grid.inside & hit & (first == index)
        rays = found[object_id]
        assert rays.inside_area == grid.area[crosses & grid.inside].sum()
        assert rays.outside_area == grid.area[crosses & ~grid.inside].sum()
        assert rays.visible_area == grid.area[visible].sum()
        np.testing.assert_array_equal(rays.visible_pixels, grid.pixels[visible])
    assert 0 < found[1].visibility_ratio < 1 and found[0].visibility_ratio == 1.0


@pytest.mark.parametrize("listed", ["ray by ray", "shuffled"])
def test_first_hits_are_the_nearest_of_each_ray_and_the_earliest_of_ties(listed):
    rng = np.random.default_rng(7)
    ray_ids = np.sort(rng.integers(0, 50, 400))
    if listed == "shuffled":
        ray_ids = rng.permutation(ray_ids)
    t_hit = rng.integers(1, 6, 400).astype(np.float64)  # many ties
    found = first_hits(ray_ids, t_hit)
    expected = {}
    for index, (ray, t) in enumerate(zip(ray_ids, t_hit, strict=True)):
        if ray not in expected or t < t_hit[expected[ray]]:
            expected[ray] = index
    assert sorted(found.tolist()) == sorted(expected.values())
    assert first_hits(np.zeros(0, np.int64), np.zeros(0)).size == 0
