"""The sample world's rooms as ARKitScenes 3dod videos and ScanNet++ scenes, each with its truth.

A room and its camera path (sampled as for the ScanNet-like scans) are rendered and written in the
public releases' layouts, traps included:

- **ARKitScenes** (``arkitscenes/3dod/<Training|Validation>/<video_id>/``): 256x192 colour and depth PNGs
  (depth uint16 mm on the colour grid) named ``<video_id>_<seconds>.png``, a ``.pincam`` per frame (one of
  them named 1 ms off its image), ``lowres_wide.traj`` holding world-to-camera axis-angle poses at more
  decimals and not 1:1 with the frames (lines between frames, one frame's line 3.2 ms off), the mesh and the
  oriented-box annotation (boxes a few centimetres loose in the realistic mode), all in a gravity-aligned world
  whose origin is not the floor and whose axes are turned from the room's; ``metadata.csv`` gives each video's
  ``sky_direction``: the videos take Left, Up, Right and Down in turn, so their frames are stored rotated
  (rendered upright, then turned) with their intrinsics and camera axes.
- **ScanNet++** (``scannetpp/data/<scene_id>/``): the iPhone stream as the toolkit extracts it, colour JPEGs
  at the world's size (4:3, a resized 1920x1440 video) and 256x192 depth PNGs, with gaps in the frame
  numbers; ``pose_intrinsic_imu.json`` with an entry for every video frame (``intrinsic`` of the 1920x1440
  video, ``pose`` in a raw world turned from the mesh's, ``aligned_pose`` in the mesh's); the aligned mesh
  with ``segments.json`` and ``segments_anno.json`` (``objectId`` = the room's object id + 1, oriented boxes).

The truth of each scan (:func:`layout_truth`) is in the room's frame (z up, floor at z = 0) like the ScanNet
scans', keyed by the partition key and the frame numbers the readers give, with the upright cameras, the
data set's object ids and the transform from the room to the scan's world (``world_from_room``).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from assets.sample_world.config import SampleWorldConfig
from assets.sample_world.realism import ScanNoise, misregistered_pose, noisy_depth
from assets.sample_world.render import MeshPiece, SceneRenderer, ViewRender
from assets.sample_world.scene import Scene, View, intrinsics_matrix, sample_views, yaw_rotation
from assets.sample_world.writers import (
    SegmentedMesh,
    depth_to_png_units,
    segmented_mesh,
    write_jpeg,
    write_json,
    write_ply,
    write_png,
)

ARKITSCENES_FRAME_SIZE = (256, 192)
"""ARKitScenes' low-resolution frames as stored (landscape), colour and depth on one grid."""
SKY_DIRECTIONS = ("Left", "Up", "Right", "Down")
"""The sky direction of the k-th ARKitScenes video: ``SKY_DIRECTIONS[k % 4]``."""
STORED_TURNS = {"Up": 0, "Left": 1, "Down": 2, "Right": 3}
"""Counter-clockwise quarter turns from the upright image to the stored one, by sky direction."""
FOLDS = ("Training", "Validation")
FRAME_PERIOD_MS = 700
"""Milliseconds between consecutive frames of an ARKitScenes video."""
SCANNETPP_VIDEO_SIZE = (1920, 1440)
SCANNETPP_DEPTH_SIZE = (256, 192)
SCANNETPP_FRAME_STEP = 10
"""Video frames between consecutive extracted ScanNet++ frames (the others are not extracted: gaps)."""


def world_transform(yaw: float, translation: tuple[float, float, float]) -> np.ndarray:
    """A 4x4 rigid transform: a turn of ``yaw`` about +z, then ``translation``."""
    transform = np.eye(4)
    transform[:3, :3] = yaw_rotation(yaw)
    transform[:3, 3] = translation
    return transform


def arkitscenes_video_id(seed: int, scene_index: int) -> str:
    """An 8-digit video id, like ARKitScenes'.

    >>> arkitscenes_video_id(0, 12)
    '47000012'
    """
    return f"{47_000_000 + (seed % 1000) * 1000 + scene_index % 1000}"


def scannetpp_scene_name(seed: int, scene_index: int) -> str:
    """A 10-hex-digit scene id, like ScanNet++'s (a hash of the seed and the scene index)."""
    return hashlib.sha256(f"sample world {seed} {scene_index}".encode()).hexdigest()[:10]


