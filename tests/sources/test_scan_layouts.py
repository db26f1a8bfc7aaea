"""The ARKitScenes and ScanNet++ readers on files laid out as the releases are (the sample world writes them).

Truth is the generator's (``truth/world.json``: the upright cameras in the room's frame and the transform to the
scan's world); the images are checked against the scan's own mesh: every depth pixel, turned upright by the rule of
``FORMATS.md`` (PIL's transposes here), back-projected with the row's intrinsics and pose, lies on the mesh.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from assets.raw_files import FileHashCache, observe_scan, scan_folders
from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import with_origin
from data_contracts import rgbd_frames, rgbd_scenes
from data_contracts.validation import check_frame
from readers.arkitscenes import axis_angle_matrix, sky_direction_from_poses
from readers.common import MissingInputError
from readers.scans import list_scans, read_scan, read_scans
from tests.sources.hub_cache import add_to_hub_cache, hub_cache  # noqa: F401

UPRIGHT = {
    0: None,
    1: Image.Transpose.ROTATE_270,
    2: Image.Transpose.ROTATE_180,
    3: Image.Transpose.ROTATE_90,
}
"""PIL's transpose that turns a stored frame upright, by clockwise quarter turns (Left: 90 degrees clockwise)."""
SKY_TURNS = {"Up": 0, "Left": 1, "Down": 2, "Right": 3}


def _truth(world: Path) -> dict[str, dict]:
    truth = json.loads((world / "truth" / "world.json").read_text())
    return {scan["scene_id"]: scan for scan in truth["layout_scans"]}


def _read(world: Path, dataset: str):
    root = world / ("arkitscenes/3dod" if dataset == "arkitscenes" else "scannetpp")
    return read_scans(list_scans(dataset, root))


def _upright_depth_m(row: dict) -> np.ndarray:
    with Image.open(row["depth_path"]) as image:
        transpose = UPRIGHT[row["upright_turns"]]
        image = image.transpose(transpose) if transpose is not None else image
        return np.asarray(image, dtype=np.float64) / row["depth_scale"]


def _distances_to_mesh(mesh_path: str, points: np.ndarray) -> np.ndarray:
    import open3d as o3d

    mesh = o3d.io.read_triangle_mesh(mesh_path)
    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(o3d.t.geometry.TriangleMesh.from_legacy(mesh))
    return scene.compute_distance(o3d.core.Tensor(points.astype(np.float32))).numpy()


def _world_points(row: dict) -> np.ndarray:
    depth = _upright_depth_m(row)
    assert depth.shape == (row["depth_height"], row["depth_width"])
    k = np.asarray(row["depth_intrinsics"]).reshape(3, 3)
    pose = np.asarray(row["pose"]).reshape(4, 4)
    rows, columns = np.nonzero(depth > 0)
    z = depth[rows, columns]
    camera = np.column_stack([(columns - k[0, 2]) / k[0, 0] * z, (rows - k[1, 2]) / k[1, 1] * z, z])
    return camera @ pose[:3, :3].T + pose[:3, 3]


