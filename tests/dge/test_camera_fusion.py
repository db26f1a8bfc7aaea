"""Camera maths, depth reading, frame validation and fusion on small synthetic frames."""

import numpy as np
import pytest
from PIL import Image

from assets.dge.camera import (
    backproject_depth,
    depth_normals_at,
    depth_normals_camera,
    intrinsics_matrix,
    invert_rigid,
    project_points,
    transform_points,
)
from assets.dge.fusion import (
    FrameError,
    FrameRecord,
    FusionSettings,
    MaskView,
    bled_labels,
    depth_problem,
    frame_points,
    fuse_frames,
    mask_votes,
    read_depth_m,
    read_instance_ids,
    voxel_downsample,
)
from readers.scannet import rigid_pose_problem

K = intrinsics_matrix([50.0, 0, 31.5, 0, 50.0, 23.5, 0, 0, 1])


class FineObjectVoxels(FusionSettings):
    """Object clouds on 5 mm voxels (a constant of the method, overridden here): each pixel of these small
    frames keeps its own point."""

    object_voxel_size_m = 0.005


class ErodedMasks(FineObjectVoxels):
    """Every instance-mask pixel on a boundary between two ids is ignored."""

    erode_instance_boundaries = True


class CoarseSceneGrid(FineObjectVoxels):
    """The scene cloud from every second pixel, whatever the object points' stride."""

    scene_pixel_stride = 2


def _pose(yaw_deg=0.0, translation=(0.0, 0.0, 0.0)):
    angle = np.radians(yaw_deg)
    pose = np.eye(4)
    pose[:3, :3] = [[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]]
    pose[:3, 3] = translation
    return pose


def _write_frame(folder, index, depth_m, pose, instance=None, depth_scale=1000.0):
    folder.mkdir(parents=True, exist_ok=True)
    height, width = depth_m.shape
    depth_path = folder / f"depth_{index}.png"
    Image.fromarray(np.round(depth_m * depth_scale).astype(np.uint16)).save(depth_path)
    color_path = folder / f"color_{index}.jpg"
    Image.fromarray(np.full((height, width, 3), 128, np.uint8)).save(color_path)
    instance_path = None
    if instance is not None:
        instance_path = folder / f"instance_{index}.png"
        Image.fromarray((instance + 1).astype(np.uint16)).save(instance_path)
    return {
        "scene_id": "synthetic",
        "frame_index": index,
        "color_path": str(color_path),
        "depth_path": str(depth_path),
        "instance_path": None if instance_path is None else str(instance_path),
        "depth_scale": depth_scale,
        "color_width": width,
        "color_height": height,
        "depth_width": width,
        "depth_height": height,
        "color_intrinsics": K.reshape(-1).tolist(),
        "depth_intrinsics": K.reshape(-1).tolist(),
        "pose": pose.reshape(-1).tolist(),
    }