def stored_intrinsics(upright: np.ndarray, upright_size: tuple[int, int], turns: int) -> np.ndarray:
    """The intrinsics of the stored image: the upright image turned ``turns`` times counter-clockwise (a turn
    maps pixel ``(u, v)`` of a ``W``-wide image to ``(v, W - 1 - u)``).

    >>> stored_intrinsics(np.array([[200.0, 0, 95.5], [0, 210, 127.5], [0, 0, 1]]), (192, 256), 1).tolist()
    [[210.0, 0.0, 127.5], [0.0, 200.0, 95.5], [0.0, 0.0, 1.0]]
    """
    fx, fy, cx, cy = upright[0, 0], upright[1, 1], upright[0, 2], upright[1, 2]
    width, height = upright_size
    for _ in range(turns % 4):
        fx, fy, cx, cy = fy, fx, cy, width - 1 - cx
        width, height = height, width
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def stored_pose(upright_pose: np.ndarray, turns: int) -> np.ndarray:
    """The camera-to-world pose of the stored image's camera: a counter-clockwise image turn makes the stored
    camera's x the upright camera's y (down) and its y the upright camera's -x (left)."""
    pose = np.array(upright_pose, dtype=np.float64)
    for _ in range(turns % 4):
        right, down = pose[:3, 0].copy(), pose[:3, 1].copy()
        pose[:3, 0], pose[:3, 1] = down, -right
    return pose


def _view_objects(render: ViewRender, ids: dict[int, int]) -> list[dict]:
    return [
        {
            "object_id": ids[object_id],
            "visible_pixels": item.visible_pixels,
            "unoccluded_pixels": item.unoccluded_pixels,
            "visibility": round(item.visibility, 6),
            "bbox_px": None if item.bbox_px is None else list(item.bbox_px),
            "truncation": round(item.truncation, 6),
            "truncated": item.truncated,
        }
        for object_id, item in sorted(render.objects.items())
    ]


def _layout_view_record(view: View, render: ViewRender, object_ids: dict[int, int]) -> dict:
    """The truth of one upright view of a scan: its frame number, sizes, intrinsics, pose and objects (depth in mm)."""
    return {
        "frame_index": view.frame_index,
        "width": view.width,
        "height": view.height,
        "depth_width": view.depth_width,
        "depth_height": view.depth_height,
        "depth_scale": 1000.0,
        "color_intrinsics": _matrix(view.color_intrinsics),
        "depth_intrinsics": _matrix(view.depth_intrinsics),
        "pose": _matrix(view.pose),
        "objects": _view_objects(render, object_ids),
    }


def _matrix(values: np.ndarray) -> list[list[float]]:
    return [[float(value) for value in row] for row in np.asarray(values)]


@dataclass
class LayoutScan:
    """One room written in a data set's layout: its truth record and its row of the data set's index file."""

    truth: dict
    index_row: dict


def layout_truth(
    dataset: str,
    scene_id: str,
    scene: Scene,
    object_truth: list[dict],
    object_ids: dict[int, int],
    world_from_room: np.ndarray,
    view_records: list[dict],
    **details: object,
) -> dict:
    """The truth record of a scan written in another layout (see the module docstring)."""
    objects = [{**item, "object_id": object_ids[item["object_id"]]} for item in object_truth]
    return {
        "dataset": dataset,
        "scene_id": scene_id,
        "scene_index": scene.scene_index,
        "scene_type": scene.scene_type,
        "room": {"width": scene.room.width, "depth": scene.room.depth, "height": scene.room.height},
        "floor_plane": [0.0, 0.0, 1.0, 0.0],
        "world_from_room": _matrix(world_from_room),
        **details,
        "objects": objects,
        "views": view_records,
    }


def _loose_box(item: dict, world: np.ndarray, rng: np.random.Generator, realistic: bool) -> dict:
    """An object's oriented box in the scan's world (``centroid``, ``axesLengths``, ``normalizedAxes`` as rows),
    a few centimetres loose and off centre in the realistic mode, as annotators draw them."""
    rotation = world[:3, :3] @ np.asarray(item["obb"]["rotation"], dtype=np.float64)
    centre = np.asarray(item["centroid"], dtype=np.float64)
    lengths = np.asarray(item["extents"], dtype=np.float64)
    if realistic:
        lengths = lengths + rng.uniform(0.01, 0.04, 3)
        centre = centre + rng.normal(0.0, 0.005, 3)
    return {
        "centroid": [round(float(v), 6) for v in world[:3, :3] @ centre + world[:3, 3]],
        "axesLengths": [round(float(v), 6) for v in lengths],
        "normalizedAxes": [round(float(v), 6) for v in rotation.T.ravel()],
    }