@pytest.mark.parametrize("dataset", ["arkitscenes", "scannetpp"])
def test_cameras_are_the_truths_in_the_scans_world(layout_world, dataset):
    """Every frame is read; its upright size, intrinsics and camera-to-world pose are the generator's upright camera
    in the scan's world (ARKitScenes: the inverted world-to-camera trajectory, turned by its sky direction;
    ScanNet++: aligned_pose, the video's intrinsics scaled to each image), and the tables pass their contracts."""
    tables = _read(layout_world, dataset)
    truth = _truth(layout_world)
    assert not tables.quarantine.rows
    assert check_frame(with_origin(tables.frames, "sample_world"), rgbd_frames.RgbdFrames).passed
    assert check_frame(with_origin(tables.scenes, "sample_world"), rgbd_scenes.RgbdScenes).passed
    scans = {scan for scan, record in truth.items() if record["dataset"] == dataset}
    assert set(tables.scenes["scene_id"]) == scans and len(scans) >= 2
    for row in tables.frames.iter_rows(named=True):
        record = truth[row["scene_id"]]
        view = {item["frame_index"]: item for item in record["views"]}[row["frame_index"]]
        world = np.asarray(record["world_from_room"])
        assert (row["color_width"], row["color_height"]) == (view["width"], view["height"])
        assert (row["depth_width"], row["depth_height"]) == (view["depth_width"], view["depth_height"])
        np.testing.assert_allclose(
            np.reshape(row["color_intrinsics"], (3, 3)), view["color_intrinsics"], atol=1e-5
        )
        np.testing.assert_allclose(
            np.reshape(row["depth_intrinsics"], (3, 3)), view["depth_intrinsics"], atol=1e-5
        )
        np.testing.assert_allclose(
            np.reshape(row["pose"], (4, 4)), world @ np.asarray(view["pose"]), atol=1e-5
        )
        assert row["depth_scale"] == 1000.0 and row["source"] == dataset
        expected_turns = SKY_TURNS[record["sky_direction"]] if dataset == "arkitscenes" else 0
        assert row["upright_turns"] == expected_turns
    for scene in tables.scenes.iter_rows(named=True):
        assert scene["world_up"] == [0.0, 0.0, 1.0]
        counts = len(tables.frames.filter(tables.frames["scene_id"] == scene["scene_id"]))
        assert scene["num_frames"] == counts == len(truth[scene["scene_id"]]["views"])
    if dataset == "arkitscenes":
        assert {record["sky_direction"] for record in truth.values() if record["dataset"] == dataset} == set(
            SKY_TURNS
        )
    else:
        indices = tables.frames["frame_index"].to_list()
        assert min(np.diff(sorted(set(indices)))) > 1  # the extracted frames keep their video numbers: gaps


@pytest.mark.parametrize("dataset", ["arkitscenes", "scannetpp"])
def test_upright_depth_back_projects_onto_the_mesh(layout_world, dataset):
    """Depth turned upright (FORMATS.md's rule, through PIL), in metres, back-projected with the row's depth
    intrinsics and pose, lies on the scan's mesh: sky direction, resolutions, pose convention and units agree."""
    tables = _read(layout_world, dataset)
    for scene in tables.scenes.iter_rows(named=True):
        frames = tables.frames.filter(tables.frames["scene_id"] == scene["scene_id"])
        points = np.vstack([_world_points(row) for row in frames.iter_rows(named=True)])
        distances = _distances_to_mesh(scene["mesh_path"], points)
        assert np.median(distances) < 0.002 and np.quantile(distances, 0.99) < 0.01, (
            scene["scene_id"],
            np.quantile(distances, [0.5, 0.99]),
        )


@pytest.mark.parametrize("dataset", ["arkitscenes", "scannetpp"])
def test_objects_and_their_boxes_are_the_truths(layout_world, dataset):
    """ARKitScenes' oriented boxes (object id = position in data) and ScanNet++'s segment groups (objectId = the
    room's object id + 1, with their obb) give the objects, their labels and boxes in the scan's world."""
    tables = _read(layout_world, dataset)
    truth = _truth(layout_world)
    for scene in tables.scenes.iter_rows(named=True):
        record = truth[scene["scene_id"]]
        world = np.asarray(record["world_from_room"])
        read = {item["object_id"]: item for item in scene["objects"]}
        for item in record["objects"]:
            box = read[item["object_id"]]["box"]
            assert read[item["object_id"]]["label"] == item["category"]
            centre = world[:3, :3] @ np.asarray(item["centroid"]) + world[:3, 3]
            np.testing.assert_allclose(box["centroid"], centre, atol=1e-4)
            np.testing.assert_allclose(box["lengths"], item["extents"], atol=1e-4)
            axes = np.reshape(box["axes"], (3, 3))
            np.testing.assert_allclose(axes.T, world[:3, :3] @ np.asarray(item["obb"]["rotation"]), atol=1e-4)
        if dataset == "scannetpp":  # the room's floor, walls and ceiling are annotated too, without a box
            assert {item["label"] for item in scene["objects"] if item["box"] is None} <= {
                "floor",
                "wall",
                "ceiling",
            }
            assert min(read) == 1


