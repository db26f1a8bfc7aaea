"""RGB-D fusion: a scene's frames back-projected into one voxel-downsampled world point cloud.

Each frame's depth image (metres = stored units / ``depth_scale``) is back-projected through the
depth intrinsics and moved to the world by the frame's camera-to-world pose. Every point keeps a
surface normal estimated from the depth image, a colour and the instance id read from the frame's
instance mask (ScanNet ``instance-filt``: ``objectId + 1``, 0 for none), found by projecting the
point into the colour image, whose resolution and intrinsics differ from the depth image's. The
points are then voxel-downsampled (open3d's voxel grid, averaged with numpy): one cloud for the
scene, one per object. The scene cloud comes from its own pixel grid (about 20,000 pixels per
frame), whatever the object points' (about 80,000 pixels when they come from instance masks), so a
scan's scene cloud, floor and room do not depend on where its objects come from. Object points from
instance masks are kept only where the other frames' masks agree (:func:`mask_votes`): a point the
mask bled onto the wall behind, or a flying pixel between an object and the wall, is seen as
something else, or looked through, by the frames that see it from elsewhere.

A frame whose depth is empty or NaN, whose files cannot be read or whose pose is not rigid is
skipped with a reason (see :class:`FrameError`); the scene is built from the rest.

>>> settings = FusionSettings(pixel_stride=4)
>>> settings.scene_voxel_size_m
0.03
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, overload

import numpy as np
import pydantic
from PIL import Image, UnidentifiedImageError
from pydantic import ConfigDict, Field
from scipy import ndimage
from tqdm.auto import tqdm

from assets.dge.camera import (
    backproject_depth,
    depth_normals_at,
    intrinsics_matrix,
    pose_matrix,
    project_points,
    rotate_vectors,
    transform_points,
)
from data_contracts.images import upright
from readers.scan_tables import rigid_pose_problem

logger = logging.getLogger(__name__)

NO_OBJECT = -1


OBJECT_PIXELS_PER_FRAME = 80_000
"""Depth pixels back-projected per frame when objects come from the frames' instance masks."""
SCENE_PIXELS_PER_FRAME = 20_000
"""Depth pixels back-projected per frame when only the scene cloud comes from the frames."""
OBJECT_PIXELS_PER_SCAN = 1_200_000
"""Depth pixels back-projected per scan (all frames together) for object points from instance masks: a long sweep
sees each surface from many nearly equal views, so beyond this its frames use a coarser grid (never coarser than
the scene cloud's). 12 frames at 320x240 stay at every pixel; 50 frames at 640x480 use every 4th."""


def auto_pixel_stride(
    depth_width: int, depth_height: int, target_pixels: float = OBJECT_PIXELS_PER_FRAME
) -> int:
    """Pixel stride that back-projects about ``target_pixels`` depth pixels per frame.

    >>> auto_pixel_stride(640, 480), auto_pixel_stride(320, 240), auto_pixel_stride(640, 480, SCENE_PIXELS_PER_FRAME)
    (2, 1, 4)
    """
    return max(1, round(math.sqrt(depth_width * depth_height / target_pixels)))


