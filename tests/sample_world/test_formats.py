"""Every file of the sample world parses in its real format, with the real format's conventions."""

from __future__ import annotations

import json
import re

import numpy as np
import open3d as o3d
import pytest
from PIL import Image

from assets.sample_world.completion import MANIFEST_FILE
from assets.sample_world.questions import OMNISPATIAL_TASKS, SPATIALAB_TASKS
from tests.sample_world.world_helpers import World, read_matrix


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def test_summary_counts_match_the_files(small_world: World):
    summary = small_world.summary
    root = small_world.root
    assert summary.root == root
    assert summary.num_views == small_world.config.num_scenes * small_world.config.views_per_scene
    assert summary.num_omnispatial_questions == len(_load(root / "omnispatial" / "data.json")) > 0
    assert summary.num_spatialab_questions == len(_load(root / "spatialab" / "spatialab.json")) > 0
    assert (
        summary.num_vg_images == len(_load(root / "visual_genome" / "image_data.json")) == summary.num_views
    )
    assert summary.num_coco_annotations == len(_load(root / "coco" / "instances.json")["annotations"]) > 0
    assert summary.bytes_on_disk == sum(
        path.stat().st_size for path in root.rglob("*") if path.is_file() and path.name != MANIFEST_FILE
    )
    layouts = {"arkitscenes_3dod": summary.num_arkitscenes_videos, "scannetpp": summary.num_scannetpp_scenes}
    for key, path in summary.paths.items():
        assert path.exists() == bool(layouts.get(key, True)), key  # a layout's folder only when it has scans
    assert not list(root.parent.glob(f".{root.name}.partial*"))


def test_omnispatial_data_json(small_world: World):
    root = small_world.root / "omnispatial"
    records = _load(root / "data.json")
    ids = [record["id"] for record in records]
    assert len(ids) == len(set(ids))
    task_of_image: dict[str, str] = {}
    for record in records:
        assert set(record) == {"id", "task_type", "sub_task_type", "question", "options", "answer"}
        assert re.fullmatch(r"\d+_\d+", record["id"])
        assert record["sub_task_type"] in OMNISPATIAL_TASKS[record["task_type"]]
        assert 2 <= len(record["options"]) <= 4
        assert len(set(record["options"])) == len(record["options"])
        assert isinstance(record["answer"], int) and 0 <= record["answer"] < len(record["options"])
        image_number = record["id"].split("_")[0]
        assert task_of_image.setdefault(image_number, record["task_type"]) == record["task_type"]
        with Image.open(root / record["task_type"] / f"{image_number}.png") as image:
            assert image.format == "PNG" and image.size == (
                small_world.config.width,
                small_world.config.height,
            )


def test_spatialab_json(small_world: World):
    root = small_world.root / "spatialab"
    records = _load(root / "spatialab.json")
    for record in records:
        assert list(record) == [
            "id",
            "Category",
            "Sub_Category",
            "Question",
            "Option_1",
            "Option_2",
            "Option_3",
            "Option_4",
            "Answer",
            "Image_Filename",
        ]
        assert record["Sub_Category"] in SPATIALAB_TASKS[record["Category"]]
        options = [record[f"Option_{index}"] for index in range(1, 5)]
        assert all(options) and len(set(options)) == 4
        assert record["Answer"] in (1, 2, 3, 4)
        with Image.open(root / "images" / record["Image_Filename"]) as image:
            assert image.size == (small_world.config.width, small_world.config.height)