def _arkit_video(world: Path, tmp_path: Path, sky: str) -> tuple[Path, Path]:
    """A copy of the world's ARKitScenes root, and the copied video folder of the given sky direction."""
    root = tmp_path / "3dod"
    shutil.copytree(world / "arkitscenes" / "3dod", root)
    truth = next(record for record in _truth(world).values() if record.get("sky_direction") == sky)
    return root, root / truth["fold"] / truth["video_id"]


def test_sky_direction_without_metadata_comes_from_the_poses(layout_world, tmp_path):
    """Without metadata.csv the cameras' view of the world's up axis gives each video's sky direction."""
    root, _ = _arkit_video(layout_world, tmp_path, "Left")
    with_metadata = read_scans(list_scans("arkitscenes", root)).frames
    (root / "metadata.csv").unlink()
    without = read_scans(list_scans("arkitscenes", root)).frames
    assert without.equals(with_metadata)
    assert (
        sky_direction_from_poses([np.eye(4)]) == "Down"
    )  # camera y (image down) along world +z: sky at the bottom


def test_frames_match_poses_by_timestamp_within_5_ms(layout_world, tmp_path):
    """A frame takes the nearest trajectory line within 5 ms (one is 3.2 ms off) and a .pincam named 1 ms off its
    image; a frame whose lines are all farther is quarantined with the distance, and the rest are kept."""
    root, video = _arkit_video(layout_world, tmp_path, "Up")
    frames_folder = next(video.glob("*_frames"))
    pincams = sorted(
        path.stem.rsplit("_", 1)[-1] for path in (frames_folder / "lowres_wide_intrinsics").iterdir()
    )
    images = sorted(path.stem.rsplit("_", 1)[-1] for path in (frames_folder / "lowres_wide").iterdir())
    assert pincams != images  # one intrinsics file is named 1 ms off its image
    trajectory = frames_folder / "lowres_wide.traj"
    lines = trajectory.read_text().splitlines()
    stamps = [float(line.split()[0]) for line in lines]
    assert any(
        abs(stamp * 1000 - round(stamp * 1000)) > 0.1 for stamp in stamps
    )  # more decimals than the frames
    assert len(lines) > len(images)  # not 1:1 with the frames
    target = float(images[3])
    trajectory.write_text(
        "\n".join(line for line, stamp in zip(lines, stamps, strict=True) if abs(stamp - target) > 0.01)
        + "\n"
    )
    tables = read_scans(list_scans("arkitscenes", root))
    scene_id = f"arkitscenes_{video.name}"
    kept = tables.frames.filter(tables.frames["scene_id"] == scene_id)["frame_index"].to_list()
    assert round(target * 1000) not in kept and len(kept) == len(images) - 1
    (record,) = [row for row in tables.quarantine.rows if row["record_id"].startswith(scene_id)]
    assert record["record_id"] == f"{scene_id}/{round(target * 1000)}"
    assert record["reason"].startswith(f"no pose within 5 ms: the nearest line of {trajectory} is ")
    assert record["reason"].endswith("ms away")


def test_the_trajectory_is_world_to_camera_axis_angle():
    """``axis_angle_matrix`` is Rodrigues' formula: a rotation about the vector by its length."""
    rotation = axis_angle_matrix(np.array([0.0, 0.0, np.pi / 2]))
    np.testing.assert_allclose(rotation @ [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], atol=1e-12)
    vector = np.array([0.3, -0.2, 0.9])
    rotation = axis_angle_matrix(vector)
    np.testing.assert_allclose(rotation @ vector, vector, atol=1e-12)  # the axis is fixed
    np.testing.assert_allclose(rotation @ rotation.T, np.eye(3), atol=1e-12)