class FusionSettings(pydantic.BaseModel):
    """How frames are turned into point clouds.

    The fields are run configuration (``scene_geometry``'s launchpad). The ``ClassVar`` attributes are
    the method's constants (voxel sizes, depth-edge and label-vote tolerances): not run configuration,
    but read the same way (``settings.scene_voxel_size_m``); a test or benchmark that needs other values
    passes an instance of a subclass that overrides them.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    pixel_stride: int = Field(
        default=0,
        description="Back-project every n-th depth row and column; 0 picks it from the depth size (about "
        "80,000 pixels per frame when objects come from the frames' instance masks, else 20,000).",
    )
    min_depth_m: float = Field(default=0.1, description="Nearer depth readings are dropped.")
    max_depth_m: float = Field(default=10.0, description="Farther depth readings are dropped.")
    store_cloud_colors: bool = Field(
        default=False, description="Read the colour images to store the cloud's colours."
    )

    # Constants of the method (not run configuration; a test may override them in a subclass).
    scene_voxel_size_m: ClassVar[float] = 0.03
    """Voxel size of the fused scene cloud."""
    object_voxel_size_m: ClassVar[float] = 0.015
    """Voxel size of object clouds fused from frames."""
    min_valid_depth_fraction: ClassVar[float] = 0.01
    """A frame with fewer valid depth pixels than this share is quarantined as empty."""
    erode_instance_boundaries: ClassVar[bool] = False
    """Ignore every instance-mask pixel on a boundary between two ids (drops thin parts such as lamp poles and
    chair legs whole; the default keeps them and drops only background pixels a mask bleeds onto, see
    depth_edge_tolerance_m)."""
    depth_edge_tolerance_m: ClassVar[float] = 0.02
    """Two neighbouring depth pixels lie on one surface when their depths differ by at most this plus
    depth_edge_tolerance_relative times the depth. A pixel with fewer than min_surface_neighbours such
    neighbours is a flying pixel (mixed across a depth edge) and is dropped; a labelled pixel with a
    neighbour of its own label nearer than that is background the mask bled onto, and loses its label."""
    depth_edge_tolerance_relative: ClassVar[float] = 0.02
    """Share of the depth added to depth_edge_tolerance_m."""
    min_surface_neighbours: ClassVar[int] = 2
    """Least neighbours (of 8) on the same surface for a depth pixel to be kept (2 keeps a one-pixel-wide
    pole)."""
    mask_vote_min_share: ClassVar[float] = 0.5
    """Multi-view label vote of object points fused from instance masks (see mask_vote_keep): a point stays
    with its object when at least this share of the frames that decide about it see the object there; 0
    turns the vote off."""
    mask_vote_radius_px: ClassVar[int] = 1
    """A frame sees the object at a point when a grid pixel within this many pixels of the point's projection
    carries the object's id at the point's depth (pose registration error moves a projection by about a
    pixel, which would otherwise vote a thin pole away)."""
    mask_vote_max_views: ClassVar[int] = 16
    """The label vote looks at most at this many frames, evenly spread over the scan (neighbouring frames of a
    sweep see nearly the same thing; the vote's cost grows with the frames)."""
    mask_vote_tolerance_m: ClassVar[float] = 0.02
    """A frame sees a point on its surface when the frame's depth there is within this plus
    mask_vote_tolerance_relative times the depth of the point's own depth (depth noise and registration
    error)."""
    mask_vote_tolerance_relative: ClassVar[float] = 0.02
    """Share of the depth added to mask_vote_tolerance_m."""
    scene_pixel_stride: ClassVar[int] = 0
    """Back-project every n-th depth row and column for the scene cloud; 0 picks it from the depth size (about
    20,000 pixels per frame), never finer than the object points' stride. Object points from instance masks
    need a finer grid than the scene cloud, which is then fused from its own coarser grid."""

    def stride_for(self, depth_size: tuple[int, int], with_instances: bool, frames: int = 1) -> int:
        """The pixel stride for a scan of ``frames`` frames of ``depth_size`` (``pixel_stride``, or the automatic one
        when 0: about OBJECT_PIXELS_PER_FRAME pixels per frame with instances, at most OBJECT_PIXELS_PER_SCAN in all
        and never fewer than SCENE_PIXELS_PER_FRAME; without, SCENE_PIXELS_PER_FRAME).

        >>> FusionSettings().stride_for((640, 480), with_instances=False), FusionSettings(pixel_stride=3).stride_for((640, 480), True)
        (4, 3)
        >>> FusionSettings().stride_for((640, 480), True), FusionSettings().stride_for((640, 480), True, frames=50)
        (2, 4)
        """
        if self.pixel_stride > 0:
            return self.pixel_stride
        if not with_instances:
            return auto_pixel_stride(depth_size[0], depth_size[1], SCENE_PIXELS_PER_FRAME)
        per_frame = min(OBJECT_PIXELS_PER_FRAME, OBJECT_PIXELS_PER_SCAN / max(frames, 1))
        return auto_pixel_stride(depth_size[0], depth_size[1], max(per_frame, SCENE_PIXELS_PER_FRAME))

    def scene_stride_for(self, depth_size: tuple[int, int], with_instances: bool) -> int:
        """The pixel stride of the scene cloud (``scene_pixel_stride``, or the automatic scene stride when 0,
        never finer than :meth:`stride_for`).

        >>> FusionSettings(pixel_stride=2).scene_stride_for((640, 480), True), FusionSettings().scene_stride_for((160, 120), True)
        (4, 1)
        """
        if self.scene_pixel_stride > 0:
            return self.scene_pixel_stride
        automatic = auto_pixel_stride(depth_size[0], depth_size[1], SCENE_PIXELS_PER_FRAME)
        return max(automatic, self.stride_for(depth_size, with_instances))


DEFAULT_FUSION_SETTINGS = FusionSettings()


class FrameError(ValueError):
    """A frame that cannot be used: the reason, and the file it came from."""

    def __init__(self, reason: str, source_file: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.source_file = source_file


@dataclass(frozen=True)
class FrameRecord:
    """One row of ``rgbd_frames`` with its matrices parsed.

    ``upright_turns``: the clockwise quarter turns that make the stored images upright (sizes, intrinsics and
    pose are the upright images'); every image of the frame is read through it.

    >>> record = FrameRecord.from_row({"scene_id": "s", "frame_index": 3, "color_path": "c.jpg",
    ...     "depth_path": "d.png", "instance_path": None, "depth_scale": 1000.0, "color_width": 8,
    ...     "color_height": 6, "depth_width": 8, "depth_height": 6,
    ...     "color_intrinsics": [4, 0, 4, 0, 4, 3, 0, 0, 1], "depth_intrinsics": [4, 0, 4, 0, 4, 3, 0, 0, 1],
    ...     "pose": np.eye(4).reshape(-1).tolist()})
    >>> record.record_id
    's/3'
    """

    scene_id: str
    frame_index: int
    color_path: str
    depth_path: str
    instance_path: str | None
    depth_scale: float
    color_size: tuple[int, int]
    depth_size: tuple[int, int]
    color_intrinsics: np.ndarray
    depth_intrinsics: np.ndarray
    pose: np.ndarray
    upright_turns: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FrameRecord:
        """Parse a ``rgbd_frames`` row (a dict)."""
        return cls(
            scene_id=str(row["scene_id"]),
            frame_index=int(row["frame_index"]),
            color_path=str(row["color_path"]),
            depth_path=str(row["depth_path"]),
            instance_path=None if row.get("instance_path") is None else str(row["instance_path"]),
            depth_scale=float(row["depth_scale"]),
            color_size=(int(row["color_width"]), int(row["color_height"])),
            depth_size=(int(row["depth_width"]), int(row["depth_height"])),
            color_intrinsics=intrinsics_matrix(row["color_intrinsics"]),
            depth_intrinsics=intrinsics_matrix(row["depth_intrinsics"]),
            pose=pose_matrix(row["pose"]),
            upright_turns=int(row.get("upright_turns") or 0),
        )

    @property
    def record_id(self) -> str:
        """``<scene_id>/<frame_index>``, the id used in quarantine tables."""
        return f"{self.scene_id}/{self.frame_index}"


def read_depth_m(path: str | Path, depth_scale: float, upright_turns: int = 0) -> np.ndarray:
    """Read a depth image and return metres as float32 (0 or NaN where missing), turned upright.

    16-bit PNGs (millimetres, ``depth_scale`` 1000) and 32-bit float images are accepted; both are divided
    by ``depth_scale``. ``upright_turns``: clockwise quarter turns that make the stored image upright
    (``rgbd_frames.upright_turns``). Raises :class:`FrameError` when the file is unreadable.
    """
    try:
        with Image.open(path) as image:
            raw = np.asarray(image)
    except FileNotFoundError as error:
        raise FrameError(f"missing depth file: {error}", str(path)) from error
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise FrameError(f"unreadable depth image: {error}", str(path)) from error
    if raw.ndim != 2:
        raise FrameError(f"depth image has shape {raw.shape}, expected one channel", str(path))
    # One pass: each stored value is converted to float32 and divided in float32.
    return upright(np.divide(raw, np.float32(depth_scale), dtype=np.float32), upright_turns)


def depth_problem(depth_m: np.ndarray, min_valid_fraction: float = 0.01) -> str:
    """Empty string when a depth image is usable, else why it is not (empty, NaN).

    >>> depth_problem(np.zeros((4, 4)))
    'empty depth: no valid pixel (0 of 16 are > 0)'
    >>> depth_problem(np.full((2, 2), np.nan))
    'NaN depth: 4 of 4 pixels are NaN and none is valid'
    >>> depth_problem(np.ones((2, 2)))
    ''
    """
    total = depth_m.size
    nan_count = int(np.count_nonzero(np.isnan(depth_m))) if np.issubdtype(depth_m.dtype, np.floating) else 0
    with np.errstate(invalid="ignore"):
        valid = int(np.count_nonzero(np.isfinite(depth_m) & (depth_m > 0)))
    if valid == 0:
        if nan_count:
            return f"NaN depth: {nan_count} of {total} pixels are NaN and none is valid"
        return f"empty depth: no valid pixel (0 of {total} are > 0)"
    if valid < min_valid_fraction * total:
        return (
            f"empty depth: only {valid} of {total} pixels are valid "
            f"(< {min_valid_fraction:.0%}; NaN pixels: {nan_count})"
        )
    return ""


def read_instance_labels(path: str | Path, upright_turns: int = 0) -> np.ndarray:
    """Read a ScanNet instance image: ``objectId + 1`` per pixel, 0 where no object (integers, first channel of
    a colour image), turned upright; raises :class:`FrameError` when the file is unreadable."""
    try:
        with Image.open(path) as image:
            raw = np.asarray(image)
    except FileNotFoundError as error:
        raise FrameError(f"missing instance mask: {error}", str(path)) from error
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise FrameError(f"unreadable instance mask: {error}", str(path)) from error
    if raw.ndim == 3:
        raw = raw[..., 0]
    if not np.issubdtype(raw.dtype, np.integer):
        raw = raw.astype(np.int32)
    return upright(raw, upright_turns)


def read_instance_ids(path: str | Path, erode_boundaries: bool = True, upright_turns: int = 0) -> np.ndarray:
    """Read a ScanNet instance image as object ids (``value - 1``; -1 where no object), turned upright.

    With ``erode_boundaries`` the pixels whose 4-neighbourhood holds another id become -1.
    """
    ids = read_instance_labels(path, upright_turns).astype(np.int32)
    ids -= 1
    if erode_boundaries:
        boundary = np.zeros(ids.shape, dtype=bool)
        boundary[1:, :] |= ids[1:, :] != ids[:-1, :]
        boundary[:-1, :] |= ids[:-1, :] != ids[1:, :]
        boundary[:, 1:] |= ids[:, 1:] != ids[:, :-1]
        boundary[:, :-1] |= ids[:, :-1] != ids[:, 1:]
        ids = np.where(boundary, NO_OBJECT, ids)
    return ids


NEIGHBOUR_OFFSETS = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))