class TestCamera:
    def test_project_inverts_backproject(self):
        depth = np.random.default_rng(0).uniform(1.0, 4.0, (48, 64))
        points, rows, cols = backproject_depth(depth, K)
        uv, z = project_points(points, K)
        np.testing.assert_allclose(uv[:, 0], cols, atol=1e-9)
        np.testing.assert_allclose(uv[:, 1], rows, atol=1e-9)
        np.testing.assert_allclose(z, depth[rows, cols])

    def test_missing_depth_is_skipped(self):
        depth = np.array([[0.0, 1.0], [np.nan, 2.0]])
        points, _, _ = backproject_depth(depth, K)
        assert len(points) == 2

    def test_transform_round_trip(self):
        pose = _pose(30.0, (1.0, 2.0, 3.0))
        points = np.random.default_rng(1).normal(size=(100, 3))
        back = transform_points(invert_rigid(pose), transform_points(pose, points))
        np.testing.assert_allclose(back, points, atol=1e-12)

    @pytest.mark.parametrize(
        "pose, problem",
        [
            (np.eye(4), ""),  # identity is rigid
            (np.diag([1.0, 1.0, 2.0, 1.0]), "not orthonormal"),  # scaled axis
            (np.diag([1.0, 1.0, -1.0, 1.0]), "determinant"),  # a reflection
            (np.full((4, 4), -np.inf), "not finite"),  # ScanNet's invalid pose
        ],
    )
    def test_rigidity(self, pose, problem):
        found = rigid_pose_problem(pose)
        assert (problem in found) if problem else found == ""

    def test_normals_of_a_tilted_plane(self):
        # A plane z = 2 + 0.5 y seen by the camera: normal (0, 0.5, -1) normalised, facing the camera.
        rows = np.mgrid[0:48, 0:64][0]
        y_over_z = (rows - K[1, 2]) / K[1, 1]
        depth = 2.0 / (1.0 - 0.5 * y_over_z)
        normals = depth_normals_camera(depth, K)
        expected = np.array([0.0, 0.5, -1.0]) / np.linalg.norm([0.0, 0.5, -1.0])
        np.testing.assert_allclose(normals[24, 32], expected, atol=1e-6)
        assert np.isnan(normals[0, 0]).all()

    def test_normals_at_pixels_match_a_per_pixel_cross_product(self):
        # A wavy surface with a step (a depth jump) and holes, on a stride-2 grid; the truth is computed
        # pixel by pixel from the definition: the cross product of the central differences.
        rng = np.random.default_rng(4)
        rows, cols = np.mgrid[0:47, 0:63]
        depth = 2.0 + 0.1 * np.sin(cols / 5.0) + 0.05 * np.cos(rows / 3.0)
        depth[:, 40:] += 0.6
        depth[rng.random(depth.shape) < 0.05] = 0.0
        stride = 2
        expected = np.full(depth[::stride, ::stride].shape + (3,), np.nan)

        def point(row, col):
            z = depth[row, col]
            if z <= 0:
                return np.full(3, np.nan)
            return np.array([(col - K[0, 2]) * z / K[0, 0], (row - K[1, 2]) * z / K[1, 1], z])

        for grid_row in range(1, expected.shape[0] - 1):
            for grid_col in range(1, expected.shape[1] - 1):
                row, col = grid_row * stride, grid_col * stride
                du = point(row, col + stride) - point(row, col - stride)
                dv = point(row + stride, col) - point(row - stride, col)
                centre = point(row, col)
                if not (np.all(np.isfinite(du)) and np.all(np.isfinite(dv)) and np.isfinite(centre[2])):
                    continue
                if abs(du[2]) > 0.1 * centre[2] or abs(dv[2]) > 0.1 * centre[2]:
                    continue
                normal = np.cross(du, dv)
                normal /= np.linalg.norm(normal)
                expected[grid_row, grid_col] = -normal if normal @ centre > 0 else normal
        # Compared where the depth is valid (only those pixels become points).
        found = depth_normals_camera(depth, K, stride)[depth[::stride, ::stride] > 0]
        expected = expected[depth[::stride, ::stride] > 0]
        assert np.array_equal(np.isnan(found), np.isnan(expected))
        assert np.isfinite(found).any() and np.isnan(found).any()
        np.testing.assert_allclose(found[np.isfinite(found)], expected[np.isfinite(expected)], atol=1e-9)
        found = depth_normals_camera(depth, K, stride)
        picked = depth_normals_at(depth, K, np.array([10, 0, 46]), np.array([20, 20, 62]), stride)
        np.testing.assert_array_equal(picked[0], found[5, 10])
        assert np.isnan(picked[1:]).all()  # the grid's border


def _bled_by_loops(ids, depth, stride, config):
    """The definition of a bled label, point by point on the strided grid (missing depth: no neighbour)."""
    sampled, sampled_ids = depth[::stride, ::stride], ids[::stride, ::stride]
    height, width = sampled.shape
    bled = np.zeros(sampled.shape, dtype=bool)
    for row in range(height):
        for col in range(width):
            z, own = sampled[row, col], sampled_ids[row, col]
            if z <= 0 or own < 0:
                continue
            tolerance = config.depth_edge_tolerance_m + config.depth_edge_tolerance_relative * z
            own_elsewhere = other_here = False
            for d_row in (-1, 0, 1):
                for d_col in (-1, 0, 1):
                    r, c = row + d_row, col + d_col
                    if (
                        (d_row, d_col) == (0, 0)
                        or not (0 <= r < height and 0 <= c < width)
                        or sampled[r, c] <= 0
                    ):
                        continue
                    same_surface = abs(sampled[r, c] - z) <= tolerance
                    own_elsewhere |= sampled_ids[r, c] == own and not same_surface
                    other_here |= sampled_ids[r, c] != own and same_surface
            bled[row, col] = own_elsewhere and other_here
    return bled