def test_the_older_sample_layout_reads_the_same(layout_world, tmp_path):
    """``wide/``, ``color_intrinsics/``, ``color.traj`` and files named ``<ts>.png`` read as the release does."""
    root, video = _arkit_video(layout_world, tmp_path, "Right")
    released = read_scan(next(scan for scan in list_scans("arkitscenes", root) if scan.folder == video))[0]
    frames_folder = next(video.glob("*_frames"))
    for old, new in (("lowres_wide", "wide"), ("lowres_wide_intrinsics", "color_intrinsics")):
        (frames_folder / old).rename(frames_folder / new)
    (frames_folder / "lowres_wide.traj").rename(frames_folder / "color.traj")
    for folder in ("wide", "lowres_depth", "color_intrinsics"):
        for path in (frames_folder / folder).iterdir():
            path.rename(path.with_name(path.name.split("_", 1)[1]))
    older = read_scan(next(scan for scan in list_scans("arkitscenes", root) if scan.folder == video))[0]
    assert [row["frame_index"] for row in older] == [row["frame_index"] for row in released]
    for old_row, new_row in zip(older, released, strict=True):
        assert (
            old_row["pose"] == new_row["pose"] and old_row["color_intrinsics"] == new_row["color_intrinsics"]
        )


@pytest.mark.parametrize(
    ("dataset", "remove", "sentence"),
    [
        ("arkitscenes", "{video}_3dod_annotation.json", "has no annotation: {path} is missing"),
        ("arkitscenes", "{video}_frames/lowres_wide.traj", "has no trajectory: {path} is missing"),
        ("scannetpp", "scans/segments_anno.json", "has no annotation file: {path} is missing"),
        ("scannetpp", "iphone/pose_intrinsic_imu.json", "has no poses file: {path} is missing"),
    ],
)
def test_a_missing_annotation_or_pose_file_fails_the_scan_naming_it(
    layout_world, tmp_path, dataset, remove, sentence
):
    source = layout_world / ("arkitscenes/3dod" if dataset == "arkitscenes" else "scannetpp")
    root = tmp_path / "root"
    shutil.copytree(source, root)
    scans = list_scans(dataset, root)
    scan = scans[0]
    path = scan.folder / remove.format(video=scan.folder.name)
    path.unlink()
    with pytest.raises(MissingInputError) as raised:
        read_scan(scan)
    message = str(raised.value)
    assert sentence.format(path=path) in message and message.count(". ") == 0
    tables = read_scans(scans)  # the others are read; the broken scan is one record naming the file
    assert scan.key not in tables.scenes["scene_id"].to_list() and tables.scenes.height == len(scans) - 1
    (record,) = tables.quarantine.rows
    assert (record["record_id"], record["source_file"]) == (scan.key, str(path))