def _neighbour_view(
    padded: np.ndarray, d_row: int, d_col: int, stride: int, shape: tuple[int, int]
) -> np.ndarray:
    """The neighbours at ``(d_row, d_col)`` pixels of the strided grid's pixels (``padded`` has a 1-pixel border)."""
    return padded[1 + d_row :: stride, 1 + d_col :: stride][: shape[0], : shape[1]]


def flying_pixels(
    depth_m: np.ndarray, stride: int, config: FusionSettings = DEFAULT_FUSION_SETTINGS
) -> np.ndarray:
    """Which pixels of the strided grid are flying pixels: valid, with fewer than ``min_surface_neighbours`` of
    their 8 neighbours (at full resolution) on the same surface.

    >>> depth = np.full((5, 5), 2.0); depth[2, 2] = 2.5
    >>> flying_pixels(depth, 1)[2, 2], int(flying_pixels(depth, 1).sum())
    (np.True_, 1)
    """
    centre = depth_m[::stride, ::stride]
    padded = np.zeros((depth_m.shape[0] + 2, depth_m.shape[1] + 2), dtype=depth_m.dtype)
    padded[1:-1, 1:-1] = depth_m
    if not np.isfinite(depth_m).all():  # usable depth (zeros where missing) never is
        padded = np.nan_to_num(padded, nan=0.0)
    tolerance = config.depth_edge_tolerance_m + config.depth_edge_tolerance_relative * centre
    close = np.zeros(centre.shape, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        for d_row, d_col in NEIGHBOUR_OFFSETS:
            neighbour = _neighbour_view(padded, d_row, d_col, stride, centre.shape)
            close += (neighbour > 0) & (np.abs(neighbour - centre) <= tolerance)
        return (centre > 0) & (close < config.min_surface_neighbours)


def bled_labels(
    object_ids: np.ndarray,
    z: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    stride: int,
    config: FusionSettings,
) -> np.ndarray:
    """Which labelled points carry a label that bled across a depth edge: a neighbour on the strided grid has
    the same label but lies on another surface (nearer or farther by more than the surface tolerance),
    while a neighbour with another label (or none) lies on the point's own surface.

    A thin part (a lamp's pole) keeps its label: its own neighbours along it share its surface and
    its other neighbours (the wall behind) do not. Unlabelled points count as another label.

    >>> ids, z = np.array([3, 3, 3, -1]), np.array([1.0, 1.0, 2.0, 2.0])
    >>> bled_labels(ids, z, np.zeros(4, int), np.arange(4), 1, FusionSettings()).tolist()
    [False, False, True, False]
    """
    missing = -2
    grid_rows, grid_cols = rows // stride + 1, cols // stride + 1
    # The grid with a border of one missing cell, flattened: a neighbour is a fixed offset away.
    grid_width = int(grid_cols.max(initial=0)) + 2
    size = (int(grid_rows.max(initial=0)) + 2) * grid_width
    cells = grid_rows * grid_width + grid_cols
    id_grid = np.full(size, missing, dtype=np.int64)
    z_grid = np.full(size, np.inf)
    id_grid[cells] = object_ids
    z_grid[cells] = z
    # Only labelled points can carry a bled label: test those alone.
    labelled = np.flatnonzero(object_ids >= 0)
    own_ids, own_z, own_cells = object_ids[labelled], z[labelled], cells[labelled]
    tolerance = config.depth_edge_tolerance_m + config.depth_edge_tolerance_relative * own_z
    own_elsewhere = np.zeros(len(labelled), dtype=bool)
    other_here = np.zeros(len(labelled), dtype=bool)
    for d_row, d_col in NEIGHBOUR_OFFSETS:
        neighbours = own_cells + (d_row * grid_width + d_col)
        neighbour_ids = id_grid[neighbours]
        same_surface = np.abs(z_grid[neighbours] - own_z) <= tolerance
        same_id = neighbour_ids == own_ids
        own_elsewhere |= same_id & ~same_surface
        other_here |= ~same_id & (neighbour_ids != missing) & same_surface
    bled = np.zeros(len(object_ids), dtype=bool)
    bled[labelled] = own_elsewhere & other_here
    return bled


def _read_color(path: str, upright_turns: int = 0) -> np.ndarray:
    try:
        with Image.open(path) as image:
            return upright(np.asarray(image.convert("RGB")), upright_turns)
    except FileNotFoundError as error:
        raise FrameError(f"missing colour image: {error}", path) from error
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise FrameError(f"unreadable colour image: {error}", path) from error


def frame_problem(record: FrameRecord) -> str:
    """Problems that can be seen without reading files: a non-rigid pose, bad intrinsics."""
    problem = rigid_pose_problem(record.pose)
    if problem:
        return problem
    for name, matrix in (("depth", record.depth_intrinsics), ("colour", record.color_intrinsics)):
        if not np.all(np.isfinite(matrix)) or matrix[0, 0] <= 0 or matrix[1, 1] <= 0:
            return f"bad {name} intrinsics: {matrix.reshape(-1).tolist()}"
    return ""


@dataclass(frozen=True)
class MaskView:
    """One frame's strided depth grid with the object id of each grid pixel: what the label vote looks up."""

    frame_index: int
    world_to_camera: np.ndarray  # (4, 4)
    intrinsics: np.ndarray  # (3, 3) depth intrinsics (full resolution)
    stride: int
    depth: np.ndarray  # (H', W') float32 metres on the grid, 0 where none
    object_ids: np.ndarray  # (H', W') int32 on the grid, NO_OBJECT where none
    top_rays: dict[int, np.ndarray] = field(default_factory=dict)  # object id -> mask_top_rays' (2, 3) ray
    # object ids whose mask touches the image border
    cut_off_objects: frozenset[int] = field(default_factory=frozenset)


def border_objects(labels: np.ndarray) -> frozenset[int]:
    """The objects whose instance mask touches the image border (the frame cuts them off).

    ``labels`` holds ``objectId + 1`` per colour pixel (0 where none).

    >>> labels = np.zeros((4, 6), dtype=np.int32); labels[0, 2] = 3; labels[1:3, 1:3] = 5
    >>> sorted(border_objects(labels))
    [2]
    """
    edges = np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])
    return frozenset(int(label) - 1 for label in np.unique(edges) if label > 0)


