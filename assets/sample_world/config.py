"""Configuration of the sample world generator."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

GENERATOR_VERSION = "1.2"
"""Bumped whenever the same config would produce different files (used as the asset's code version)."""
CAMERA_PATHS = ("loop", "handheld", "partial", "lookaround", "mixed")
"""Values of `SampleWorldConfig.camera_path`."""
SCAN_REALISMS = ("realistic", "exact")
"""Values of `SampleWorldConfig.scan_realism`."""
DEFAULT_WORLD_CAMERA_PATH = "mixed"
"""The camera path of the default world: `SampleWorldConfig.camera_path`'s default, which the `sample_world` asset and
`spatial-sample-world` take too."""
DEFAULT_WORLD_ARKITSCENES_VIDEOS = 1
DEFAULT_WORLD_SCANNETPP_SCENES = 1
"""The default world (the `sample_world` asset's and `spatial-sample-world`'s) writes one more room as an
ARKitScenes video and one as a ScanNet++ scene, so a default build reads all three scan layouts; the config's own
defaults stay 0, the tests' small worlds."""
MIXED_CAMERA_PATHS = ("loop", "handheld", "partial", "lookaround")
"""The paths of a `"mixed"` world's scenes, in turn by scene index (scene 0 a loop, 1 hand-held, 2 partial,
3 look-around, 4 a loop, ...)."""


def default_root() -> Path:
    """The default output folder: `$SPATIAL_DATA_ROOT/sample_world`, else `./data/sample_world`.

    >>> default_root().name
    'sample_world'
    """
    return Path(os.environ.get("SPATIAL_DATA_ROOT", "data")) / "sample_world"


def _setting(default: object, help: str) -> Any:
    """A field of :class:`SampleWorldConfig` with its one description (``metadata["help"]``)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SampleWorldConfig:
    """Everything that decides what the sample world contains.

    The output is a pure function of these fields (the `root` only says where it goes): two runs with
    the same config write byte-identical files. Scene `i` depends only on `seed` and `i`, so a world
    with more scenes starts with the same scenes as a smaller one.

    Each field says what it does in its ``help`` (:func:`setting_help`): `spatial-sample-world --help` and the
    `sample_world` asset's run config show the same text.
    """

    root: Path = field(
        default_factory=default_root,
        metadata={
            "help": "Output folder (default: $SPATIAL_DATA_ROOT/sample_world, else data/sample_world). Replaced as "
            "a whole on success (it is built beside it first)."
        },
    )
    seed: int = _setting(0, "Seed of every random choice (numpy Generators seeded with (seed, scene index)).")
    num_scenes: int = _setting(
        12,
        "Number of ScanNet-like rooms (with their Visual Genome, OmniSpatial, SpatiaLab and COCO images); 0 for a "
        "world of ARKitScenes videos or ScanNet++ scenes only.",
    )
    views_per_scene: int = _setting(
        6,
        "Camera views (RGB-D frames) per room. Consecutive views move along the camera path at heights that rise "
        "and fall, so long sequences (50 frames) are smooth.",
    )
    width: int = _setting(320, "Colour image width in pixels.")
    height: int = _setting(240, "Colour image height in pixels.")
    depth_downsample: int = _setting(
        2,
        "Depth images are width / this x height / this (smaller than colour, as in ScanNet), with their own "
        "intrinsics. Must divide width and height.",
    )
    horizontal_fov_degrees: float = _setting(65.0, "Horizontal field of view of the colour camera (fx = fy).")
    min_objects: int = _setting(4, "Fewest objects per room (drawn uniformly up to max_objects).")
    max_objects: int = _setting(12, "Most objects per room.")
    room_width_range: tuple[float, float] = _setting((4.5, 7.0), "Room width range in metres (x).")
    room_depth_range: tuple[float, float] = _setting((4.5, 7.0), "Room depth range in metres (y).")
    room_height_range: tuple[float, float] = _setting((2.5, 3.0), "Room height range in metres (z).")
    object_wall_margin: float = _setting(
        0.8, "Floor objects keep this distance (m) from the walls; cameras move in the free band."
    )
    camera_wall_margin: float = _setting(0.35, "Distance (m) of the camera path from the walls.")
    camera_height_range: tuple[float, float] = _setting((0.9, 2.1), "Camera heights (m) above the floor.")
    camera_path: str = _setting(
        DEFAULT_WORLD_CAMERA_PATH,
        "'mixed' (the default world): the rooms take the four other paths in turn (MIXED_CAMERA_PATHS), so the "
        "DGE asks every task type and answer value; 'loop': the camera walks once around the room near the "
        "walls, looking inward; 'handheld': like a hand-held ScanNet capture, it walks toward or across the room "
        "and pans in place between walks (30-60 degrees), so cameras stand behind each other and turn "
        "(camera_motion asks 'turned left/right', camera_camera_position 'behind'); 'partial': the loop's first "
        "third, a capture of part of the room (room_size is then withheld: the walls behind the cameras are "
        "never seen); 'lookaround': the camera turns once around on the spot near the room's centre "
        "(camera_object_position asks 'behind'). Every path keeps CAMERA_OBJECT_CLEARANCE from every object.",
    )
    omnispatial_questions_per_image: int = _setting(
        2, "Most questions asked about one OmniSpatial-like image."
    )
    spatialab_questions_per_image: int = _setting(1, "Most questions asked about one SpatiaLab-like image.")
    max_relationships_per_image: int = _setting(15, "Most Visual-Genome-like relationships per image.")
    min_object_pixels: int = _setting(
        20, "Least visible pixels for an object to be annotated (Visual Genome, COCO)."
    )
    min_question_pixels: int = _setting(60, "Least visible pixels for an object to be named in a question.")
    min_question_visibility: float = _setting(
        0.4, "Least visible/unoccluded pixel ratio for an object to be named in a question."
    )
    jpeg_quality: int = _setting(
        95, "Quality of the JPEG files (ScanNet colour frames, Visual Genome images)."
    )
    truncation_stride: int = _setting(
        4, "Pixel stride of the extended image plane on which truncation is measured."
    )
    arkitscenes_videos: int = _setting(
        0,
        "Further rooms (after the ScanNet-like ones) written as ARKitScenes 3dod videos (arkitscenes/3dod/: "
        "256x192 frames stored rotated by their sky direction, a world-to-camera trajectory, oriented-box "
        "annotations). The default world writes DEFAULT_WORLD_ARKITSCENES_VIDEOS.",
    )
    scannetpp_scenes: int = _setting(
        0,
        "Further rooms (after those) written as ScanNet++ scenes (scannetpp/data/: the iPhone stream as the "
        "toolkit extracts it, the aligned mesh and its segment annotation); needs a 4:3 image size. The default "
        "world writes DEFAULT_WORLD_SCANNETPP_SCENES.",
    )
    scan_realism: str = _setting(
        "realistic",
        "'realistic': the scans carry Kinect-like depth noise and holes, small pose registration errors, an "
        "over-segmented mesh (each object the union of several segments) with annotated floor, walls and "
        "ceiling, and loose annotated boxes; 'exact': the generator's exact depth, poses, boxes and one segment "
        "per object part. Other formats and the truth file are the same in both modes.",
    )
    show_progress: bool = _setting(True, "Show a progress bar over scenes.")

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))
        if self.num_scenes < 0 or self.total_scenes < 1 or self.views_per_scene < 1:
            raise ValueError(
                "views_per_scene must be at least 1, and num_scenes at least 1 (or 0 beside ARKitScenes videos or "
                "ScanNet++ scenes)."
            )
        if self.width < 8 or self.height < 8:
            raise ValueError(f"Image size {self.width}x{self.height} is too small (at least 8x8).")
        if (
            self.depth_downsample < 1
            or self.width % self.depth_downsample
            or self.height % self.depth_downsample
        ):
            raise ValueError(
                f"depth_downsample={self.depth_downsample} must be >= 1 and divide width={self.width} "
                f"and height={self.height}."
            )
        if not 1 <= self.min_objects <= self.max_objects <= 16:
            raise ValueError("Need 1 <= min_objects <= max_objects <= 16.")
        for name in ("room_width_range", "room_depth_range", "room_height_range", "camera_height_range"):
            low, high = getattr(self, name)
            if not 0 < low <= high:
                raise ValueError(f"{name}={(low, high)} must satisfy 0 < low <= high.")
        if min(self.room_width_range[0], self.room_depth_range[0]) < 2 * self.object_wall_margin + 1.5:
            raise ValueError("Rooms are too small for the object wall margin (need 1.5 m of free floor).")
        if self.camera_height_range[1] >= self.room_height_range[0]:
            raise ValueError("Cameras must stay below the lowest ceiling.")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError("jpeg_quality must be in 1..100.")
        if not 0.0 <= self.min_question_visibility <= 1.0:
            raise ValueError("min_question_visibility must be in [0, 1].")
        if self.scan_realism not in SCAN_REALISMS:
            raise ValueError(f"scan_realism={self.scan_realism!r} must be 'realistic' or 'exact'.")
        if self.camera_path not in CAMERA_PATHS:
            raise ValueError(
                f"camera_path={self.camera_path!r} must be one of {', '.join(repr(path) for path in CAMERA_PATHS)}."
            )
        if self.truncation_stride < 1:
            raise ValueError("truncation_stride must be at least 1.")
        if self.arkitscenes_videos < 0 or self.scannetpp_scenes < 0:
            raise ValueError("arkitscenes_videos and scannetpp_scenes must be at least 0.")
        if self.scannetpp_scenes and self.width * 3 != self.height * 4:
            raise ValueError(
                f"ScanNet++ scenes need a 4:3 image size like the iPhone video's 1920x1440, got "
                f"{self.width}x{self.height}."
            )

    @property
    def total_scenes(self) -> int:
        """Every room of the world: the ScanNet-like scenes, then the ARKitScenes videos and ScanNet++ scenes."""
        return self.num_scenes + self.arkitscenes_videos + self.scannetpp_scenes

    @property
    def depth_width(self) -> int:
        """Depth image width in pixels."""
        return self.width // self.depth_downsample

    @property
    def depth_height(self) -> int:
        """Depth image height in pixels."""
        return self.height // self.depth_downsample


def setting_help(name: str) -> str:
    """The description of the :class:`SampleWorldConfig` field ``name``.

    >>> setting_help("width")
    'Colour image width in pixels.'
    """
    return SampleWorldConfig.__dataclass_fields__[name].metadata["help"]


def setting_default(name: str) -> Any:
    """The default of the :class:`SampleWorldConfig` field ``name`` (the default world's, for the other layouts).

    >>> setting_default("camera_path"), setting_default("arkitscenes_videos")
    ('mixed', 1)
    """
    defaults_of_the_default_world = {
        "arkitscenes_videos": DEFAULT_WORLD_ARKITSCENES_VIDEOS,
        "scannetpp_scenes": DEFAULT_WORLD_SCANNETPP_SCENES,
    }
    if name in defaults_of_the_default_world:
        return defaults_of_the_default_world[name]
    return SampleWorldConfig.__dataclass_fields__[name].default
