"""Reader for ARKitScenes 3dod videos (``3dod/<Training|Validation>/<video_id>/``), with the outputs of
:mod:`readers.scannet` (:mod:`readers.scan_tables`).

A video folder holds ``<vid>_3dod_annotation.json`` (oriented 3D boxes), ``<vid>_3dod_mesh.ply`` and
``<vid>_frames/``: ``lowres_wide/<vid>_<ts>.png`` (RGB), ``lowres_depth/<vid>_<ts>.png`` (uint16 mm, 0 = no
reading, on the colour grid), ``lowres_wide_intrinsics/<vid>_<ts>.pincam`` (one line ``width height fx fy
cx cy``) and ``lowres_wide.traj`` (``ts rx ry rz tx ty tz``: axis-angle and metres, world-to-camera). The
older sample layout (``wide/``, ``color_intrinsics/``, ``color.traj``, files ``<ts>.png``) is read too.
``3dod/metadata.csv`` gives each video's ``sky_direction`` (columns found by name).

The traps, each handled here:

- **Timestamps.** ``<ts>`` is seconds with 3 decimals; the trajectory's have more and it is not 1:1 with
  the frames. A frame takes the trajectory pose nearest its timestamp when within
  ``POSE_TOLERANCE_S`` (5 ms; the same timestamp rounded to 3 decimals is within it), never by position,
  never interpolated; a frame without one is quarantined with the distance to the nearest. A
  ``.pincam`` may be named 1 ms off its image (``ts``, ``ts - 0.001``, ``ts + 0.001`` are tried).
- **World-to-camera poses.** The ``.traj`` pose is inverted to camera-to-world (OpenCV camera axes).
- **Orientation.** Frames are stored landscape whatever the capture; ``sky_direction`` (Up, Left, Right,
  Down) says where the sky is in them. The frames' rows carry the clockwise quarter turns that make them
  upright (``upright_turns``: Left 1, Down 2, Right 3), and their sizes, intrinsics and camera axes are
  those of the upright images, so the stored images turned by ``upright_turns`` back-project into the same
  world points. Without a metadata row the cameras' view of the world's up axis (+z) gives the direction.
- **Units and up.** Depth is millimetres (``depth_scale`` 1000). The world is gravity-aligned with +z up
  (``world_up``); its origin is not the floor.
- **Missing files.** A video without its annotation or trajectory fails (:class:`readers.common.MissingInputError`,
  one sentence naming the file); a frame without its depth image or intrinsics is quarantined. A video
  without a mesh is read (its objects then take the fused cloud's points inside their boxes).
"""

from __future__ import annotations

import csv
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import ARKITSCENES
from readers.common import TEXT_ENCODING, MissingInputError, listed_scan_folders, require_path
from readers.scan_tables import (
    frame_image_sizes,
    frame_row,
    oriented_box,
    rigid_pose_problem,
    scene_row,
    upright_size,
)

logger = logging.getLogger(__name__)

CONFIG_FIELD = "arkitscenes_root"
KEY_PREFIX = "arkitscenes_"
"""Partition keys (and ``scene_id``) of ARKitScenes videos: ``arkitscenes_<video_id>``."""
FOLDS = ("Training", "Validation")
METADATA_FILE = "metadata.csv"
POSE_TOLERANCE_S = 0.005
"""A frame takes the trajectory pose nearest its timestamp when it is at most this far (seconds)."""
PINCAM_OFFSETS_MS = (0, -1, 1)
"""A frame's ``.pincam`` may be named this many milliseconds off its image."""
SKY_DIRECTION_TURNS = {"Up": 0, "Left": 1, "Down": 2, "Right": 3}
"""Clockwise quarter turns that make a frame upright, by ``sky_direction`` (where the sky is in the stored
frame: Left, rotate 90 degrees clockwise; Right, counter-clockwise; Down, 180 degrees)."""
WORLD_UP = (0.0, 0.0, 1.0)
"""ARKitScenes' world is gravity-aligned with +z up."""