def mask_top_rays(
    labels: np.ndarray, color_intrinsics: np.ndarray, pose: np.ndarray
) -> dict[int, np.ndarray]:
    """Per object in an instance image, the world ray through the middle of its mask's topmost row.

    ``labels`` holds ``objectId + 1`` per colour pixel (0 where none); a ray is ``[origin, direction]``
    (a (2, 3) array, world frame, direction not normalised). Every pixel of a mask lies on the
    object, so the object reaches at least as high as some point of that ray where it crosses the
    object's footprint, wherever the depth of a thin top (a bottle's neck) was too narrow to be fused.

    >>> labels = np.zeros((4, 6), dtype=np.int32); labels[1, 2:5] = 3; labels[2:, 1:5] = 3
    >>> ray = mask_top_rays(labels, np.array([[2.0, 0, 3], [0, 2.0, 2], [0, 0, 1]]), np.eye(4))[2]
    >>> ray.tolist()
    [[0.0, 0.0, 0.0], [0.0, -0.5, 1.0]]
    """
    rays = {}
    rotation, origin = pose[:3, :3], pose[:3, 3]
    for index, box in enumerate(ndimage.find_objects(labels)):
        if box is None:
            continue
        label = index + 1
        row = box[0].start
        columns = box[1].start + np.flatnonzero(labels[row, box[1]] == label)
        direction_camera = np.array(
            [
                (float(columns.mean()) - color_intrinsics[0, 2]) / color_intrinsics[0, 0],
                (row - color_intrinsics[1, 2]) / color_intrinsics[1, 1],
                1.0,
            ]
        )
        rays[label - 1] = np.stack([origin, rotation @ direction_camera])
    return rays


