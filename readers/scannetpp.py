"""Reader for ScanNet++ scenes (``<root>/data/<scene_id>/``): the iPhone stream as the official toolkit
extracts it, with the outputs of :mod:`readers.scannet` (:mod:`readers.scan_tables`).

A scene folder holds ``iphone/rgb/frame_%06d.jpg`` (every video frame, or only the COLMAP-registered ones
keeping their index, so with gaps), ``iphone/depth/frame_%06d.png`` (uint16 mm, 256x192, 0 = invalid; depth
frame k is video frame k), ``iphone/pose_intrinsic_imu.json`` (per ``frame_%06d``: ``intrinsic`` 3x3 of the
1920x1440 video, ``pose`` in the raw ARKit world, ``aligned_pose`` camera-to-world in the aligned mesh's
frame) and ``scans/{mesh_aligned_0.05.ply, segments.json, segments_anno.json}``.

The traps, each handled here:

- **Poses.** ``aligned_pose`` is used (camera-to-world, OpenCV axes, the mesh's frame); ``pose`` is in the
  raw ARKit world and does not fit the mesh. A frame without an entry or an ``aligned_pose`` is
  quarantined.
- **Resolutions.** ``intrinsic`` is for the 1920x1440 video (:data:`IPHONE_VIDEO_SIZE`): it is scaled to the
  colour images' size (1 for the toolkit's full-size frames) and to the depth images' (256/1920); colour
  frames that are not 4:3 are quarantined.
- **Units and up.** Depth is millimetres (``depth_scale`` 1000). The aligned mesh has +z up (``world_up``).
- **Missing files.** A scene without its poses, mesh, ``segments.json`` or ``segments_anno.json`` fails
  (:class:`readers.common.MissingInputError`, one sentence naming the file); a frame without its depth image
  is quarantined.

The pose file lists every video frame (imu included) and can be large: it is streamed (``ijson``) and only
the entries of extracted colour frames are kept.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import ijson
import numpy as np

from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import SCANNETPP
from readers.common import (
    TEXT_ENCODING,
    MissingInputError,
    listed_scan_folders,
    require_path,
    skip_byte_order_mark,
)
from readers.scan_tables import (
    frame_image_sizes,
    frame_row,
    oriented_box,
    rigid_pose_problem,
    scene_row,
)

logger = logging.getLogger(__name__)

CONFIG_FIELD = "scannetpp_root"
KEY_PREFIX = "scannetpp_"
"""Partition keys (and ``scene_id``) of ScanNet++ scenes: ``scannetpp_<scene_id>``."""
IPHONE_VIDEO_SIZE = (1920, 1440)
"""The iPhone video's size, for which ``pose_intrinsic_imu.json``'s ``intrinsic`` is given."""
WORLD_UP = (0.0, 0.0, 1.0)
"""ScanNet++'s aligned mesh has +z up."""
FRAME_NAME = re.compile(r"^frame_(\d+)$")
SCENE_FILES = {
    "poses": ("iphone", "pose_intrinsic_imu.json"),
    "mesh": ("scans", "mesh_aligned_0.05.ply"),
    "segments": ("scans", "segments.json"),
    "annotation": ("scans", "segments_anno.json"),
}
"""The files a scene needs, by role: its folder inside the scene and its name."""


def scene_id_of(scene_name: str) -> str:
    """The ``scene_id`` and partition key of a scene folder.

    >>> scene_id_of("0a5c013435")
    'scannetpp_0a5c013435'
    """
    return f"{KEY_PREFIX}{scene_name}"


def scene_inputs(folder: Path) -> list[Path]:
    """What the reader reads of a scene (what its raw-file version fingerprints): the extracted colour and
    depth frames and the files of :data:`SCENE_FILES` (not ``rgb.mkv``, ``depth.bin`` or the DSLR images)."""
    return [folder / "iphone" / "rgb", folder / "iphone" / "depth"] + [
        folder.joinpath(*parts) for parts in SCENE_FILES.values()
    ]


def list_scannetpp_scenes(root: str | Path) -> list[Path]:
    """The scene folders of a ScanNet++ root (the folder holding ``data/`` and ``splits/``), of its ``data/``
    folder, or ``[root]`` when it is one scene's folder (it holds ``iphone/`` or ``scans/``); sorted by name. A
    scene folder that is a symbolic link is left out with a warning when it resolves outside ``root``, to it,
    or to (into, above) another scene's folder (:func:`readers.common.listed_scan_folders`).

    Raises:
        MissingInputError: when ``root`` does not exist.
    """
    folder = require_path(root, CONFIG_FIELD, "ScanNet++ folder")
    if (folder / "iphone").is_dir() or (folder / "scans").is_dir():
        return [folder]
    data = folder / "data" if (folder / "data").is_dir() else folder
    return listed_scan_folders(sorted(path for path in data.iterdir() if path.is_dir()), folder, "ScanNet++")