@dataclass(frozen=True)
class FrameLayout:
    """Where a video's frames, intrinsics and trajectory are inside ``<vid>_frames/``."""

    colour: str
    depth: str
    intrinsics: str
    trajectory: str


FRAME_LAYOUTS = (
    FrameLayout("lowres_wide", "lowres_depth", "lowres_wide_intrinsics", "lowres_wide.traj"),
    FrameLayout("wide", "lowres_depth", "color_intrinsics", "color.traj"),
)
"""The released layout, then the older sample layout."""


def scene_id_of(video_id: str) -> str:
    """The ``scene_id`` and partition key of a video.

    >>> scene_id_of("41069025")
    'arkitscenes_41069025'
    """
    return f"{KEY_PREFIX}{video_id}"


def read_metadata(root: Path) -> dict[str, dict[str, str]]:
    """The rows of ``<root>/metadata.csv`` by ``video_id`` (columns by their header names), or ``{}`` when the
    file is missing or has no ``video_id`` column."""
    path = root / METADATA_FILE
    if not path.is_file():
        return {}
    with path.open(newline="", encoding=TEXT_ENCODING) as handle:
        reader = csv.DictReader(handle)
        if reader.fieldnames is None or "video_id" not in reader.fieldnames:
            logger.warning("%s has no video_id column: sky directions come from the poses", path)
            return {}
        return {
            row["video_id"].strip(): {k: (v or "").strip() for k, v in row.items() if k} for row in reader
        }


@dataclass(frozen=True)
class VideoFolder:
    """One video: its id, folder and metadata row (empty when the metadata does not list it)."""

    video_id: str
    folder: Path
    metadata: tuple[tuple[str, str], ...]


def list_arkitscenes_videos(root: str | Path) -> list[VideoFolder]:
    """Every video folder under a ``3dod`` folder (``Training/`` and ``Validation/``), or under one fold's folder,
    sorted by video id, with its ``metadata.csv`` row. A video folder that is a symbolic link is left out with
    a warning when it resolves outside ``root``, to it, or to (into, above) another video's folder
    (:func:`readers.common.listed_scan_folders`).

    Raises:
        MissingInputError: when ``root`` does not exist.
        ValueError: when a video id is in both folds.
    """
    folder = require_path(root, CONFIG_FIELD, "ARKitScenes 3dod folder")
    folds = [folder / name for name in FOLDS if (folder / name).is_dir()]
    metadata = read_metadata(folder) if folds else read_metadata(folder.parent)
    videos: dict[str, VideoFolder] = {}
    candidates = [path for fold in folds or [folder] for path in sorted(fold.iterdir()) if path.is_dir()]
    for path in listed_scan_folders(candidates, folder, "ARKitScenes"):
        if path.name in videos:
            raise ValueError(
                f"ARKitScenes video {path.name} is in two folds ({videos[path.name].folder.parent} and "
                f"{path.parent}): remove one copy"
            )
        row = tuple(sorted(metadata.get(path.name, {}).items()))
        videos[path.name] = VideoFolder(path.name, path, row)
    return [videos[key] for key in sorted(videos)]