def test_visual_genome_raw_json(small_world: World):
    root = small_world.root / "visual_genome"
    image_data = _load(root / "image_data.json")
    sizes = {}
    for entry in image_data:
        assert set(entry) == {"image_id", "url", "width", "height", "coco_id", "flickr_id"}
        with Image.open(root / "VG_100K" / f"{entry['image_id']}.jpg") as image:
            assert image.format == "JPEG" and image.size == (entry["width"], entry["height"])
        sizes[entry["image_id"]] = (entry["width"], entry["height"])
    objects_by_image = {}
    for entry in _load(root / "objects.json"):
        width, height = sizes[entry["image_id"]]
        ids = set()
        for item in entry["objects"]:
            assert {"object_id", "x", "y", "w", "h", "names", "synsets"} <= set(item)
            assert isinstance(item["names"], list) and item["names"]
            assert item["w"] > 0 and item["h"] > 0
            assert 0 <= item["x"] and item["x"] + item["w"] <= width
            assert 0 <= item["y"] and item["y"] + item["h"] <= height
            ids.add(item["object_id"])
        objects_by_image[entry["image_id"]] = ids
    shapes = set()
    for entry in _load(root / "relationships.json"):
        for relation in entry["relationships"]:
            assert relation["predicate"]
            for role in ("subject", "object"):
                reference = relation[role]
                assert ("name" in reference) != ("names" in reference)
                if "names" in reference:
                    assert "merged_object_ids" in reference and isinstance(reference["names"], list)
                    shapes.add("names")
                else:
                    assert isinstance(reference["name"], str)
                    shapes.add("name")
                assert reference["object_id"] in objects_by_image[entry["image_id"]]
    assert shapes == {"name", "names"}
    for entry in _load(root / "attributes.json"):
        for item in entry["attributes"]:
            assert item["object_id"] in objects_by_image[entry["image_id"]]
            assert all(isinstance(word, str) for word in item.get("attributes", []))


def _is_rigid(pose: np.ndarray) -> bool:
    rotation = pose[:3, :3]
    return (
        np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-6)
        and np.isclose(np.linalg.det(rotation), 1.0, atol=1e-6)
        and np.allclose(pose[3], [0, 0, 0, 1])
    )


def test_scannet_scans(small_world: World):
    config = small_world.config
    scans = small_world.root / "scannet" / "scans"
    assert sorted(path.name for path in scans.iterdir()) == [
        scene["scene_id"] for scene in small_world.truth["scenes"]
    ]
    for scene in small_world.truth["scenes"]:
        folder = scans / scene["scene_id"]
        frames = sorted(int(path.stem) for path in (folder / "color").glob("*.jpg"))
        assert frames == list(range(config.views_per_scene))
        for frame in frames:
            with Image.open(folder / "color" / f"{frame}.jpg") as image:
                assert image.format == "JPEG" and image.size == (config.width, config.height)
            with Image.open(folder / "depth" / f"{frame}.png") as image:
                assert image.mode == "I;16" and image.size == (config.depth_width, config.depth_height)
            with Image.open(folder / "instance-filt" / f"{frame}.png") as image:
                assert image.mode == "I;16" and image.size == (config.width, config.height)
                assert np.asarray(image).max() <= len(scene["objects"])
            pose = read_matrix(folder / "pose" / f"{frame}.txt")
            assert pose.shape == (4, 4) and _is_rigid(pose)
            # The realistic mode records poses with a registration error of a few millimetres.
            tolerance = 1e-7 if config.scan_realism == "exact" else 0.05
            assert np.allclose(pose, scene["views"][frame]["pose"], atol=tolerance)
        color_k = read_matrix(folder / "intrinsic" / "intrinsic_color.txt")
        depth_k = read_matrix(folder / "intrinsic" / "intrinsic_depth.txt")
        assert color_k.shape == depth_k.shape == (4, 4)
        assert np.allclose(color_k[:3, :3], scene["views"][0]["color_intrinsics"])
        assert np.allclose(depth_k[:3, :3], scene["views"][0]["depth_intrinsics"])
        assert depth_k[0, 0] == pytest.approx(color_k[0, 0] / config.depth_downsample)
        meta = dict(
            line.split(" = ", 1) for line in (folder / f"{scene['scene_id']}.txt").read_text().splitlines()
        )
        assert int(meta["colorWidth"]) == config.width and int(meta["depthWidth"]) == config.depth_width
        assert int(meta["numColorFrames"]) == config.views_per_scene

        aggregation = _load(folder / f"{scene['scene_id']}.aggregation.json")
        groups = aggregation["segGroups"]
        count = len(scene["objects"])
        assert [group["objectId"] for group in groups] == list(range(len(groups)))
        assert [group["label"] for group in groups[:count]] == [item["category"] for item in scene["objects"]]
        if config.scan_realism == "realistic":  # the room's surfaces are annotated, as ScanNet annotates them
            assert [group["label"] for group in groups[count:]] == [
                "floor",
                "wall",
                "wall",
                "wall",
                "wall",
                "ceiling",
            ]
            assert all(len(group["segments"]) > 1 for group in groups[count:])
        segments = _load(folder / f"{scene['scene_id']}_vh_clean_2.0.010000.segs.json")
        assert aggregation["segmentsFile"] == f"scannet.{scene['scene_id']}_vh_clean_2.0.010000.segs.json"
        mesh = o3d.io.read_triangle_mesh(str(folder / f"{scene['scene_id']}_vh_clean_2.ply"))
        assert len(segments["segIndices"]) == len(mesh.vertices) > 0
        assert mesh.has_vertex_colors() and len(mesh.triangles) > 0
        known = set(segments["segIndices"])
        for group in groups:
            assert group["segments"] and set(group["segments"]) <= known