@dataclass
class FramePoints:
    """One frame's back-projected points in the world frame."""

    frame_index: int
    points: np.ndarray  # (N, 3) float32, world frame
    normals: np.ndarray  # (N, 3) float32, world frame, NaN where unknown
    colors: np.ndarray | None  # (N, 3) uint8
    object_ids: np.ndarray  # (N,) int32, NO_OBJECT where none
    view: MaskView | None = None  # the grid's depth and ids, when the ids came from an instance mask


def _usable_depth(record: FrameRecord, config: FusionSettings) -> np.ndarray:
    """The frame's metric depth with readings outside ``[min_depth_m, max_depth_m]`` set to 0; raises
    :class:`FrameError` for an unusable frame (bad pose or intrinsics, missing colour, bad depth)."""
    problem = frame_problem(record)
    if problem:
        raise FrameError(problem, record.depth_path)
    if not Path(record.color_path).is_file():
        # A frame without its colour image can show no question; leave it out of the scan from the start.
        raise FrameError(f"missing colour image: {record.color_path}", record.color_path)
    depth = read_depth_m(record.depth_path, record.depth_scale, record.upright_turns)
    if depth.shape != (record.depth_size[1], record.depth_size[0]):
        raise FrameError(
            f"depth image is {depth.shape[1]}x{depth.shape[0]}, the table says "
            f"{record.depth_size[0]}x{record.depth_size[1]}",
            record.depth_path,
        )
    problem = depth_problem(depth, config.min_valid_depth_fraction)
    if problem:
        raise FrameError(problem, record.depth_path)
    with np.errstate(invalid="ignore"):
        return np.where((depth >= config.min_depth_m) & (depth <= config.max_depth_m), depth, 0.0)


