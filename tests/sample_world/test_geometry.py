"""Rendered depth and masks agree with the analytic geometry of the truth file.

Everything here is recomputed from the files on disk (ScanNet-like depth, intrinsics, poses,
instance masks, mesh) and the truth, independently of the renderer.
"""

from __future__ import annotations

import json

import numpy as np
import open3d as o3d
import pytest
from PIL import Image

from tests.sample_world.world_helpers import World, pixel_directions, read_matrix

DEPTH_TOLERANCE = 2e-3
"""Metres: half a millimetre of PNG quantisation plus float32 geometry."""


def _room_exit(origin: np.ndarray, directions: np.ndarray, room: dict) -> tuple[np.ndarray, np.ndarray]:
    """Distance along each ray to the room box (the camera is inside) and the index of the plane hit
    (0 floor, 1 ceiling, 2 x=0, 3 x=width, 4 y=0, 5 y=depth)."""
    planes = [(2, 0.0), (2, room["height"]), (0, 0.0), (0, room["width"]), (1, 0.0), (1, room["depth"])]
    distances = np.full((len(directions), len(planes)), np.inf)
    for index, (axis, offset) in enumerate(planes):
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (offset - origin[axis]) / directions[:, axis]
        distances[:, index] = np.where(t > 0, t, np.inf)
    return distances.min(axis=1), distances.argmin(axis=1)


def _obb_slab(
    origin: np.ndarray, directions: np.ndarray, obb: dict, grow: float
) -> tuple[np.ndarray, np.ndarray]:
    """Entry and exit distances of each ray through an oriented box grown by `grow`."""
    rotation = np.asarray(obb["rotation"])
    half = np.asarray(obb["extents"]) / 2.0 + grow
    local_origin = (origin - np.asarray(obb["center"])) @ rotation
    local_directions = directions @ rotation
    with np.errstate(divide="ignore", invalid="ignore"):
        first = (-half - local_origin) / local_directions
        second = (half - local_origin) / local_directions
    low = np.where(np.isnan(first), -np.inf, np.minimum(first, second))
    high = np.where(np.isnan(second), np.inf, np.maximum(first, second))
    return low.max(axis=1), high.min(axis=1)


def _inside_obb(points: np.ndarray, obb: dict, grow: float) -> np.ndarray:
    local = (points - np.asarray(obb["center"])) @ np.asarray(obb["rotation"])
    return (np.abs(local) <= np.asarray(obb["extents"]) / 2.0 + grow).all(axis=1)


def test_depth_equals_the_distance_implied_by_pose_and_intrinsics(exact_small_world: World):
    floor_pixels = free_pixels = object_pixels = 0
    for scene, view in exact_small_world.views():
        folder = exact_small_world.root / "scannet" / "scans" / scene["scene_id"]
        frame = view["frame_index"]
        depth_png = np.asarray(Image.open(folder / "depth" / f"{frame}.png"))
        assert depth_png.dtype == np.uint16
        assert depth_png.shape == (view["depth_height"], view["depth_width"])
        depth = depth_png.astype(np.float64).ravel() / 1000.0
        assert (depth > 0).all(), "the room is closed: every depth pixel sees a surface"
        intrinsics = read_matrix(folder / "intrinsic" / "intrinsic_depth.txt")[:3, :3]
        pose = read_matrix(folder / "pose" / f"{frame}.txt")
        origin = pose[:3, 3]
        directions = pixel_directions(intrinsics, pose[:3, :3], view["depth_width"], view["depth_height"])
        points = origin + directions * depth[:, None]

        room_distance, plane = _room_exit(origin, directions, scene["room"])
        assert (depth <= room_distance + DEPTH_TOLERANCE).all(), "nothing lies beyond the walls"

        misses_every_object = np.ones(len(directions), dtype=bool)
        for scene_object in scene["objects"]:
            entry, leave = _obb_slab(origin, directions, scene_object["obb"], 0.01)
            misses_every_object &= ~((entry <= leave) & (leave > 0))
        # Rays that meet no object box end on the room surface, exactly where the plane says.
        assert (
            np.abs(depth[misses_every_object] - room_distance[misses_every_object]).max(initial=0.0)
            <= DEPTH_TOLERANCE
        )
        on_floor = misses_every_object & (plane == 0)
        assert np.abs(points[on_floor, 2]).max(initial=0.0) <= DEPTH_TOLERANCE
        floor_pixels += int(on_floor.sum())
        free_pixels += int(misses_every_object.sum())

        # Points nearer than the room surface lie on an object (inside its oriented box).
        nearer = depth < room_distance - DEPTH_TOLERANCE
        inside_some_box = np.zeros(len(directions), dtype=bool)
        for scene_object in scene["objects"]:
            inside_some_box |= _inside_obb(points, scene_object["obb"], DEPTH_TOLERANCE)
        assert inside_some_box[nearer].all()
        object_pixels += int(nearer.sum())
    assert floor_pixels > 0 and free_pixels > 0 and object_pixels > 0