def axis_angle_matrix(rotation_vector: np.ndarray) -> np.ndarray:
    """The 3x3 rotation of an axis-angle vector (radians; Rodrigues' formula).

    >>> axis_angle_matrix(np.array([0.0, 0.0, math.pi / 2])).round(6).tolist()
    [[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    vector = np.asarray(rotation_vector, dtype=np.float64)
    angle = float(np.linalg.norm(vector))
    if angle < 1e-12:
        return np.eye(3)
    x, y, z = vector / angle
    cross = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * cross + (1.0 - math.cos(angle)) * (cross @ cross)


@dataclass(frozen=True)
class Trajectory:
    """A ``.traj`` file: timestamps (seconds, sorted) and camera-to-world poses (the file's inverses)."""

    path: Path
    timestamps: np.ndarray
    poses: np.ndarray

    @classmethod
    def read(cls, path: Path) -> Trajectory:
        """Parse ``ts rx ry rz tx ty tz`` lines (world-to-camera) into camera-to-world poses.

        Raises:
            ValueError: naming the file and line of a line that is not 7 numbers, or when no line is.
        """
        rows = []
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            values = line.split()
            try:
                numbers = [float(value) for value in values]
            except ValueError:
                numbers = []
            if len(numbers) != 7:
                raise ValueError(f"{path} line {number} is not 'ts rx ry rz tx ty tz': {line.strip()[:80]!r}")
            rows.append(numbers)
        if not rows:
            raise ValueError(f"{path} holds no pose")
        table = np.asarray(rows, dtype=np.float64)
        table = table[np.argsort(table[:, 0], kind="stable")]
        poses = np.empty((len(table), 4, 4))
        for index, (_, rx, ry, rz, tx, ty, tz) in enumerate(table):
            rotation = axis_angle_matrix(np.array([rx, ry, rz]))
            poses[index] = np.eye(4)
            poses[index, :3, :3] = rotation.T
            poses[index, :3, 3] = -rotation.T @ np.array([tx, ty, tz])
        return cls(path, table[:, 0], poses)

    def pose_at(
        self, timestamp: float, tolerance: float = POSE_TOLERANCE_S
    ) -> tuple[np.ndarray | None, float]:
        """The camera-to-world pose nearest ``timestamp`` and its distance in seconds; ``None`` when farther than
        ``tolerance``."""
        position = int(np.searchsorted(self.timestamps, timestamp))
        candidates = [index for index in (position - 1, position) if 0 <= index < len(self.timestamps)]
        nearest = min(candidates, key=lambda index: abs(self.timestamps[index] - timestamp))
        distance = abs(float(self.timestamps[nearest]) - timestamp)
        return (self.poses[nearest] if distance <= tolerance + 1e-9 else None), distance


def read_pincam(path: Path) -> tuple[tuple[int, int], np.ndarray]:
    """``((width, height), 3x3 intrinsics)`` of a ``.pincam`` line ``width height fx fy cx cy``.

    Raises:
        ValueError: naming the file when it is not 6 numbers or a focal length is not positive.
    """
    values = path.read_text().split()
    try:
        width, height, fx, fy, cx, cy = (float(value) for value in values)
    except ValueError as error:
        raise ValueError(
            f"{path} is not one line 'width height fx fy cx cy': {' '.join(values)[:80]!r}"
        ) from error
    if fx <= 0 or fy <= 0 or width < 1 or height < 1:
        raise ValueError(f"{path} has a size or focal length that is not positive: {' '.join(values)}")
    return (round(width), round(height)), np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def turn_intrinsics(intrinsics: np.ndarray, size: tuple[int, int], turns: int) -> np.ndarray:
    """Intrinsics of an image of ``size`` (width, height) after ``turns`` clockwise quarter turns: one turn
    gives ``fx' = fy, fy' = fx, cx' = H - 1 - cy, cy' = cx`` (pixel centres at integer coordinates).

    >>> turn_intrinsics(np.array([[200.0, 0, 130], [0, 210, 90], [0, 0, 1]]), (256, 192), 1).tolist()
    [[210.0, 0.0, 101.0], [0.0, 200.0, 130.0], [0.0, 0.0, 1.0]]
    """
    fx, fy, cx, cy = intrinsics[0, 0], intrinsics[1, 1], intrinsics[0, 2], intrinsics[1, 2]
    width, height = size
    for _ in range(turns % 4):
        fx, fy, cx, cy = fy, fx, height - 1 - cy, cx
        width, height = height, width
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]])


def upright_camera(pose: np.ndarray, turns: int) -> np.ndarray:
    """The camera-to-world pose of the upright image: the stored camera's axes turned with the image (one
    clockwise turn: upright x = -stored y, upright y = stored x).

    >>> upright_camera(np.eye(4), 1)[:3, :3].round(6).tolist()
    [[0.0, 1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]
    """
    quarter = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # stored -> upright coordinates
    turned = np.linalg.matrix_power(quarter, turns % 4)
    result = pose.copy()
    result[:3, :3] = pose[:3, :3] @ turned.T
    return result