def _decode_rle(counts: list[int], height: int, width: int) -> np.ndarray:
    flat = np.zeros(height * width, dtype=bool)
    position, value = 0, False
    for count in counts:
        flat[position : position + count] = value
        position += count
        value = not value
    assert position == height * width
    return flat.reshape(width, height).T


def test_coco_instances(small_world: World):
    coco = _load(small_world.root / "coco" / "instances.json")
    assert {"images", "annotations", "categories"} <= set(coco)
    category_ids = [category["id"] for category in coco["categories"]]
    assert len(set(category_ids)) == len(category_ids)
    assert max(category_ids) > len(category_ids), "ids are COCO-like, not contiguous"
    views = {
        view["omnispatial_image"]: (scene, view)
        for scene, view in small_world.views()
        if view["omnispatial_image"]
    }
    images = {image["id"]: image for image in coco["images"]}
    assert {image["file_name"] for image in images.values()} == set(views)
    for annotation in coco["annotations"]:
        image = images[annotation["image_id"]]
        assert (small_world.root / "omnispatial" / image["file_name"]).is_file()
        assert annotation["category_id"] in category_ids and annotation["iscrowd"] == 0
        x, y, w, h = annotation["bbox"]
        assert w > 0 and h > 0 and x + w <= image["width"] and y + h <= image["height"]
        mask = _decode_rle(annotation["segmentation"]["counts"], image["height"], image["width"])
        assert annotation["segmentation"]["size"] == [image["height"], image["width"]]
        assert mask.sum() == annotation["area"]
        scene, view = views[image["file_name"]]
        record = next(item for item in view["objects"] if item["coco_annotation_id"] == annotation["id"])
        instance = np.asarray(
            Image.open(
                small_world.root
                / "scannet"
                / "scans"
                / scene["scene_id"]
                / "instance-filt"
                / f"{view['frame_index']}.png"
            )
        )
        assert np.array_equal(mask, instance == record["object_id"] + 1)


def test_truth_file(small_world: World):
    truth = small_world.truth
    assert truth["config"]["num_scenes"] == small_world.config.num_scenes
    for scene in truth["scenes"]:
        assert scene["floor_plane"] == [0.0, 0.0, 1.0, 0.0]
        for item in scene["objects"]:
            assert len(item["obb"]["corners"]) == 8
            corners = np.asarray(item["obb"]["corners"])
            assert np.allclose(corners.mean(axis=0), item["centroid"], atol=1e-5)
            # The tight axis-aligned box of the mesh lies within the axis-aligned hull of the oriented box.
            assert (np.asarray(item["aabb"]["min"]) >= corners.min(axis=0) - 1e-5).all()
            assert (np.asarray(item["aabb"]["max"]) <= corners.max(axis=0) + 1e-5).all()
            assert item["aabb"]["min"][2] == pytest.approx(corners[:, 2].min(), abs=1e-5)
        for view in scene["views"]:
            assert len(view["objects"]) == len(scene["objects"])