def test_bad_frames_and_boxes_are_quarantined_and_the_rest_kept(layout_world, tmp_path):
    """An ARKitScenes frame without its depth image, a box without its axes, a ScanNet++ frame without a pose entry
    and one without an aligned_pose: each is one record with the reason; the scan keeps everything else."""
    root, video = _arkit_video(layout_world, tmp_path, "Left")
    frames_folder = next(video.glob("*_frames"))
    depth = sorted((frames_folder / "lowres_depth").iterdir())[0]
    depth.unlink()
    annotation = next(video.glob("*_annotation.json"))
    data = json.loads(annotation.read_text())
    del data["data"][1]["segments"]["obbAligned"]["normalizedAxes"]
    annotation.write_text(json.dumps(data))
    scan = next(scan for scan in list_scans("arkitscenes", root) if scan.folder == video)
    frames, scene, log = read_scan(scan)
    reasons = {row["record_id"]: row["reason"] for row in log.rows}
    stamp = round(float(depth.stem.rsplit("_", 1)[-1]) * 1000)
    assert reasons[f"{scan.key}/{stamp}"] == f"missing file: frame lacks its depth image {depth}"
    assert reasons[f"{scan.key}/object/1"].startswith("bad box: data[1]: the oriented box lacks or misshapes")
    assert len(reasons) == 2 and len(frames) == len(list((frames_folder / "lowres_wide").iterdir())) - 1
    assert (
        1 not in {item["object_id"] for item in scene["objects"]}
        and len(scene["objects"]) == len(data["data"]) - 1
    )

    pp_root = tmp_path / "scannetpp"
    shutil.copytree(layout_world / "scannetpp", pp_root)
    scan = list_scans("scannetpp", pp_root)[0]
    poses = scan.folder / "iphone" / "pose_intrinsic_imu.json"
    entries = json.loads(poses.read_text())
    first, second = sorted(
        int(path.stem.split("_")[1]) for path in (scan.folder / "iphone" / "rgb").iterdir()
    )[:2]
    del entries[f"frame_{first:06d}"]
    del entries[f"frame_{second:06d}"]["aligned_pose"]
    poses.write_text(json.dumps(entries))
    frames, scene, log = read_scan(scan)
    reasons = {row["record_id"]: row["reason"] for row in log.rows}
    assert reasons == {
        f"{scan.key}/{first}": f"no pose: {poses} has no entry frame_{first:06d}",
        f"{scan.key}/{second}": f"no pose: frame_{second:06d} in {poses} has no 4x4 aligned_pose",
    }
    assert first not in {row["frame_index"] for row in frames} and scene["num_frames"] == len(frames)


def test_every_scan_is_a_partition_named_by_its_data_set(layout_world, small_world, tmp_path):
    """Scans of all three roots in one build: ScanNet keys are its folder names, the others carry their data set's
    prefix; a ScanNet folder named like another data set's key is refused; an ARKitScenes video's version follows
    its metadata row, a ScanNet++ scene's only the files its reader reads."""
    arkit = tmp_path / "3dod"
    shutil.copytree(layout_world / "arkitscenes" / "3dod", arkit)
    pp = tmp_path / "scannetpp"
    shutil.copytree(layout_world / "scannetpp", pp)
    sources = SourcesResource(
        scannet_root=str(small_world / "scannet" / "scans"),
        arkitscenes_root=str(arkit),
        scannetpp_root=str(pp),
    )
    storage = StorageResource(root=str(tmp_path / "storage"))
    scans = scan_folders(sources, storage)
    scannet = sorted(path.name for path in (small_world / "scannet" / "scans").iterdir())
    truth = _truth(layout_world)
    assert sorted(scans) == sorted(scannet + list(truth))
    assert {scans[key].dataset for key in scannet} == {"scannet"}
    assert all(key.startswith(scans[key].dataset + "_") for key in truth)
    with FileHashCache(tmp_path / "hashes.sqlite") as cache:
        video = next(scan for scan in scans.values() if scan.dataset == "arkitscenes")
        scene = next(scan for scan in scans.values() if scan.dataset == "scannetpp")
        before = {scan.key: observe_scan(scan, cache)[0] for scan in (video, scene)}
        (scene.folder / "dslr").mkdir()
        (scene.folder / "dslr" / "DSC00001.JPG").write_bytes(b"not read by the reader")
        metadata = arkit / "metadata.csv"
        metadata.write_text(
            metadata.read_text().replace(f"{video.folder.name},", f"{video.folder.name}0,", 1)
        )
        after = {scan.key: observe_scan(scan, cache)[0] for scan in scan_folders(sources, storage).values()}
        assert after[scene.key] == before[scene.key]
        assert after[video.key] != before[video.key]
    (tmp_path / "scans" / "arkitscenes_1").mkdir(parents=True)
    with pytest.raises(ValueError, match="is named like an ARKitScenes scan's partition key"):
        scan_folders(SourcesResource(scannet_root=str(tmp_path / "scans")), storage)