def sky_direction_from_poses(poses: list[np.ndarray]) -> str:
    """Where the world's up axis (+z) points in the stored images, as a ``sky_direction`` (median over the
    cameras): the image's top (Up), left, right or bottom (Down).

    >>> sky_direction_from_poses([np.diag([1.0, -1.0, -1.0, 1.0])[[0, 2, 1, 3]]])
    'Up'
    """
    if not poses:
        return "Up"
    ups = np.array([pose[:3, :3].T @ np.array(WORLD_UP) for pose in poses])
    x, y = np.median(ups[:, 0]), np.median(ups[:, 1])
    if abs(x) > abs(y):
        return "Left" if x < 0 else "Right"
    return "Up" if y < 0 else "Down"


def _timestamp_ms(path: Path) -> int | None:
    """The timestamp of a frame file ``<vid>_<seconds>.png`` or ``<seconds>.png`` in milliseconds (None when the
    name holds none)."""
    text = path.stem.rsplit("_", 1)[-1]
    try:
        return round(float(text) * 1000.0)
    except ValueError:
        return None


def _frame_files(folder: Path) -> dict[int, Path]:
    found: dict[int, Path] = {}
    if folder.is_dir():
        for path in folder.iterdir():
            if path.suffix.lower() == ".png":
                stamp = _timestamp_ms(path)
                if stamp is not None:
                    found[stamp] = path
    return found


def _seconds_text(milliseconds: int) -> str:
    return f"{milliseconds // 1000}.{milliseconds % 1000:03d}"


def _pincam_path(folder: Path, colour: Path, milliseconds: int) -> Path | None:
    prefix = colour.stem[: -len(colour.stem.rsplit("_", 1)[-1])]
    for offset in PINCAM_OFFSETS_MS:
        path = folder / f"{prefix}{_seconds_text(milliseconds + offset)}.pincam"
        if path.is_file():
            return path
    return None


def _read_objects(path: Path, scene_id: str, log: QuarantineLog) -> list[dict]:
    """The annotation's objects ``{object_id, label, box}`` (object_id: the position in ``data``); objects with a
    bad box are quarantined.

    Raises:
        MissingInputError: when the file cannot be parsed or has no ``data`` list.
    """
    try:
        annotation = json.loads(path.read_text(encoding=TEXT_ENCODING))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise MissingInputError(
            f"ARKitScenes annotation {path} cannot be read ({error}); restore the file.",
            location=path,
            config_field=CONFIG_FIELD,
        ) from error
    if isinstance(annotation, dict) and annotation.get("skipped") is True:
        logger.info("%s: the annotation marks the video skipped: no object", scene_id)
        return []
    data = annotation.get("data") if isinstance(annotation, dict) else None
    if not isinstance(data, list):
        raise MissingInputError(
            f"ARKitScenes annotation {path} has no 'data' list of boxes; restore the file.",
            location=path,
            config_field=CONFIG_FIELD,
        )
    objects = []
    for index, item in enumerate(data):
        record_id = f"{scene_id}/object/{index}"
        if not isinstance(item, dict) or item.get("skipped") is True:
            log.add(
                record_id, "annotation entry is not a box (skipped or not an object)", source_file=str(path)
            )
            continue
        try:
            box = oriented_box((item.get("segments") or {}).get("obbAligned"), f"data[{index}]")
        except (ValueError, AttributeError) as error:
            log.add(
                record_id, f"bad box: {error}", source_file=str(path), payload={"label": item.get("label")}
            )
            continue
        objects.append({"object_id": index, "label": str(item.get("label") or ""), "box": box})
    return objects


def _required(path: Path, what: str, video_id: str) -> Path:
    if not path.is_file():
        raise MissingInputError(
            f"ARKitScenes video {video_id} has no {what}: {path} is missing (about 24 videos of the release lack "
            "their mesh, annotation and trajectory); restore it, or delete the video's folder and its `scenes` "
            "partition.",
            location=path,
            config_field=CONFIG_FIELD,
        )
    return path