def _frame_files(folder: Path, suffix: str) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if folder.is_dir():
        for path in folder.iterdir():
            match = FRAME_NAME.match(path.stem)
            if match and path.suffix.lower() == suffix:
                found[int(match.group(1))] = path
    return found


def read_pose_entries(path: Path, names: set[str]) -> dict[str, dict]:
    """The entries of ``pose_intrinsic_imu.json`` whose key is in ``names``, streamed (the others are skipped).

    Raises:
        MissingInputError: naming the file when it is not a JSON object.
    """
    entries: dict[str, dict] = {}
    try:
        with path.open("rb") as handle:
            for key, value in ijson.kvitems(skip_byte_order_mark(handle), "", use_float=True):
                if key in names:
                    entries[key] = value
    except (ijson.JSONError, OSError) as error:
        raise MissingInputError(
            f"ScanNet++ pose file {path} cannot be read ({error}); extract it again with the toolkit.",
            location=path,
            config_field=CONFIG_FIELD,
        ) from error
    return entries


def _matrix(value: object, size: int) -> np.ndarray | None:
    try:
        matrix = np.asarray(value, dtype=np.float64).reshape(size, size)
    except (TypeError, ValueError):
        return None
    return matrix


def scaled_intrinsics(intrinsics: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The video's intrinsics scaled to an image of ``size`` (width, height).

    >>> scaled_intrinsics(np.array([[1440.0, 0, 960], [0, 1440, 720], [0, 0, 1]]), (256, 192)).round(3).tolist()
    [[192.0, 0.0, 128.0], [0.0, 192.0, 96.0], [0.0, 0.0, 1.0]]
    """
    scaled = np.asarray(intrinsics, dtype=np.float64).copy()
    scaled[0] *= size[0] / IPHONE_VIDEO_SIZE[0]
    scaled[1] *= size[1] / IPHONE_VIDEO_SIZE[1]
    return scaled


def _read_objects(path: Path, scene_id: str, log: QuarantineLog) -> list[dict]:
    """``segments_anno.json``'s segGroups as ``{object_id, label, box}`` in file order; a group without an
    ``objectId`` or repeating one is quarantined.

    Raises:
        MissingInputError: when the file cannot be parsed or has no ``segGroups`` list.
    """
    try:
        groups = json.loads(path.read_text(encoding=TEXT_ENCODING)).get("segGroups")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError) as error:
        raise MissingInputError(
            f"ScanNet++ annotation {path} cannot be read ({error}); restore the file.",
            location=path,
            config_field=CONFIG_FIELD,
        ) from error
    if not isinstance(groups, list):
        raise MissingInputError(
            f"ScanNet++ annotation {path} has no 'segGroups' list; restore the file.",
            location=path,
            config_field=CONFIG_FIELD,
        )
    objects, seen = [], set()
    for index, group in enumerate(groups):
        object_id = group.get("objectId", group.get("id")) if isinstance(group, dict) else None
        if (
            not isinstance(object_id, int)
            or isinstance(object_id, bool)
            or object_id < 0
            or object_id in seen
        ):
            log.add(
                f"{scene_id}/object/{index}",
                f"segGroups[{index}] has no usable objectId ({object_id!r}: missing, negative or repeated)",
                source_file=str(path),
            )
            continue
        seen.add(object_id)
        box = None
        if group.get("obb") is not None:
            try:
                box = oriented_box(group["obb"], f"segGroups[{index}]")
            except ValueError as error:
                logger.warning("%s: %s; the object is kept without its box", scene_id, error)
        objects.append({"object_id": object_id, "label": str(group.get("label") or ""), "box": box})
    return objects


def _required(folder: Path, role: str, scene_name: str) -> Path:
    path = folder.joinpath(*SCENE_FILES[role])
    if not path.is_file():
        raise MissingInputError(
            f"ScanNet++ scene {scene_name} has no {role} file: {path} is missing; download it (and extract the "
            "iPhone stream with the toolkit), or delete the scene's folder and its `scenes` partition.",
            location=path,
            config_field=CONFIG_FIELD,
        )
    return path


def _pose_and_intrinsics(
    record_id: str, name: str, entries: dict[str, dict], poses_path: Path, log: QuarantineLog
) -> tuple[np.ndarray, np.ndarray] | None:
    """The frame's rigid camera-to-world pose and its video intrinsics from the pose file's entry ``name``;
    None (quarantined) when the entry, its pose or its intrinsics are missing, or the pose is not rigid."""
    entry = entries.get(name)
    if entry is None:
        log.add(record_id, f"no pose: {poses_path} has no entry {name}", source_file=str(poses_path))
        return None
    pose = _matrix(entry.get("aligned_pose"), 4)
    intrinsics = _matrix(entry.get("intrinsic"), 3)
    if pose is None or intrinsics is None:
        missing = "aligned_pose" if pose is None else "intrinsic"
        log.add(
            record_id,
            f"no pose: {name} in {poses_path} has no 4x4 {missing}",
            source_file=str(poses_path),
        )
        return None
    problem = rigid_pose_problem(pose)
    if problem:
        log.add(record_id, problem, source_file=str(poses_path), payload=pose.tolist())
        return None
    return pose, intrinsics


def _image_sizes(
    record_id: str, colour: Path, depth: Path, log: QuarantineLog
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The frame's colour and depth image sizes; None (quarantined) when an image is unreadable or the colour
    image is not 4:3 like the video its intrinsics are given for."""
    sizes = frame_image_sizes(record_id, colour, depth, log)
    if sizes is None:
        return None
    colour_size, depth_size = sizes
    if colour_size[0] * IPHONE_VIDEO_SIZE[1] != colour_size[1] * IPHONE_VIDEO_SIZE[0]:
        log.add(
            record_id,
            f"colour image is {colour_size[0]}x{colour_size[1]}, not 4:3 like the 1920x1440 video its "
            "intrinsics are given for",
            source_file=str(colour),
        )
        return None
    return colour_size, depth_size


def read_scannetpp_scene(
    folder: Path, source: str = SCANNETPP
) -> tuple[list[dict], dict | None, QuarantineLog]:
    """Read one scene folder into frame rows and a scene row (None when no frame is usable).

    Raises:
        MissingInputError: when the poses, the mesh, the segments, the annotation or the extracted colour
            frames are missing, or the pose or annotation file cannot be parsed (one sentence naming the file).
    """
    scene_name = folder.name
    scene_id = scene_id_of(scene_name)
    log = QuarantineLog("rgbd_frames")
    poses_path = _required(folder, "poses", scene_name)
    mesh = _required(folder, "mesh", scene_name)
    segments = _required(folder, "segments", scene_name)
    annotation = _required(folder, "annotation", scene_name)
    colours = _frame_files(folder / "iphone" / "rgb", ".jpg")
    if not colours:
        raise MissingInputError(
            f"ScanNet++ scene {scene_name} has no extracted colour frame in {folder / 'iphone' / 'rgb'}: extract "
            "the iPhone stream with the toolkit (python -m iphone.prepare_iphone_data).",
            location=folder / "iphone" / "rgb",
            config_field=CONFIG_FIELD,
        )
    depths = _frame_files(folder / "iphone" / "depth", ".png")
    objects = _read_objects(annotation, scene_id, log)
    entries = read_pose_entries(poses_path, {f"frame_{index:06d}" for index in colours})
    frames = []
    sizes: tuple[tuple[int, int], tuple[int, int]] | None = None
    for index in sorted(colours):
        record_id, name, colour = f"{scene_id}/{index}", f"frame_{index:06d}", colours[index]
        depth = depths.get(index)
        if depth is None:
            expected = folder / "iphone" / "depth" / f"{name}.png"
            log.add(
                record_id, f"missing file: frame lacks its depth image {expected}", source_file=str(expected)
            )
            continue
        camera = _pose_and_intrinsics(record_id, name, entries, poses_path, log)
        if camera is None:
            continue
        pose, intrinsics = camera
        frame_sizes = _image_sizes(record_id, colour, depth, log)
        if frame_sizes is None:
            continue
        colour_size, depth_size = frame_sizes
        if sizes is not None and sizes != (colour_size, depth_size):
            log.add(record_id, "image size differs from the scene's other frames", source_file=str(colour))
            continue
        sizes = (colour_size, depth_size)
        frames.append(
            frame_row(
                scene_id=scene_id,
                frame_index=index,
                color_path=colour,
                depth_path=depth,
                color_size=colour_size,
                depth_size=depth_size,
                color_intrinsics=scaled_intrinsics(intrinsics, colour_size),
                depth_intrinsics=scaled_intrinsics(intrinsics, depth_size),
                pose=pose,
                source=source,
            )
        )
    if not frames:
        log.add(scene_id, "scene has no usable frame", source_file=str(folder / "iphone"))
        return [], None, log
    scene = scene_row(
        scene_id=scene_id,
        scene_dir=folder,
        mesh_path=mesh,
        segs_path=segments,
        aggregation_path=annotation,
        objects=objects,
        num_frames=len(frames),
        world_up=WORLD_UP,
        source=source,
    )
    logger.info("%s: %d frames, %d objects, %d quarantined", scene_id, len(frames), len(objects), len(log))
    return frames, scene, log