@pytest.mark.parametrize("stride", [1, 2])
def test_bled_labels_match_the_definition(stride):
    # Three objects at two depths with ragged masks over a wall, and holes in the depth.
    rng = np.random.default_rng(stride)
    depth = np.full((30, 40), 3.0)
    depth[5:25, 8:20] = 2.0
    depth[rng.random(depth.shape) < 0.08] = 0.0
    ids = np.full((30, 40), -1)
    ids[4:26, 7:21] = 1  # bleeds one pixel onto the wall
    ids[10:15, 25:35] = 2  # on the wall
    ids[rng.random(ids.shape) < 0.05] = 3  # scattered labels
    points, rows, cols = backproject_depth(depth, K, stride)
    config = FusionSettings()
    found = bled_labels(ids[rows, cols], points[:, 2], rows, cols, stride, config)
    expected = _bled_by_loops(ids, depth, stride, config)[rows // stride, cols // stride]
    assert expected.any()
    np.testing.assert_array_equal(found, expected)


def _votes_by_loops(points, object_ids, views, config):
    """The label vote's definition, point by point and frame by frame (see ``mask_votes``)."""
    support = np.zeros(len(points), dtype=int)
    against = np.zeros(len(points), dtype=int)
    radius = config.mask_vote_radius_px
    for view in views:
        height, width = view.depth.shape
        for index, (point, own) in enumerate(zip(points, object_ids, strict=True)):
            x, y, z = view.world_to_camera[:3, :3] @ point + view.world_to_camera[:3, 3]
            if z <= 1e-6:
                continue
            col = round((view.intrinsics[0, 0] * x / z + view.intrinsics[0, 2]) / view.stride)
            row = round((view.intrinsics[1, 1] * y / z + view.intrinsics[1, 2]) / view.stride)
            if not (0 <= col < width and 0 <= row < height) or view.depth[row, col] <= 0:
                continue  # outside the frame, or no reading there: no vote
            tolerance = config.mask_vote_tolerance_m + config.mask_vote_tolerance_relative * z
            observed = view.depth[row, col]
            if observed < z - tolerance:
                continue  # the frame sees something in front: occluded, no vote
            nearby = [
                (min(max(row + d_row, 0), height - 1), min(max(col + d_col, 0), width - 1))
                for d_row in range(-radius, radius + 1)
                for d_col in range(-radius, radius + 1)
            ]
            if any(
                view.object_ids[r, c] == own and abs(view.depth[r, c] - z) <= tolerance for r, c in nearby
            ):
                support[index] += 1
            else:
                against[index] += 1
    return support, against


def test_mask_votes_match_the_definition():
    # Two frames of a wall with two labelled plates, depth holes and ragged labels; points on, in front of and
    # behind the surfaces, some outside the frames.
    rng = np.random.default_rng(5)
    views = []
    for yaw in (0.0, 8.0):
        depth = np.full((24, 32), 3.0, np.float32)
        depth[6:18, 4:14] = 2.0
        depth[rng.random(depth.shape) < 0.1] = 0.0
        ids = np.full((24, 32), -1, np.int32)
        ids[5:19, 3:15] = 1
        ids[8:14, 20:28] = 2
        ids[rng.random(ids.shape) < 0.05] = 3
        pose = _pose(yaw, (0.1, 0.0, 0.0))
        views.append(MaskView(0, invert_rigid(pose), K, 2, depth, ids))
    points = rng.uniform([-2.0, -1.5, 0.5], [2.0, 1.5, 3.6], size=(600, 3))
    object_ids = rng.integers(1, 4, 600)
    config = FusionSettings()
    support, against = mask_votes(points, object_ids, views, config)
    expected_support, expected_against = _votes_by_loops(points, object_ids, views, config)
    assert expected_support.any() and expected_against.any()
    np.testing.assert_array_equal(support, expected_support)
    np.testing.assert_array_equal(against, expected_against)


class TestDepthProblems:
    @pytest.mark.parametrize(
        "depth, expected",
        [
            (np.zeros((4, 4), np.float32), "empty depth"),  # every pixel missing
            (np.full((4, 4), np.nan, np.float32), "NaN depth"),  # a float depth map of NaN
            (np.where(np.eye(20) > 0, 1.0, 0.0).astype(np.float32), "empty depth: only"),  # 5% valid < 10%
            (np.ones((4, 4), np.float32), ""),  # usable
        ],
    )
    def test_cases(self, depth, expected):
        found = depth_problem(depth, min_valid_fraction=0.1)
        assert found.startswith(expected) if expected else found == ""

    def test_png_millimetres(self, tmp_path):
        path = tmp_path / "d.png"
        Image.fromarray(np.array([[1500, 0]], dtype=np.uint16)).save(path)
        np.testing.assert_allclose(read_depth_m(path, 1000.0), [[1.5, 0.0]])

    def test_unreadable_file(self, tmp_path):
        path = tmp_path / "d.png"
        path.write_bytes(b"not a png")
        with pytest.raises(FrameError, match="unreadable depth"):
            read_depth_m(path, 1000.0)

    def test_instance_boundaries_are_eroded(self, tmp_path):
        ids = np.full((6, 6), -1)
        ids[1:5, 1:5] = 3
        path = tmp_path / "i.png"
        Image.fromarray((ids + 1).astype(np.uint16)).save(path)
        eroded = read_instance_ids(path)
        assert (eroded == 3).sum() == 4  # only the 2x2 core keeps its id
        assert (read_instance_ids(path, erode_boundaries=False) == 3).sum() == 16


class TestFusion:
    def test_wall_points_in_the_world(self, tmp_path):
        depth = np.full((48, 64), 2.0)
        row = _write_frame(tmp_path, 0, depth, _pose(90.0, (1.0, 0.0, 0.0)))
        result = frame_points(FrameRecord.from_row(row), FusionSettings(pixel_stride=1))
        # Looking along world +x from x = 1: the wall is the plane x = 3.
        np.testing.assert_allclose(result.points[:, 0], 3.0, atol=1e-5)
        np.testing.assert_allclose(
            result.normals[24 * 64 + 32], [-1.0, 0.0, 0.0], atol=1e-5
        )  # an interior pixel

    def test_instance_labels_follow_the_mask(self, tmp_path):
        depth = np.full((48, 64), 2.0)
        instance = np.full((48, 64), -1)
        instance[10:30, 20:40] = 5
        row = _write_frame(tmp_path, 0, depth, np.eye(4), instance)
        fused = fuse_frames([FrameRecord.from_row(row)], FineObjectVoxels(pixel_stride=1))
        points, _ = fused.object_points[5]
        u = K[0, 0] * points[:, 0] / points[:, 2] + K[0, 2]
        # One flat surface: no label bled across a depth edge, so the whole mask keeps its label.
        assert u.min() == pytest.approx(20, abs=0.01) and u.max() == pytest.approx(39, abs=0.01)
        eroded = fuse_frames(
            [FrameRecord.from_row(row)],
            ErodedMasks(pixel_stride=1),
        )
        points, _ = eroded.object_points[5]
        u = K[0, 0] * points[:, 0] / points[:, 2] + K[0, 2]
        assert u.min() > 20 and u.max() < 39  # eroded mask interior only

    def test_a_thin_part_keeps_its_label_and_a_bled_label_is_dropped(self, tmp_path):
        depth = np.full((48, 64), 3.0)
        depth[5:40, 30] = 2.0  # a pole one pixel wide in front of the wall
        instance = np.full((48, 64), -1)
        instance[5:40, 30:32] = 5  # the mask bleeds one pixel onto the wall
        row = _write_frame(tmp_path, 0, depth, np.eye(4), instance)
        fused = fuse_frames([FrameRecord.from_row(row)], FineObjectVoxels(pixel_stride=1))
        points, _ = fused.object_points[5]
        assert len(points) > 20
        assert np.allclose(points[:, 2], 2.0, atol=0.01)  # the pole, not the wall behind it

    def test_the_scene_cloud_comes_from_its_own_coarser_grid(self, tmp_path):
        # Objects from the masks at every pixel, the scene cloud from every second pixel: the scene cloud is
        # the one fused without instances at that stride, the objects keep their full-resolution edges.
        depth = np.full((48, 64), 2.0)
        depth[10:30, 20:40] = 1.5
        instance = np.full((48, 64), -1)
        instance[10:30, 20:40] = 5
        rows = [_write_frame(tmp_path, index, depth, _pose(3.0 * index), instance) for index in range(3)]
        records = [FrameRecord.from_row(row) for row in rows]
        fused = fuse_frames(records, CoarseSceneGrid(pixel_stride=1))
        scene_only = fuse_frames(records, FusionSettings(pixel_stride=2), with_instances=False)
        np.testing.assert_array_equal(fused.points, scene_only.points)
        np.testing.assert_array_equal(fused.normals, scene_only.normals)
        assert set(fused.object_points) == {5}
        first = fuse_frames(records[:1], CoarseSceneGrid(pixel_stride=1))
        points, _ = first.object_points[5]
        u = K[0, 0] * points[:, 0] / points[:, 2] + K[0, 2]
        assert u.min() == pytest.approx(20, abs=0.01) and u.max() == pytest.approx(39, abs=0.01)

    def test_bad_frames_are_listed_and_the_rest_fused(self, tmp_path):
        depth = np.full((48, 64), 2.0)
        good = _write_frame(tmp_path, 0, depth, np.eye(4))
        empty = _write_frame(tmp_path, 1, np.zeros((48, 64)), np.eye(4))
        scaled = _write_frame(tmp_path, 2, depth, np.diag([2.0, 1.0, 1.0, 1.0]))
        nan_path = tmp_path / "nan.tiff"
        Image.fromarray(np.full((48, 64), np.nan, np.float32), mode="F").save(nan_path)
        nan = {**_write_frame(tmp_path, 3, depth, np.eye(4)), "depth_path": str(nan_path)}
        missing = {**_write_frame(tmp_path, 4, depth, np.eye(4)), "depth_path": str(tmp_path / "gone.png")}
        records = [FrameRecord.from_row(row) for row in (good, empty, scaled, nan, missing)]
        fused = fuse_frames(records, FusionSettings(pixel_stride=2))
        assert fused.used_frames == [0]
        reasons = {record_id: reason for record_id, _, reason in fused.failures}
        assert reasons["synthetic/1"].startswith("empty depth")
        assert reasons["synthetic/2"].startswith("pose is not rigid")
        assert reasons["synthetic/3"].startswith("NaN depth")
        assert reasons["synthetic/4"].startswith("missing depth file")
        assert len(fused.points) > 0

    def test_voxel_downsample_averages(self):
        points = np.array([[0.001, 0.001, 0.001], [0.009, 0.009, 0.009], [0.5, 0.5, 0.5]])
        normals = np.array([[0.0, 0.0, 1.0], [np.nan, np.nan, np.nan], [1.0, 0.0, 0.0]])
        down, down_normals, _ = voxel_downsample(points, 0.1, normals)
        order = np.argsort(down[:, 0])
        np.testing.assert_allclose(down[order][0], [0.005, 0.005, 0.005])
        np.testing.assert_allclose(down_normals[order][0], [0.0, 0.0, 1.0])


@pytest.mark.parametrize("counted", [True, False], ids=["dense grid", "sorted keys"])
def test_voxel_downsample_matches_open3d(monkeypatch, counted):
    """The numpy voxel grid gives open3d's ``voxel_down_sample``: the same voxels, the same means of points,
    normals and colours (compared as sets of rows; both the counting and the sorting index are checked)."""
    import open3d as o3d

    from assets.dge import fusion

    if not counted:
        monkeypatch.setattr(fusion, "DENSE_VOXEL_GRID_CELLS", 0)
    rng = np.random.default_rng(11)
    points = rng.uniform([-1.0, 0.5, 2.0], [1.5, 1.0, 3.0], size=(20_000, 3))
    normals = rng.normal(size=(20_000, 3))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    colors = rng.integers(0, 256, size=(20_000, 3), dtype=np.uint8)
    down, down_normals, down_colors = voxel_downsample(points, 0.05, normals, colors)

    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(points))
    cloud.normals = o3d.utility.Vector3dVector(normals)
    cloud.colors = o3d.utility.Vector3dVector(colors / 255.0)
    expected = cloud.voxel_down_sample(0.05)
    expected_normals = np.asarray(expected.normals)
    expected_normals /= np.linalg.norm(expected_normals, axis=1, keepdims=True)
    expected_colors = np.round(np.asarray(expected.colors) * 255.0)

    def by_point(rows: np.ndarray, table: np.ndarray) -> np.ndarray:
        return table[np.lexsort(np.round(rows, 9).T[::-1])]

    assert len(down) == len(expected.points)
    np.testing.assert_allclose(
        by_point(down, down), by_point(np.asarray(expected.points), np.asarray(expected.points)), atol=1e-9
    )
    np.testing.assert_allclose(
        by_point(down, down_normals), by_point(np.asarray(expected.points), expected_normals), atol=1e-9
    )
    np.testing.assert_array_equal(
        by_point(down, down_colors), by_point(np.asarray(expected.points), expected_colors)
    )