_Candidate = tuple[int, Path, Path, np.ndarray]
"""A frame with its depth image and a rigid pose: ``(timestamp ms, colour, depth, camera-to-world pose)``."""


def _frame_layout(video_id: str, frames_folder: Path) -> FrameLayout:
    """The layout of the video's frames folder (the released one or the older sample one).

    Raises:
        MissingInputError: when neither layout's colour folder is there.
    """
    layout = next((item for item in FRAME_LAYOUTS if (frames_folder / item.colour).is_dir()), None)
    if layout is None:
        raise MissingInputError(
            f"ARKitScenes video {video_id} has no frames: {frames_folder / FRAME_LAYOUTS[0].colour} is missing; "
            "restore it, or delete the video's folder and its `scenes` partition.",
            location=frames_folder,
            config_field=CONFIG_FIELD,
        )
    return layout


def _read_trajectory(path: Path) -> Trajectory:
    """The video's trajectory; :class:`MissingInputError` naming the file when it cannot be parsed."""
    try:
        return Trajectory.read(path)
    except ValueError as error:
        raise MissingInputError(
            f"ARKitScenes trajectory unusable: {error}.", location=path, config_field=CONFIG_FIELD
        ) from error


def _posed_frames(
    scene_id: str,
    frames_folder: Path,
    layout: FrameLayout,
    trajectory: Trajectory,
    trajectory_path: Path,
    log: QuarantineLog,
) -> list[_Candidate]:
    """The colour frames, in timestamp order, that have a depth image and a rigid pose within tolerance; the
    others are quarantined."""
    colours = _frame_files(frames_folder / layout.colour)
    depths = _frame_files(frames_folder / layout.depth)
    candidates = []
    for stamp in sorted(colours):
        record_id = f"{scene_id}/{stamp}"
        colour = colours[stamp]
        depth = depths.get(stamp)
        if depth is None:
            expected = frames_folder / layout.depth / colour.name
            log.add(
                record_id, f"missing file: frame lacks its depth image {expected}", source_file=str(expected)
            )
            continue
        pose, distance = trajectory.pose_at(stamp / 1000.0)
        if pose is None:
            log.add(
                record_id,
                f"no pose within {POSE_TOLERANCE_S * 1000:.0f} ms: the nearest line of {trajectory_path} is "
                f"{distance * 1000:.1f} ms away",
                source_file=str(colour),
            )
            continue
        problem = rigid_pose_problem(pose)
        if problem:
            log.add(record_id, problem, source_file=str(trajectory_path), payload=pose.tolist())
            continue
        candidates.append((stamp, colour, depth, pose))
    return candidates


def _sky_direction(video: VideoFolder, scene_id: str, candidates: list[_Candidate]) -> str:
    """The video's ``sky_direction``: the metadata's when it is a known one, else what the poses say."""
    sky = dict(video.metadata).get("sky_direction", "")
    if sky not in SKY_DIRECTION_TURNS:
        inferred = sky_direction_from_poses([pose for *_, pose in candidates])
        if sky:
            logger.warning(
                "%s: unknown sky_direction %r in the metadata; the poses say %s", scene_id, sky, inferred
            )
        sky = inferred
    return sky