def _world_mesh(
    pieces: list[MeshPiece], scene: Scene, world: np.ndarray, noise: ScanNoise | None
) -> tuple[SegmentedMesh, np.ndarray]:
    mesh = segmented_mesh(scene, pieces, noise)
    vertices = mesh.vertices.astype(np.float64) @ world[:3, :3].T + world[:3, 3]
    return mesh, vertices.astype(np.float32)


def _write_pincam(
    frames: Path, video_id: str, stamp: int, stored_size: tuple[int, int], intrinsics: np.ndarray
) -> None:
    """Write the ``.pincam`` intrinsics file of the stored frame at ``stamp`` (ms): size, focal lengths, centre."""
    pincam = frames / "lowres_wide_intrinsics" / f"{video_id}_{stamp // 1000}.{stamp % 1000:03d}.pincam"
    pincam.parent.mkdir(parents=True, exist_ok=True)
    pincam.write_text(
        f"{stored_size[0]} {stored_size[1]} {intrinsics[0, 0]:.6f} {intrinsics[1, 1]:.6f} {intrinsics[0, 2]:.6f} "
        f"{intrinsics[1, 2]:.6f}\n"
    )


def _write_trajectory(path: Path, trajectory: list[tuple[float, np.ndarray]]) -> None:
    """Write ``lowres_wide.traj``: per line a time (s) and the world-to-camera axis-angle rotation and translation."""
    lines = []
    for timestamp, camera in sorted(trajectory, key=lambda entry: entry[0]):
        world_to_camera = np.linalg.inv(camera)
        rotation = Rotation.from_matrix(world_to_camera[:3, :3]).as_rotvec()
        numbers = [*rotation, *world_to_camera[:3, 3]]
        lines.append(f"{timestamp:.6f} " + " ".join(f"{value:.8f}" for value in numbers))
    path.write_text("\n".join(lines) + "\n")


def _arkitscenes_annotation(
    video_id: str, object_truth: list[dict], world: np.ndarray, box_rng: np.random.Generator, realistic: bool
) -> dict:
    """The ``<video_id>_3dod_annotation.json`` of a video: each object's label and oriented box in the world."""
    return {
        "data": [
            {
                "uid": hashlib.sha256(f"{video_id}/{item['object_id']}".encode()).hexdigest()[:32],
                "label": item["category"],
                "attributes": {},
                "segments": {"obbAligned": _loose_box(item, world, box_rng, realistic)},
            }
            for item in object_truth
        ],
        "stats": {"numSegments": len(object_truth)},
    }


