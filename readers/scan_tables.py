"""What every RGB-D scan reader returns, and the checks they share.

The readers of ScanNet (:mod:`readers.scannet`), ARKitScenes (:mod:`readers.arkitscenes`) and ScanNet++
(:mod:`readers.scannetpp`) give the same rows: one ``rgbd_frames`` row per usable frame (file paths,
upright sizes, colour and depth intrinsics, camera-to-world pose in OpenCV axes, depth units) and one
``rgbd_scenes`` row per scan, built by :func:`frame_row` and :func:`scene_row`, so everything after
``rgbd_frames`` is shared. Bad frames go to the quarantine log with the reason and the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
from PIL import Image, UnidentifiedImageError

from data_contracts import rgbd_frames, rgbd_scenes
from data_contracts.images import truncation_problem
from data_contracts.quarantine import QuarantineLog
from data_contracts.validation import polars_schema

RIGID_TOLERANCE = 1e-3
DEPTH_MILLIMETRES = 1000.0
"""``depth_scale`` of 16-bit depth images in millimetres (all three data sets)."""


@dataclass
class ScanTables:
    """What a scan reader returns: the ``rgbd_frames`` and ``rgbd_scenes`` rows and the quarantine log."""

    frames: pl.DataFrame
    scenes: pl.DataFrame
    quarantine: QuarantineLog


def scan_tables(frames: Sequence[dict], scenes: Sequence[dict], log: QuarantineLog) -> ScanTables:
    """:class:`ScanTables` of the rows (dicts from :func:`frame_row` and :func:`scene_row`)."""
    return ScanTables(
        frames=pl.DataFrame(list(frames), schema=polars_schema(rgbd_frames.RgbdFrames)),
        scenes=pl.DataFrame(list(scenes), schema=polars_schema(rgbd_scenes.RgbdScenes)),
        quarantine=log,
    )


def rigid_pose_problem(pose: np.ndarray, tolerance: float = RIGID_TOLERANCE) -> str:
    """Empty string when ``pose`` is a finite rigid 4x4 transform, else why it is not.

    >>> rigid_pose_problem(np.eye(4))
    ''
    >>> rigid_pose_problem(np.diag([2.0, 1.0, 1.0, 1.0]))
    'pose is not rigid: rotation part is not orthonormal'
    """
    if pose.shape != (4, 4):
        return f"pose has shape {pose.shape}, expected 4x4"
    if not np.all(np.isfinite(pose)):
        return "pose is not finite (ScanNet marks invalid poses with -inf)"
    rotation = pose[:3, :3]
    if not np.allclose(rotation.T @ rotation, np.eye(3), atol=tolerance):
        return "pose is not rigid: rotation part is not orthonormal"
    if abs(np.linalg.det(rotation) - 1.0) > tolerance:
        return "pose is not rigid: rotation has determinant != 1"
    if not np.allclose(pose[3], [0.0, 0.0, 0.0, 1.0], atol=1e-6):
        return "pose is not rigid: last row is not [0, 0, 0, 1]"
    return ""


def image_size(path: Path) -> tuple[tuple[int, int] | None, str]:
    """The ``(width, height)`` of an image file from its header, and ``""``; or ``None`` and why the file is
    unusable (a header PIL cannot read, or a JPEG or PNG cut short: :func:`data_contracts.images.truncation_problem`)."""
    try:
        with Image.open(path) as image:
            size = image.size
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        return None, f"corrupt image: {path}: {error}"
    problem = truncation_problem(path)
    return (None, problem) if problem else (size, "")


def frame_image_sizes(
    record_id: str, colour: Path, depth: Path, log: QuarantineLog
) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """A frame's colour and depth image sizes (:func:`image_size`); None when either image is unusable, which
    is quarantined under ``record_id`` naming that file."""
    colour_size, problem = image_size(colour)
    if colour_size is None:
        log.add(record_id, problem, source_file=str(colour))
        return None
    depth_size, problem = image_size(depth)
    if depth_size is None:
        log.add(record_id, problem, source_file=str(depth))
        return None
    return colour_size, depth_size


def upright_size(size: tuple[int, int], turns: int) -> tuple[int, int]:
    """The ``(width, height)`` of a stored image after ``turns`` quarter turns.

    >>> upright_size((256, 192), 1), upright_size((256, 192), 2)
    ((192, 256), (256, 192))
    """
    return (size[1], size[0]) if turns % 2 else size


def frame_row(
    *,
    scene_id: str,
    frame_index: int,
    color_path: Path,
    depth_path: Path,
    color_size: tuple[int, int],
    depth_size: tuple[int, int],
    color_intrinsics: np.ndarray,
    depth_intrinsics: np.ndarray,
    pose: np.ndarray,
    source: str,
    instance_path: Path | None = None,
    depth_scale: float = DEPTH_MILLIMETRES,
    upright_turns: int = 0,
) -> dict:
    """One ``rgbd_frames`` row: sizes, intrinsics and the camera-to-world ``pose`` describe the upright images
    (the stored ones turned ``upright_turns`` quarter turns clockwise)."""
    return {
        "scene_id": scene_id,
        "frame_index": int(frame_index),
        "color_path": str(color_path),
        "depth_path": str(depth_path),
        "instance_path": None if instance_path is None else str(instance_path),
        "depth_scale": float(depth_scale),
        "color_width": int(color_size[0]),
        "color_height": int(color_size[1]),
        "depth_width": int(depth_size[0]),
        "depth_height": int(depth_size[1]),
        "upright_turns": int(upright_turns),
        "color_intrinsics": np.asarray(color_intrinsics, dtype=np.float64).reshape(-1).tolist(),
        "depth_intrinsics": np.asarray(depth_intrinsics, dtype=np.float64).reshape(-1).tolist(),
        "pose": np.asarray(pose, dtype=np.float64).reshape(-1).tolist(),
        "source": source,
    }


def scene_row(
    *,
    scene_id: str,
    scene_dir: Path,
    objects: list[dict],
    num_frames: int,
    source: str,
    mesh_path: Path | None = None,
    segs_path: Path | None = None,
    aggregation_path: Path | None = None,
    world_up: Sequence[float] | None = None,
    axis_alignment: np.ndarray | None = None,
) -> dict:
    """One ``rgbd_scenes`` row (``objects``: ``{object_id, label, box}`` dicts, ``box`` None or
    ``{centroid, axes, lengths}``; ``axis_alignment``: ScanNet's 4x4 ``axisAlignment``)."""
    return {
        "scene_id": scene_id,
        "scene_dir": str(scene_dir),
        "mesh_path": None if mesh_path is None else str(mesh_path),
        "segs_path": None if segs_path is None else str(segs_path),
        "aggregation_path": None if aggregation_path is None else str(aggregation_path),
        "objects": [{"box": None, **item} for item in objects],
        "num_frames": int(num_frames),
        "world_up": None if world_up is None else [float(value) for value in world_up],
        "axis_alignment": None if axis_alignment is None else np.asarray(axis_alignment).reshape(-1).tolist(),
        "source": source,
    }


def oriented_box(obb: object, where: str) -> dict:
    """An annotated oriented box ``{centroid, normalizedAxes, axesLengths}`` (ARKitScenes' ``obbAligned``,
    ScanNet++'s ``obb``) as ``rgbd_scenes`` stores it: ``{centroid, axes, lengths}``, the axes the rows of
    ``normalizedAxes`` reshaped 3x3, each normalised.

    Raises:
        ValueError: naming ``where`` when a field is missing, has the wrong count or is not finite, an axis is
            zero or a length is not positive.

    >>> box = oriented_box({"centroid": [1, 2, 0.5], "axesLengths": [2, 1, 1],
    ...                     "normalizedAxes": [0, 1, 0, -1, 0, 0, 0, 0, 1]}, "object 0")
    >>> box["axes"][:3], box["lengths"]
    ([0.0, 1.0, 0.0], [2.0, 1.0, 1.0])
    """
    if not isinstance(obb, dict):
        raise ValueError(f"{where}: the oriented box is not an object")
    try:
        centroid = np.asarray(obb["centroid"], dtype=np.float64).reshape(3)
        lengths = np.asarray(obb["axesLengths"], dtype=np.float64).reshape(3)
        axes = np.asarray(obb["normalizedAxes"], dtype=np.float64).reshape(3, 3)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where}: the oriented box lacks or misshapes {error}") from error
    norms = np.linalg.norm(axes, axis=1)
    if not (np.all(np.isfinite(centroid)) and np.all(np.isfinite(axes)) and np.all(np.isfinite(lengths))):
        raise ValueError(f"{where}: the oriented box has a value that is not finite")
    if np.any(norms < 1e-6) or np.any(lengths <= 0):
        raise ValueError(f"{where}: the oriented box has a zero axis or a length that is not positive")
    return {
        "centroid": centroid.tolist(),
        "axes": (axes / norms[:, None]).reshape(-1).tolist(),
        "lengths": lengths.tolist(),
    }