def test_the_scan_tables_of_all_three_layouts_and_a_scan_missing_its_annotation(
    layout_world, small_world, tmp_path
):
    """``rgbd_frames``/``rgbd_scenes`` over every scan of the three roots in one range run: each partition's rows
    say their data set; a video whose annotation is gone fails its own partition with one sentence naming the file,
    and the previous files of that partition are kept."""
    import dagster as dg
    import polars as pl

    from assets.partitions import SCENES_PARTITIONS_NAME
    from assets.resources import WorkersResource
    from assets.sources.assets import SOURCE_ASSETS
    from data_contracts.storage import table_path
    from pipelines.cli import partition_range_tags
    from pipelines.io_manager import ParquetIOManager

    arkit = tmp_path / "3dod"
    shutil.copytree(layout_world / "arkitscenes" / "3dod", arkit)
    sources = SourcesResource(
        scannet_root=str(small_world / "scannet" / "scans"),
        arkitscenes_root=str(arkit),
        scannetpp_root=str(layout_world / "scannetpp"),
    )
    storage = tmp_path / "storage"
    resources = {
        "io_manager": ParquetIOManager(root=str(storage)),
        "storage": StorageResource(root=str(storage)),
        "sources": sources,
        "workers": WorkersResource(max_workers=2),
    }
    scans = scan_folders(sources, resources["storage"])
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, list(scans))
    keys = sorted(scans)
    result = dg.materialize(
        SOURCE_ASSETS[2:],
        resources=resources,
        instance=instance,
        tags=partition_range_tags(keys[0], keys[-1]),
    )
    assert result.success
    for key, scan in scans.items():
        scenes = pl.read_parquet(table_path(storage, "rgbd_scenes", key))
        frames = pl.read_parquet(table_path(storage, "rgbd_frames", key))
        assert scenes["scene_id"].to_list() == [key] and set(frames["scene_id"]) == {key}
        assert set(scenes["source"]) == set(frames["source"]) == {scan.dataset}
        assert set(scenes["origin"]) == {"real"}
    broken = next(scan for scan in scans.values() if scan.dataset == "arkitscenes")
    kept = table_path(storage, "rgbd_frames", broken.key).read_bytes()
    annotation = broken.folder / f"{broken.folder.name}_3dod_annotation.json"
    annotation.unlink()
    result = dg.materialize(
        SOURCE_ASSETS[2:],
        resources=resources,
        instance=instance,
        partition_key=broken.key,
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.user_failure_data.description
    assert message.startswith(
        f"ARKitScenes video {broken.folder.name} has no annotation: {annotation} is missing"
    )
    assert table_path(storage, "rgbd_frames", broken.key).read_bytes() == kept


def test_hub_dataset_ids_read_like_local_folders(layout_world, tmp_path, hub_cache):  # noqa: F811
    """``arkitscenes_root`` and ``scannetpp_root`` take ``hf://datasets/...`` ids (a pinned revision, a folder inside):
    their snapshots in the Hub cache list and read the same scans as the local folders."""
    add_to_hub_cache(hub_cache, "spatial/ARKitScenes-sample", layout_world / "arkitscenes", revision="v1")
    add_to_hub_cache(hub_cache, "spatial/ScanNetpp-sample", layout_world / "scannetpp")
    sources = SourcesResource(
        arkitscenes_root="hf://datasets/spatial/ARKitScenes-sample@v1/3dod",
        scannetpp_root="hf://datasets/spatial/ScanNetpp-sample",
    )
    scans = scan_folders(sources, StorageResource(root=str(tmp_path / "storage")))
    assert sorted(scans) == sorted(_truth(layout_world))
    for dataset in ("arkitscenes", "scannetpp"):
        from_hub = read_scans([scan for scan in scans.values() if scan.dataset == dataset])
        local = _read(layout_world, dataset)
        assert from_hub.frames.drop("color_path", "depth_path").equals(
            local.frames.drop("color_path", "depth_path")
        )