def test_instance_pixels_see_their_object(small_world: World):
    for scene, view in small_world.views():
        folder = small_world.root / "scannet" / "scans" / scene["scene_id"]
        instance = np.asarray(Image.open(folder / "instance-filt" / f"{view['frame_index']}.png")).ravel()
        intrinsics = read_matrix(folder / "intrinsic" / "intrinsic_color.txt")[:3, :3]
        pose = np.asarray(
            view["pose"], dtype=np.float64
        )  # the true pose (the realistic mode records it with an error)
        directions = pixel_directions(intrinsics, pose[:3, :3], view["width"], view["height"])
        for scene_object in scene["objects"]:
            pixels = instance == scene_object["object_id"] + 1
            entry, leave = _obb_slab(pose[:3, 3], directions[pixels], scene_object["obb"], 1e-3)
            assert ((entry <= leave) & (leave > 0)).all()


def _object_meshes(folder, scene_id: str) -> dict[int, o3d.t.geometry.RaycastingScene]:
    mesh = o3d.io.read_triangle_mesh(str(folder / f"{scene_id}_vh_clean_2.ply"))
    vertices = np.asarray(mesh.vertices, dtype=np.float32)
    triangles = np.asarray(mesh.triangles)
    segments = np.asarray(
        json.loads((folder / f"{scene_id}_vh_clean_2.0.010000.segs.json").read_text())["segIndices"]
    )
    assert len(segments) == len(vertices)
    aggregation = json.loads((folder / f"{scene_id}.aggregation.json").read_text())
    scenes = {}
    for group in aggregation["segGroups"]:
        keep = np.isin(segments[triangles[:, 0]], group["segments"])
        single = o3d.t.geometry.RaycastingScene()
        single.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(triangles[keep].astype(np.uint32)))
        scenes[group["objectId"]] = single
    return scenes


def test_unoccluded_pixels_match_each_object_rendered_alone(exact_small_world: World):
    """Cast the colour rays at each object's own mesh (cut from the PLY by its segments)."""
    checked = 0
    for scene in exact_small_world.truth["scenes"]:
        folder = exact_small_world.root / "scannet" / "scans" / scene["scene_id"]
        singles = _object_meshes(folder, scene["scene_id"])
        intrinsics = read_matrix(folder / "intrinsic" / "intrinsic_color.txt")[:3, :3]
        for view in scene["views"]:
            pose = read_matrix(folder / "pose" / f"{view['frame_index']}.txt")
            directions = pixel_directions(intrinsics, pose[:3, :3], view["width"], view["height"])
            rays = np.concatenate([np.broadcast_to(pose[:3, 3], directions.shape), directions], axis=1)
            for record in view["objects"]:
                hits = singles[record["object_id"]].cast_rays(o3d.core.Tensor(rays.astype(np.float32)))
                alone = int(np.isfinite(hits["t_hit"].numpy()).sum())
                assert abs(alone - record["unoccluded_pixels"]) <= max(2, 0.02 * alone)
                assert record["visible_pixels"] <= record["unoccluded_pixels"]
                checked += alone > 0
    assert checked > 0


def test_visibility_fields_are_consistent(small_world: World):
    for _, view in small_world.views():
        for record in view["objects"]:
            assert 0.0 <= record["truncation"] <= 1.0
            if record["unoccluded_pixels"]:
                assert record["visibility"] == pytest.approx(
                    record["visible_pixels"] / record["unoccluded_pixels"], abs=1e-6
                )
            else:
                assert record["visibility"] == 0.0
            assert (record["bbox_px"] is None) == (record["visible_pixels"] == 0)