def _grid_points(
    record: FrameRecord,
    depth: np.ndarray,
    stride: int,
    config: FusionSettings,
    with_colors: bool,
    with_instances: bool,
    labelled_only: bool = False,
) -> FramePoints:
    """Back-project the strided grid of ``depth`` (flying pixels of the grid are set to 0 in ``depth``).

    With ``labelled_only`` only the points that carry an object id are kept (and their normals and
    world positions computed).
    """
    depth[::stride, ::stride][flying_pixels(depth, stride, config)] = 0.0
    points_camera, rows, cols = backproject_depth(depth, record.depth_intrinsics, stride)
    if points_camera.shape[0] == 0:
        raise FrameError(
            f"empty depth: no pixel between {config.min_depth_m} m and {config.max_depth_m} m",
            record.depth_path,
        )
    colors = None
    view = None
    object_ids = np.full(points_camera.shape[0], NO_OBJECT, dtype=np.int32)
    if with_colors or with_instances:
        uv, _ = project_points(points_camera, record.color_intrinsics)
        width, height = record.color_size
        pixel_cols = np.clip(np.round(uv[:, 0]).astype(np.int64), 0, width - 1)
        pixel_rows = np.clip(np.round(uv[:, 1]).astype(np.int64), 0, height - 1)
        inside = (uv[:, 0] > -0.5) & (uv[:, 0] < width - 0.5) & (uv[:, 1] > -0.5) & (uv[:, 1] < height - 0.5)
        if with_colors:
            color_image = _read_color(record.color_path, record.upright_turns)
            if color_image.shape[:2] != (height, width):
                raise FrameError(
                    f"colour image is {color_image.shape[1]}x{color_image.shape[0]}, the table says {width}x{height}",
                    record.color_path,
                )
            colors = color_image[pixel_rows, pixel_cols]
        if with_instances:
            instance_path = record.instance_path
            # The callers read instances only for frames that have a mask (``reads_instances``).
            assert instance_path is not None
            if config.erode_instance_boundaries:
                ids = read_instance_ids(
                    instance_path, erode_boundaries=True, upright_turns=record.upright_turns
                )
                labels = np.maximum(ids + 1, 0)
            else:
                ids = read_instance_labels(
                    instance_path, record.upright_turns
                )  # objectId + 1: shifted below, at the points only
                labels = ids
            if ids.shape != (height, width):
                raise FrameError(
                    f"instance mask is {ids.shape[1]}x{ids.shape[0]}, the colour image is {width}x{height}",
                    record.instance_path,
                )
            point_ids = ids[pixel_rows, pixel_cols].astype(np.int32)
            if not config.erode_instance_boundaries:
                point_ids -= 1
            object_ids = np.where(inside, point_ids, NO_OBJECT).astype(np.int32)
            bled = bled_labels(object_ids, points_camera[:, 2], rows, cols, stride, config)
            object_ids[bled] = NO_OBJECT
            grid_ids = np.full(depth[::stride, ::stride].shape, NO_OBJECT, dtype=np.int32)
            grid_ids[rows // stride, cols // stride] = object_ids
            view = MaskView(
                record.frame_index,
                np.linalg.inv(record.pose),
                record.depth_intrinsics,
                stride,
                depth[::stride, ::stride].astype(np.float32),
                grid_ids,
                mask_top_rays(labels, record.color_intrinsics, record.pose),
                border_objects(labels),
            )
    if labelled_only:
        keep = np.flatnonzero(object_ids >= 0)
        points_camera, rows, cols, object_ids = points_camera[keep], rows[keep], cols[keep], object_ids[keep]
        colors = None if colors is None else colors[keep]
    normals_camera = depth_normals_at(depth, record.depth_intrinsics, rows, cols, stride)
    return FramePoints(
        frame_index=record.frame_index,
        points=transform_points(record.pose, points_camera).astype(np.float32),
        normals=rotate_vectors(record.pose, normals_camera).astype(np.float32),
        colors=colors,
        object_ids=object_ids,
        view=view,
    )


def frame_points(
    record: FrameRecord, config: FusionSettings = DEFAULT_FUSION_SETTINGS, with_instances: bool = True
) -> FramePoints:
    """Back-project one frame; raises :class:`FrameError` naming the reason and the file.

    Every ``pixel_stride``-th depth row and column is used (picked from the depth size when 0, see
    :meth:`FusionSettings.stride_for`).
    """
    depth = _usable_depth(record, config)
    stride = config.stride_for(record.depth_size, with_instances)
    reads_instances = with_instances and record.instance_path is not None
    return _grid_points(record, depth, stride, config, config.store_cloud_colors, reads_instances)


def _labelled(points: FramePoints) -> FramePoints:
    """The points that carry an object id."""
    keep = points.object_ids >= 0
    return FramePoints(
        frame_index=points.frame_index,
        points=points.points[keep],
        normals=points.normals[keep],
        colors=None,
        object_ids=points.object_ids[keep],
        view=points.view,
    )


def frame_clouds(
    record: FrameRecord, config: FusionSettings = DEFAULT_FUSION_SETTINGS, with_instances: bool = True
) -> tuple[FramePoints, FramePoints]:
    """One frame's points for the scene cloud and its labelled object points; raises :class:`FrameError`.

    The scene cloud comes from the grid of :meth:`FusionSettings.scene_stride_for`, the object points
    from the (finer or equal) grid of :meth:`FusionSettings.stride_for`; when the two grids are one,
    the object points are the scene points that carry an id. Without instances the object points are
    empty. The scene points are exactly what :func:`frame_points` gives at the scene stride without
    instances, so a scan's scene cloud does not depend on where its objects come from.
    """
    depth = _usable_depth(record, config)
    stride = config.stride_for(record.depth_size, with_instances)
    scene_stride = config.scene_stride_for(record.depth_size, with_instances)
    reads_instances = with_instances and record.instance_path is not None
    if scene_stride == stride:
        scene = _grid_points(record, depth, stride, config, config.store_cloud_colors, reads_instances)
        return scene, _labelled(scene)
    scene = _grid_points(record, depth.copy(), scene_stride, config, config.store_cloud_colors, False)
    if not reads_instances:
        return scene, _labelled(scene)
    return scene, _grid_points(record, depth, stride, config, False, True, labelled_only=True)


DENSE_VOXEL_GRID_CELLS = 50_000_000
"""Voxel grids up to this many cells are indexed by counting (linear time) instead of sorting the keys."""


def voxel_indices(keys: np.ndarray) -> np.ndarray:
    """Each point's voxel as an index into the occupied voxels in key order (x, then y, then z), from its
    non-negative integer voxel keys ``(N, 3)``: counted on the dense grid when it is small enough, else sorted.

    >>> voxel_indices(np.array([[2, 0, 0], [0, 1, 0], [2, 0, 0], [0, 0, 5]])).tolist()
    [2, 1, 2, 0]
    """
    return _voxel_indices_of_columns(keys[:, 0], keys[:, 1], keys[:, 2])


def _voxel_indices_of_columns(key_x: np.ndarray, key_y: np.ndarray, key_z: np.ndarray) -> np.ndarray:
    """:func:`voxel_indices` from the three key columns (contiguous columns are read several times faster)."""
    span_y, span_z = int(key_y.max()) + 1, int(key_z.max()) + 1
    flat = key_x * (span_y * span_z)
    flat += key_y * span_z
    flat += key_z
    cells = (int(key_x.max()) + 1) * span_y * span_z
    if cells > DENSE_VOXEL_GRID_CELLS:
        return np.unique(flat, return_inverse=True)[1].reshape(-1)
    occupied = np.zeros(cells, dtype=bool)
    occupied[flat] = True
    rank = np.cumsum(occupied, dtype=np.int64)
    rank -= 1
    return rank[flat]


@overload
def voxel_downsample(
    points: np.ndarray, voxel_size: float, normals: np.ndarray, colors: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]: ...


@overload
def voxel_downsample(
    points: np.ndarray, voxel_size: float, normals: None = None, colors: np.ndarray | None = None
) -> tuple[np.ndarray, None, np.ndarray | None]: ...


def voxel_downsample(
    points: np.ndarray, voxel_size: float, normals: np.ndarray | None = None, colors: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Voxel-downsample: the mean of the points, normals and colours of each occupied voxel, in voxel order.

    The voxels are open3d's (``voxel_down_sample``: a grid whose corner lies half a voxel below the
    points' minimum), averaged with numpy (:func:`voxel_indices`, sums by ``bincount``), which
    costs a fraction of open3d's hash map on a million points. Unknown (NaN) normals are averaged as
    zeros; the averaged normals are renormalised, and voxels with no known normal get NaN.

    >>> pts = np.array([[0.0, 0, 0], [0.001, 0, 0], [1, 1, 1]])
    >>> down, _, _ = voxel_downsample(pts, 0.1)
    >>> len(down), down[0].tolist()
    (2, [0.0005, 0.0, 0.0])
    """
    if len(points) == 0:
        empty = np.zeros((0, 3))
        return (
            empty,
            (empty.copy() if normals is not None else None),
            (np.zeros((0, 3), np.uint8) if colors is not None else None),
        )
    # Column by column (each contiguous, float64): the same arithmetic per point as on the (N, 3) array.
    columns = np.asarray(points, dtype=np.float64).T.copy()
    keys = []
    for column in columns:
        lowest = column.min() - voxel_size * 0.5
        keys.append(np.floor((column - lowest) / voxel_size).astype(np.int64))
    voxel_of_point = _voxel_indices_of_columns(*keys)
    counts = np.bincount(voxel_of_point).astype(np.float64)

    def voxel_means(values: np.ndarray) -> np.ndarray:
        """Per-voxel means of ``(C, N)`` columns, as ``(voxels, C)``."""
        sums = np.empty((len(counts), len(values)))
        for axis, column in enumerate(values):
            sums[:, axis] = np.bincount(voxel_of_point, weights=column, minlength=len(counts))
        return sums / counts[:, None]

    down_points = voxel_means(columns)
    down_normals = None
    if normals is not None:
        normal_columns = np.asarray(normals, dtype=np.float64).T.copy()
        normal_columns[np.isnan(normal_columns)] = 0.0
        down_normals = voxel_means(normal_columns)
        length = np.linalg.norm(down_normals, axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            down_normals = np.where(length > 1e-6, down_normals / length, np.nan)
    down_colors = None
    if colors is not None:
        means = voxel_means(np.asarray(colors, dtype=np.float64).T / 255.0)
        down_colors = np.clip(np.round(means * 255.0), 0, 255).astype(np.uint8)
    return down_points, down_normals, down_colors


@dataclass
class FusedScene:
    """The fused scene: a downsampled cloud, per-object clouds, and which frames were used."""

    points: np.ndarray
    normals: np.ndarray
    colors: np.ndarray | None
    object_points: dict[int, tuple[np.ndarray, np.ndarray]]
    used_frames: list[int]
    failures: list[tuple[str, str | None, str]] = field(default_factory=list)  # (record_id, file, reason)
    votes_dropped: dict[int, int] = field(default_factory=dict)  # object id -> points the label vote dropped
    top_rays: dict[int, list[np.ndarray]] = field(default_factory=dict)  # object id -> its masks' top rays
    # object id -> the frames whose mask of it touches the image border
    cut_off_frames: dict[int, set[int]] = field(default_factory=dict)


def fuse_frames(
    records: Iterable[FrameRecord],
    config: FusionSettings = DEFAULT_FUSION_SETTINGS,
    with_instances: bool = True,
    progress: bool = False,
) -> FusedScene:
    """Fuse frames into a scene cloud and per-object clouds (world frame); bad frames are listed in ``failures``.

    Object clouds are built only when ``with_instances`` and the frames carry instance masks; the
    scene cloud comes from the grid of :meth:`FusionSettings.scene_stride_for` (see :func:`frame_clouds`).
    """
    records = list(records)
    points, normals, colors = [], [], []
    object_points_of_frames, object_normals_of_frames, object_ids_of_frames = [], [], []
    views: list[MaskView] = []
    used: list[int] = []
    failures: list[tuple[str, str | None, str]] = []
    for record in tqdm(records, desc="fusing frames", disable=not progress, leave=False):
        try:
            scene, objects = frame_clouds(record, config, with_instances=with_instances)
        except FrameError as error:
            logger.warning("skipping frame %s: %s", record.record_id, error.reason)
            failures.append((record.record_id, error.source_file, error.reason))
            continue
        used.append(record.frame_index)
        points.append(scene.points)
        normals.append(scene.normals)
        if scene.colors is not None:
            colors.append(scene.colors)
        object_points_of_frames.append(objects.points)
        object_normals_of_frames.append(objects.normals)
        object_ids_of_frames.append(objects.object_ids)
        if objects.view is not None:
            views.append(objects.view)
    if not used:
        return FusedScene(np.zeros((0, 3)), np.zeros((0, 3)), None, {}, [], failures)
    all_colors = np.concatenate(colors) if len(colors) == len(points) else None
    scene_points, scene_normals, scene_colors = voxel_downsample(
        np.concatenate(points), config.scene_voxel_size_m, np.concatenate(normals), all_colors
    )
    object_ids = np.concatenate(object_ids_of_frames)
    object_points: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    if object_ids.size:
        labelled_points = np.concatenate(object_points_of_frames)
        labelled_normals = np.concatenate(object_normals_of_frames)
        order = np.argsort(object_ids, kind="stable")
        boundaries = np.flatnonzero(np.diff(object_ids[order])) + 1
        for chunk in np.split(order, boundaries):
            down_points, down_normals, _ = voxel_downsample(
                labelled_points[chunk], config.object_voxel_size_m, labelled_normals[chunk]
            )
            object_points[int(object_ids[chunk[0]])] = (down_points, down_normals)
    votes_dropped: dict[int, int] = {}
    if views and config.mask_vote_min_share > 0 and object_points:
        object_points, votes_dropped = _vote_object_points(object_points, views, config)
    top_rays: dict[int, list[np.ndarray]] = {}
    cut_off_frames: dict[int, set[int]] = {}
    for view in views:
        for object_id, ray in view.top_rays.items():
            top_rays.setdefault(object_id, []).append(ray)
        for object_id in view.cut_off_objects:
            cut_off_frames.setdefault(object_id, set()).add(view.frame_index)
    return FusedScene(
        scene_points,
        scene_normals,
        scene_colors,
        object_points,
        used,
        failures,
        votes_dropped,
        top_rays,
        cut_off_frames,
    )


def mask_votes(
    points: np.ndarray, object_ids: np.ndarray, views: list[MaskView], config: FusionSettings
) -> tuple[np.ndarray, np.ndarray]:
    """Per point, how many frames see its object there (``support``) and how many see something else there
    (``against``): the multi-view label vote of instance-mask object points.

    Each frame's grid decides about a point that projects into it onto a valid depth pixel: when the
    grid (within ``mask_vote_radius_px``) holds the point's object id at the point's depth (within the
    surface tolerance ``mask_vote_tolerance_m + mask_vote_tolerance_relative * z``), it supports the
    point; when the pixel's surface lies behind the point (the frame looks through it: free space), or
    at the point's depth with another id (a wall the mask bled onto), it votes against; when the
    pixel's surface lies in front (the point is occluded there), the frame does not vote.

    >>> view = MaskView(0, np.eye(4), np.array([[2.0, 0, 2], [0, 2.0, 2], [0, 0, 1]]), 1,
    ...     np.full((5, 5), 2.0, np.float32), np.pad(np.full((1, 1), 7, np.int32), 2, constant_values=-1))
    >>> points = np.array([[0.0, 0.0, 2.0], [1.0, 1.0, 2.0], [1.0, 1.0, 1.0], [0.0, 0.0, 3.0]])
    >>> class ExactProjection(FusionSettings):  # the constants are class attributes: a subclass overrides them
    ...     mask_vote_radius_px = 0
    >>> support, against = mask_votes(points, np.full(4, 7), [view], ExactProjection())
    >>> support.tolist(), against.tolist()
    ([1, 0, 0, 0], [0, 1, 1, 0])
    """
    support = np.zeros(len(points), dtype=np.int32)
    against = np.zeros(len(points), dtype=np.int32)
    radius = config.mask_vote_radius_px
    offsets = [(dr, dc) for dr in range(-radius, radius + 1) for dc in range(-radius, radius + 1) if dr or dc]
    for view in views:
        height, width = view.depth.shape
        # Element-wise (no BLAS threads); only the points in front of the camera are projected.
        camera = transform_points(view.world_to_camera, points)
        in_front = np.flatnonzero(camera[:, 2] > 1e-6)
        z = camera[in_front, 2]
        u = (view.intrinsics[0, 0] * camera[in_front, 0] / z + view.intrinsics[0, 2]) / view.stride
        v = (view.intrinsics[1, 1] * camera[in_front, 1] / z + view.intrinsics[1, 2]) / view.stride
        col = np.round(u).astype(np.int64)
        row = np.round(v).astype(np.int64)
        on_grid = (col >= 0) & (col < width) & (row >= 0) & (row < height)
        inside = in_front[on_grid]
        cell = row[on_grid] * width + col[on_grid]
        z_in, own_id = z[on_grid], object_ids[inside]
        depth_cells, id_cells = view.depth.ravel(), view.object_ids.ravel()
        observed = depth_cells[cell]
        valid = observed > 0
        tolerance = config.mask_vote_tolerance_m + config.mask_vote_tolerance_relative * z_in
        sees_own = valid & (id_cells[cell] == own_id) & (np.abs(observed - z_in) <= tolerance)
        undecided = np.flatnonzero(valid & ~sees_own & (observed >= z_in - tolerance))
        near_own = np.zeros(len(undecided), dtype=bool)
        if len(undecided):
            row_u, col_u = row[on_grid][undecided], col[on_grid][undecided]
            z_u, id_u, tolerance_u = z_in[undecided], own_id[undecided], tolerance[undecided]
            for d_row, d_col in offsets:
                neighbour = np.clip(row_u + d_row, 0, height - 1) * width + np.clip(
                    col_u + d_col, 0, width - 1
                )
                near_own |= (id_cells[neighbour] == id_u) & (
                    np.abs(depth_cells[neighbour] - z_u) <= tolerance_u
                )
        sees_own[undecided[near_own]] = True
        support[inside[sees_own]] += 1
        against[inside[undecided[~near_own]]] += 1
    return support, against


def _vote_object_points(
    object_points: dict[int, tuple[np.ndarray, np.ndarray]], views: list[MaskView], config: FusionSettings
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], dict[int, int]]:
    """Each object's points that the frames' masks confirm (:func:`mask_votes`); points no frame decides about stay."""
    ids = sorted(object_points)
    points = np.concatenate([object_points[object_id][0] for object_id in ids])
    owners = np.concatenate([np.full(len(object_points[object_id][0]), object_id) for object_id in ids])
    if len(views) > config.mask_vote_max_views:
        chosen = np.unique(
            np.linspace(0, len(views) - 1, config.mask_vote_max_views).round().astype(np.int64)
        )
        views = [views[index] for index in chosen]
    support, against = mask_votes(points, owners, views, config)
    keep = support >= config.mask_vote_min_share * (support + against)
    kept: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    dropped: dict[int, int] = {}
    start = 0
    for object_id in ids:
        own_points, own_normals = object_points[object_id]
        own_keep = keep[start : start + len(own_points)]
        start += len(own_points)
        kept[object_id] = (own_points[own_keep], own_normals[own_keep])
        dropped[object_id] = int(len(own_points) - own_keep.sum())
    return kept, dropped
