"""Reader for ScanNet-style RGB-D scans (SensReader export: ``color/ depth/ pose/ intrinsic/``).

Frame names are not zero-padded; invalid poses are marked with ``-inf``. Returns the ``rgbd_frames``
and ``rgbd_scenes`` tables and a quarantine log.

Each frame's files are checked cheaply, since a scan has thousands of frames: the image headers (sizes)
are read, and a colour JPEG or depth PNG that was cut short (no end-of-image marker, no ``IEND`` chunk;
:func:`data_contracts.images.truncation_problem`) is quarantined, as is a frame lacking one of its files
(the reason names the missing file's path). An empty scan folder gives one quarantine record.

The scan's meta file ``<scene>.txt`` holds ``axisAlignment``, the 4x4 transform that turns the scan z-up
and axis-aligned (ScanNet's train and validation scans have it): it is kept as the scene's
``axis_alignment``, the gravity direction the DGE uses. A scan without one, or with one that is not a
rigid 4x4 matrix (logged with the file), has none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import SCANNET
from readers.common import listed_scan_folders, load_json, require_path
from readers.scan_tables import (
    ScanTables,
    frame_image_sizes,
    frame_row,
    rigid_pose_problem,
    scan_tables,
    scene_row,
)

__all__ = ["list_scannet_scenes", "read_matrix", "read_scannet", "read_scannet_scene", "rigid_pose_problem"]

logger = logging.getLogger(__name__)


def read_matrix(path: Path, size: int) -> np.ndarray:
    """Read a whitespace-separated ``size`` x ``size`` matrix (ScanNet pose and intrinsic files)."""
    values = np.array(path.read_text().split(), dtype=np.float64)
    if values.size != size * size:
        raise ValueError(f"{path} has {values.size} numbers, expected {size * size}")
    return values.reshape(size, size)


def read_axis_alignment(meta_path: Path) -> np.ndarray | None:
    """The ``axisAlignment`` 4x4 matrix of a ScanNet meta file (``<scene>.txt``), or None when there is none.

    A line that is not 16 numbers forming a rigid transform is logged as a warning naming the file, and
    the scan is read without it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     meta = Path(folder) / "scene0000_00.txt"
    ...     _ = meta.write_text("axisAlignment = 0 1 0 -2 -1 0 0 3 0 0 1 -0.05 0 0 0 1\\ncolorHeight = 968\\n")
    ...     read_axis_alignment(meta)[:3, :3].tolist()
    [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    if not meta_path.is_file():
        return None
    for line in meta_path.read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() != "axisAlignment":
            continue
        try:
            matrix = np.array(value.split(), dtype=np.float64).reshape(4, 4)
        except ValueError:
            logger.warning("%s: axisAlignment is not 16 numbers; the scan is read without it", meta_path)
            return None
        problem = rigid_pose_problem(matrix)
        if problem:
            logger.warning(
                "%s: axisAlignment is not usable (%s); the scan is read without it", meta_path, problem
            )
            return None
        return matrix
    return None


def _numeric_frames(folder: Path, suffixes: Iterable[str]) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if not folder.is_dir():
        return found
    for path in folder.iterdir():
        if path.suffix.lower() in suffixes and path.stem.isdigit():
            found[int(path.stem)] = path
    return found


FRAME_FILES = {
    "colour image": ("color", ".jpg"),
    "depth image": ("depth", ".png"),
    "pose file": ("pose", ".txt"),
}
"""Each file of a frame: its folder in the scan and its usual suffix (a ``color/`` image may also be
``.jpeg`` or ``.png``)."""
SCAN_SUBFOLDERS = ("color", "depth", "pose", "intrinsic")


def _expected_file(scene_dir: Path, name: str, index: int) -> Path:
    folder, suffix = FRAME_FILES[name]
    return scene_dir / folder / f"{index}{suffix}"


def _posed_sizes(
    record_id: str, colour: Path, depth: Path, pose_file: Path, log: QuarantineLog
) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]] | None:
    """A frame's camera-to-world pose and its colour and depth image sizes; None (quarantined) when the pose
    is unreadable or not rigid, or an image is unreadable."""
    try:
        pose = read_matrix(pose_file, 4)
    except ValueError as error:
        log.add(record_id, f"bad pose: {error}", source_file=str(pose_file))
        return None
    problem = rigid_pose_problem(pose)
    if problem:
        log.add(record_id, problem, source_file=str(pose_file), payload=pose.tolist())
        return None
    sizes = frame_image_sizes(record_id, colour, depth, log)
    if sizes is None:
        return None
    color_size, depth_size = sizes
    return pose, color_size, depth_size


def _aggregation_objects(aggregation: Path, log: QuarantineLog) -> list[dict]:
    """The labelled objects ``{object_id, label}`` of the scan's aggregation file (none when it is missing)."""
    objects = []
    if aggregation.exists():
        data = load_json(aggregation, log)
        for group in (data or {}).get("segGroups", []):
            objects.append(
                {
                    "object_id": int(group.get("objectId", group.get("id"))),
                    "label": str(group.get("label", "")),
                }
            )
    return objects