def write_arkitscenes_video(
    config: SampleWorldConfig,
    scene: Scene,
    ordinal: int,
    root: Path,
    renderer: SceneRenderer,
    object_truth: list[dict],
) -> LayoutScan:
    """Write one room as the ``ordinal``-th ARKitScenes video under ``root`` (the ``3dod`` folder)."""
    video_id = arkitscenes_video_id(config.seed, scene.scene_index)
    sky = SKY_DIRECTIONS[ordinal % len(SKY_DIRECTIONS)]
    turns = STORED_TURNS[sky]
    fold = FOLDS[ordinal % len(FOLDS)]
    folder = root / fold / video_id
    frames = folder / f"{video_id}_frames"
    world = world_transform(0.4 + 0.7 * ordinal, (1.3, -0.8, -1.35 - 0.05 * ordinal))
    realistic = config.scan_realism == "realistic"
    noise = ScanNoise() if realistic else None
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 4]))
    stored_size = ARKITSCENES_FRAME_SIZE
    upright_size = (stored_size[1], stored_size[0]) if turns % 2 else stored_size
    focal = stored_size[0] / (2.0 * math.tan(math.radians(config.horizontal_fov_degrees) / 2.0))
    upright_k = intrinsics_matrix(focal, (upright_size[0] - 1) / 2.0, (upright_size[1] - 1) / 2.0)
    pincam_k = stored_intrinsics(upright_k, upright_size, turns)
    start_ms = 1_000_000 + 37_000 * ordinal
    trajectory: list[tuple[float, np.ndarray]] = []
    view_records = []
    for index, base in enumerate(sample_views(config, scene)):
        stamp = start_ms + FRAME_PERIOD_MS * index
        view = View(stamp, *upright_size, *upright_size, upright_k, upright_k, base.pose)
        render = renderer.render(view, config.truncation_stride)
        depth, recorded = render.depth, view.pose
        if noise is not None:
            depth = noisy_depth(depth, rng, noise)
            recorded = misregistered_pose(recorded, rng, noise)
        name = f"{video_id}_{stamp // 1000}.{stamp % 1000:03d}"
        write_png(frames / "lowres_wide" / f"{name}.png", np.rot90(render.rgb, turns))
        write_png(frames / "lowres_depth" / f"{name}.png", np.rot90(depth_to_png_units(depth), turns))
        pincam_stamp = stamp - 1 if index == 1 else stamp  # one intrinsics file named 1 ms off its image
        _write_pincam(frames, video_id, pincam_stamp, stored_size, pincam_k)
        camera = world @ stored_pose(recorded, turns)
        offset_s = (
            0.0032 if index == 2 else 0.0004
        )  # one frame's pose 3.2 ms off (within 5 ms), the rest < 0.5 ms
        trajectory.append((stamp / 1000.0 + offset_s, camera))
        trajectory.append((stamp / 1000.0 + 0.35, camera))  # a line between frames, matching none
        view_records.append(
            _layout_view_record(view, render, {item.object_id: item.object_id for item in scene.objects})
        )
    _write_trajectory(frames / "lowres_wide.traj", trajectory)
    mesh, vertices = _world_mesh(renderer.pieces, scene, world, None)
    write_ply(folder / f"{video_id}_3dod_mesh.ply", vertices, mesh.colors, mesh.triangles)
    box_rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 5]))
    write_json(
        folder / f"{video_id}_3dod_annotation.json",
        _arkitscenes_annotation(video_id, object_truth, world, box_rng, realistic),
    )
    truth = layout_truth(
        "arkitscenes",
        f"arkitscenes_{video_id}",
        scene,
        object_truth,
        {item["object_id"]: item["object_id"] for item in object_truth},
        world,
        view_records,
        video_id=video_id,
        sky_direction=sky,
        fold=fold,
    )
    return LayoutScan(
        truth,
        {
            "video_id": video_id,
            "visit_id": str(420_000 + scene.scene_index),
            "fold": fold,
            "sky_direction": sky,
        },
    )


def _scannetpp_pose_entries(
    recorded_poses: dict[int, np.ndarray], world: np.ndarray, raw_world: np.ndarray, video_k: np.ndarray
) -> dict[str, dict]:
    """``pose_intrinsic_imu.json``: an entry for every video frame up to the last extracted one (and one more),
    each with the pose of the nearest extracted frame."""
    extracted = sorted(recorded_poses)
    entries = {}
    for frame in range(extracted[-1] + 2):  # every video frame has an entry; only every 10th was extracted
        nearest = min(extracted, key=lambda index: abs(index - frame))
        aligned = world @ recorded_poses[nearest]
        entries[f"frame_{frame:06d}"] = {
            "timestamp": round(frame / 60.0, 6),
            "intrinsic": _matrix(video_k),
            "pose": _matrix(raw_world @ aligned),
            "aligned_pose": _matrix(aligned),
            "imu": {"gravity": [0.0, -9.81, 0.0], "rotation_rate": [0.0, 0.0, 0.0]},
        }
    return entries


def _scannetpp_segment_groups(
    mesh: SegmentedMesh, object_truth: list[dict], world: np.ndarray, box_rng: np.random.Generator
) -> list[dict]:
    """The ``segGroups`` of ``segments_anno.json``: each annotated object's segments and, when it has a truth
    record, its oriented box in the world."""
    truth_by_id = {item["object_id"]: item for item in object_truth}
    groups = []
    for object_id, label in mesh.annotated:
        group = {
            "id": object_id + 1,
            "objectId": object_id + 1,
            "label": label,
            "segments": mesh.object_segments[object_id],
        }
        if object_id in truth_by_id:
            group["obb"] = _loose_box(truth_by_id[object_id], world, box_rng, False)
        groups.append(group)
    return groups