def _frame_camera(
    record_id: str, stamp: int, colour: Path, depth: Path, intrinsics_folder: Path, log: QuarantineLog
) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]] | None:
    """The frame's colour intrinsics and its colour and depth image sizes; None (quarantined) when the
    intrinsics are missing or unreadable, an image is unreadable, or the intrinsics are for another size."""
    pincam = _pincam_path(intrinsics_folder, colour, stamp)
    if pincam is None:
        expected = intrinsics_folder / f"{colour.stem}.pincam"
        log.add(
            record_id,
            f"missing file: frame lacks its intrinsics {expected} (also tried 1 ms either side)",
            source_file=str(expected),
        )
        return None
    try:
        pincam_size, intrinsics = read_pincam(pincam)
    except (OSError, ValueError) as error:
        log.add(record_id, f"bad intrinsics: {error}", source_file=str(pincam))
        return None
    sizes = frame_image_sizes(record_id, colour, depth, log)
    if sizes is None:
        return None
    colour_size, depth_size = sizes
    if pincam_size != colour_size:
        log.add(
            record_id,
            f"intrinsics are for {pincam_size[0]}x{pincam_size[1]} but the image is "
            f"{colour_size[0]}x{colour_size[1]}",
            source_file=str(pincam),
        )
        return None
    return intrinsics, colour_size, depth_size


def read_arkitscenes_video(
    video: VideoFolder, source: str = ARKITSCENES
) -> tuple[list[dict], dict | None, QuarantineLog]:
    """Read one video folder into frame rows and a scene row (None when no frame is usable).

    Raises:
        MissingInputError: when the annotation, the frames folder or the trajectory is missing, or the
            annotation or trajectory cannot be parsed (one sentence naming the file).
    """
    video_id, folder = video.video_id, video.folder
    scene_id = scene_id_of(video_id)
    log = QuarantineLog("rgbd_frames")
    annotation = _required(folder / f"{video_id}_3dod_annotation.json", "annotation", video_id)
    frames_folder = folder / f"{video_id}_frames"
    layout = _frame_layout(video_id, frames_folder)
    trajectory_path = _required(frames_folder / layout.trajectory, "trajectory", video_id)
    trajectory = _read_trajectory(trajectory_path)
    objects = _read_objects(annotation, scene_id, log)
    candidates = _posed_frames(scene_id, frames_folder, layout, trajectory, trajectory_path, log)
    sky = _sky_direction(video, scene_id, candidates)
    turns = SKY_DIRECTION_TURNS[sky]
    frames = []
    sizes: tuple[tuple[int, int], tuple[int, int]] | None = None
    for stamp, colour, depth, pose in candidates:
        record_id = f"{scene_id}/{stamp}"
        camera = _frame_camera(record_id, stamp, colour, depth, frames_folder / layout.intrinsics, log)
        if camera is None:
            continue
        intrinsics, colour_size, depth_size = camera
        if sizes is not None and sizes != (colour_size, depth_size):
            log.add(record_id, "image size differs from the scene's other frames", source_file=str(colour))
            continue
        sizes = (colour_size, depth_size)
        depth_intrinsics = intrinsics.copy()
        depth_intrinsics[0] *= depth_size[0] / colour_size[0]
        depth_intrinsics[1] *= depth_size[1] / colour_size[1]
        frames.append(
            frame_row(
                scene_id=scene_id,
                frame_index=stamp,
                color_path=colour,
                depth_path=depth,
                color_size=upright_size(colour_size, turns),
                depth_size=upright_size(depth_size, turns),
                color_intrinsics=turn_intrinsics(intrinsics, colour_size, turns),
                depth_intrinsics=turn_intrinsics(depth_intrinsics, depth_size, turns),
                pose=upright_camera(pose, turns),
                source=source,
                upright_turns=turns,
            )
        )
    if not frames:
        log.add(scene_id, "scene has no usable frame", source_file=str(frames_folder))
        return [], None, log
    mesh = folder / f"{video_id}_3dod_mesh.ply"
    if not mesh.is_file():
        logger.info("%s has no mesh %s: its objects take the fused cloud's points", scene_id, mesh)
    scene = scene_row(
        scene_id=scene_id,
        scene_dir=folder,
        mesh_path=mesh if mesh.is_file() else None,
        aggregation_path=annotation,
        objects=objects,
        num_frames=len(frames),
        world_up=WORLD_UP,
        source=source,
    )
    logger.info(
        "%s: %d frames (sky %s, %d quarter turns), %d objects, %d quarantined",
        scene_id,
        len(frames),
        sky,
        turns,
        len(objects),
        len(log),
    )
    return frames, scene, log