def read_scannet_scene(
    scene_dir: Path, *, source: str = SCANNET, depth_scale: float = 1000.0
) -> tuple[list[dict], dict | None, QuarantineLog]:
    """Read one ScanNet-style scene folder into frame rows and a scene row (None when unusable)."""
    scene_id = scene_dir.name
    log = QuarantineLog("rgbd_frames")
    if not any(path.is_file() for path in scene_dir.rglob("*")):
        log.add(
            scene_id,
            f"empty scan folder: {scene_dir} holds no file (a SensReader export has color/, depth/, pose/ "
            "and intrinsic/)",
            source_file=str(scene_dir),
        )
        return [], None, log
    try:
        color_k = read_matrix(scene_dir / "intrinsic" / "intrinsic_color.txt", 4)[:3, :3]
        depth_k = read_matrix(scene_dir / "intrinsic" / "intrinsic_depth.txt", 4)[:3, :3]
    except (FileNotFoundError, ValueError) as error:
        log.add(scene_id, f"bad intrinsics: {error}", source_file=str(scene_dir / "intrinsic"))
        return [], None, log
    colors = _numeric_frames(scene_dir / "color", (".jpg", ".jpeg", ".png"))
    depths = _numeric_frames(scene_dir / "depth", (".png",))
    poses = _numeric_frames(scene_dir / "pose", (".txt",))
    instances = _numeric_frames(scene_dir / "instance-filt", (".png",))
    frames = []
    sizes: dict[str, tuple[int, int]] = {}
    files = {"colour image": colors, "depth image": depths, "pose file": poses}
    for index in sorted(set(colors) | set(depths) | set(poses)):
        record_id = f"{scene_id}/{index}"
        missing = [name for name, found in files.items() if index not in found]
        if missing:
            expected = [_expected_file(scene_dir, name, index) for name in missing]
            log.add(
                record_id,
                "missing file: frame lacks its "
                + " and ".join(f"{name} {path}" for name, path in zip(missing, expected, strict=True)),
                source_file=str(expected[0]),
            )
            continue
        checked = _posed_sizes(record_id, colors[index], depths[index], poses[index], log)
        if checked is None:
            continue
        pose, color_size, depth_size = checked
        if sizes and (sizes["color"] != color_size or sizes["depth"] != depth_size):
            log.add(
                record_id, "image size differs from the scene's other frames", source_file=str(colors[index])
            )
            continue
        sizes = {"color": color_size, "depth": depth_size}
        frames.append(
            frame_row(
                scene_id=scene_id,
                frame_index=index,
                color_path=colors[index],
                depth_path=depths[index],
                instance_path=instances.get(index),
                depth_scale=depth_scale,
                color_size=color_size,
                depth_size=depth_size,
                color_intrinsics=color_k,
                depth_intrinsics=depth_k,
                pose=pose,
                source=source,
            )
        )
    if not frames:
        log.add(scene_id, "scene has no usable frame", source_file=str(scene_dir))
        return [], None, log
    aggregation = scene_dir / f"{scene_id}.aggregation.json"
    objects = _aggregation_objects(aggregation, log)
    mesh = scene_dir / f"{scene_id}_vh_clean_2.ply"
    segs = scene_dir / f"{scene_id}_vh_clean_2.0.010000.segs.json"
    alignment = read_axis_alignment(scene_dir / f"{scene_id}.txt")
    scene = scene_row(
        scene_id=scene_id,
        scene_dir=scene_dir,
        mesh_path=mesh if mesh.exists() else None,
        segs_path=segs if segs.exists() else None,
        aggregation_path=aggregation if aggregation.exists() else None,
        objects=objects,
        num_frames=len(frames),
        source=source,
        axis_alignment=alignment,
    )
    return frames, scene, log


def list_scannet_scenes(root: str | Path, config_field: str = "scannet_root") -> list[Path]:
    """The scan folders under a ScanNet ``scans`` folder (every folder, sorted by name), or ``[root]`` when
    ``root`` is itself one scan's folder (it holds ``color/``, ``depth/``, ``pose/`` or ``intrinsic/``) or
    holds no folder at all.

    A folder that is empty or lacks the export's files is listed too, so that :func:`read_scannet_scene`
    quarantines it with the reason instead of leaving it out unseen (an empty ``root`` included). A folder that
    is a symbolic link resolving outside ``root``, to it or to another scan's folder is left out with a warning
    (:func:`readers.common.listed_scan_folders`).
    """
    folder = require_path(root, config_field, "ScanNet scans folder")
    subfolders = sorted(path for path in folder.iterdir() if path.is_dir())
    if not subfolders or any((folder / name).is_dir() for name in SCAN_SUBFOLDERS):
        return [folder]
    return listed_scan_folders(subfolders, folder, "ScanNet")


def read_scannet(
    root: str | Path, *, source: str = SCANNET, config_field: str = "scannet_root"
) -> ScanTables:
    """Read every scan under a ScanNet ``scans`` folder, or the one scan whose folder ``root`` is.

    Every problem of a scan (an empty folder, bad intrinsics, a frame's missing, cut-short or non-rigid
    files) is a record of the returned quarantine log; the tables hold the scans and frames that are fine.
    """
    frames: list[dict] = []
    scenes: list[dict] = []
    log = QuarantineLog("rgbd_frames")
    for scene_dir in list_scannet_scenes(root, config_field):
        scene_frames, scene, scene_log = read_scannet_scene(scene_dir, source=source)
        frames.extend(scene_frames)
        if scene is not None:
            scenes.append(scene)
        log.extend(scene_log)
    logger.info("ScanNet %s: %d scenes, %d frames, %d quarantined", root, len(scenes), len(frames), len(log))
    return scan_tables(frames, scenes, log)