def write_scannetpp_scene(
    config: SampleWorldConfig,
    scene: Scene,
    ordinal: int,
    root: Path,
    renderer: SceneRenderer,
    object_truth: list[dict],
) -> LayoutScan:
    """Write one room as the ``ordinal``-th ScanNet++ scene under ``root`` (the folder of ``data/``)."""
    name = scannetpp_scene_name(config.seed, scene.scene_index)
    folder = root / "data" / name
    iphone = folder / "iphone"
    world = world_transform(-0.25 - 0.3 * ordinal, (-1.1, 0.6, 0.0))
    raw_world = world_transform(1.1, (0.2, 0.3, 0.5))
    raw_world[:3, :3] = raw_world[:3, :3] @ np.array(
        [[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]]
    )  # y up, as ARKit's
    realistic = config.scan_realism == "realistic"
    noise = ScanNoise() if realistic else None
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 6]))
    colour_size = (config.width, config.height)
    focal = config.width / (2.0 * math.tan(math.radians(config.horizontal_fov_degrees) / 2.0))
    colour_k = intrinsics_matrix(focal, (config.width - 1) / 2.0, (config.height - 1) / 2.0)
    depth_k = colour_k * np.array(
        [[SCANNETPP_DEPTH_SIZE[0] / config.width], [SCANNETPP_DEPTH_SIZE[1] / config.height], [1.0]]
    )
    video_k = colour_k * np.array(
        [[SCANNETPP_VIDEO_SIZE[0] / config.width], [SCANNETPP_VIDEO_SIZE[1] / config.height], [1.0]]
    )
    object_ids = {item["object_id"]: item["object_id"] + 1 for item in object_truth}
    recorded_poses: dict[int, np.ndarray] = {}
    view_records = []
    for index, base in enumerate(sample_views(config, scene)):
        frame = 3 + SCANNETPP_FRAME_STEP * index
        view = View(frame, *colour_size, *SCANNETPP_DEPTH_SIZE, colour_k, depth_k, base.pose)
        render = renderer.render(view, config.truncation_stride)
        depth, recorded = render.depth, view.pose
        if noise is not None:
            depth = noisy_depth(depth, rng, noise)
            recorded = misregistered_pose(recorded, rng, noise)
        recorded_poses[frame] = recorded
        write_jpeg(iphone / "rgb" / f"frame_{frame:06d}.jpg", render.rgb, config.jpeg_quality)
        write_png(iphone / "depth" / f"frame_{frame:06d}.png", depth_to_png_units(depth))
        view_records.append(_layout_view_record(view, render, object_ids))
    write_json(
        iphone / "pose_intrinsic_imu.json", _scannetpp_pose_entries(recorded_poses, world, raw_world, video_k)
    )
    mesh, vertices = _world_mesh(renderer.pieces, scene, world, noise)
    scans = folder / "scans"
    write_ply(scans / "mesh_aligned_0.05.ply", vertices, mesh.colors, mesh.triangles)
    write_json(scans / "segments.json", {"sceneId": name, "segIndices": mesh.segment_of_vertex.tolist()})
    box_rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 7]))
    groups = _scannetpp_segment_groups(mesh, object_truth, world, box_rng)
    write_json(scans / "segments_anno.json", {"sceneId": name, "segGroups": groups})
    truth = layout_truth(
        "scannetpp",
        f"scannetpp_{name}",
        scene,
        object_truth,
        object_ids,
        world,
        view_records,
        scannetpp_scene=name,
    )
    return LayoutScan(
        truth, {"scene_id": name, "split": "nvs_sem_train" if ordinal % 2 == 0 else "nvs_sem_val"}
    )


def write_index_files(
    arkitscenes_root: Path, videos: list[dict], scannetpp_root: Path, scenes: list[dict]
) -> None:
    """ARKitScenes' ``3dod/metadata.csv`` and ScanNet++'s ``splits/<split>.txt`` of the written scans."""
    if videos:
        columns = ["video_id", "visit_id", "sky_direction", "fold"]
        arkitscenes_root.mkdir(parents=True, exist_ok=True)
        rows = [",".join(columns)] + [",".join(str(video[column]) for column in columns) for video in videos]
        (arkitscenes_root / "metadata.csv").write_text("\n".join(rows) + "\n")
    if scenes:
        splits = scannetpp_root / "splits"
        splits.mkdir(parents=True, exist_ok=True)
        for split in ("nvs_sem_train", "nvs_sem_val"):
            names = [scene["scene_id"] for scene in scenes if scene["split"] == split]
            (splits / f"{split}.txt").write_text("".join(f"{name}\n" for name in names))
