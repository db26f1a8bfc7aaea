"""Configuration of the sample world generator."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

GENERATOR_VERSION = "1.2"
"""Bumped whenever the same config would produce different files (used as the asset's code version)."""
CAMERA_PATHS = ("loop", "handheld", "partial", "lookaround", "mixed")
"""Values of `SampleWorldConfig.camera_path`."""
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


@dataclass(frozen=True)
class SampleWorldConfig:
    """Everything that decides what the sample world contains.

    The output is a pure function of these fields (the `root` only says where it goes): two runs with
    the same config write byte-identical files. Scene `i` depends only on `seed` and `i`, so a world
    with more scenes starts with the same scenes as a smaller one.

    Args:
        root (`Path`, *optional*, defaults to `data/sample_world`):
            Output folder. Replaced as a whole on success (it is built beside it first).
        seed (`int`, *optional*, defaults to 0):
            Seed of every random choice (numpy `Generator`s seeded with `(seed, scene_index)`).
        num_scenes (`int`, *optional*, defaults to 12):
            Number of ScanNet-like rooms (with their Visual Genome, OmniSpatial, SpatiaLab and COCO images);
            0 for a world of ARKitScenes videos or ScanNet++ scenes only.
        views_per_scene (`int`, *optional*, defaults to 6):
            Camera views (ScanNet frames) per room. Consecutive views move around the room along
            one loop, at heights that rise and fall, so long sequences (50 frames) are smooth.
        width, height (`int`, *optional*, defaults to 320 x 240):
            Colour image size in pixels.
        depth_downsample (`int`, *optional*, defaults to 2):
            Depth images are `width / depth_downsample` x `height / depth_downsample` (smaller than
            colour, as in ScanNet), with their own intrinsics. Must divide width and height.
        horizontal_fov_degrees (`float`, *optional*, defaults to 65.0):
            Horizontal field of view of the colour camera (fx = fy).
        min_objects, max_objects (`int`, *optional*, defaults to 4 and 12):
            Number of objects per room, drawn uniformly in this range.
        room_width_range, room_depth_range, room_height_range (`tuple[float, float]`):
            Room size ranges in metres (x, y, z).
        object_wall_margin (`float`, *optional*, defaults to 0.8):
            Floor objects keep this distance from the walls; cameras move in the free band.
        camera_wall_margin (`float`, *optional*, defaults to 0.35):
            Distance of the camera path from the walls.
        camera_height_range (`tuple[float, float]`, *optional*, defaults to (0.9, 2.1)):
            Camera heights above the floor.
        camera_path (`str`, *optional*, defaults to `"mixed"`, `DEFAULT_WORLD_CAMERA_PATH`):
            `"loop"`: the camera walks once around the room near the walls, looking inward. `"handheld"`:
            like a hand-held ScanNet capture, the camera walks toward or across the room (looking where
            it goes, so a later camera stands behind an earlier one, or sideways looking at the room),
            and pans in place between walks (consecutive frames at one position turning 30-60
            degrees). `"partial"`: a capture of part of the room, the loop's first third (its frames
            never see the walls behind the cameras). `"lookaround"`: the camera stands near the room's
            centre and turns once around on the spot (an object of the first frame is behind the camera
            halfway round). `"mixed"`: the scenes take the loop, the hand-held, the partial and the
            look-around paths in turn (`MIXED_CAMERA_PATHS`), so one world asks every answer value
            (the default world of the `sample_world` asset and of `spatial-sample-world`). All keep
            `CAMERA_OBJECT_CLEARANCE` from every object.
        omnispatial_questions_per_image (`int`, *optional*, defaults to 2):
            Most questions asked about one OmniSpatial-like image (they share the image).
        spatialab_questions_per_image (`int`, *optional*, defaults to 1):
            Most questions asked about one SpatiaLab-like image.
        max_relationships_per_image (`int`, *optional*, defaults to 15):
            Most Visual-Genome-like relationships per image.
        min_object_pixels (`int`, *optional*, defaults to 20):
            Least visible pixels for an object to be annotated (Visual Genome, COCO).
        min_question_pixels (`int`, *optional*, defaults to 60):
            Least visible pixels for an object to be named in a question.
        min_question_visibility (`float`, *optional*, defaults to 0.4):
            Least visible/unoccluded pixel ratio for an object to be named in a question.
        jpeg_quality (`int`, *optional*, defaults to 95):
            Quality of the JPEG files (ScanNet colour frames and Visual Genome images).
        truncation_stride (`int`, *optional*, defaults to 4):
            Pixel stride of the extended image plane on which truncation is measured.
        arkitscenes_videos (`int`, *optional*, defaults to 0):
            Further rooms (after the `num_scenes` ScanNet-like ones) written as ARKitScenes 3dod videos
            (`arkitscenes/3dod/`: 256x192 frames stored rotated by their sky direction, world-to-camera
            trajectory, oriented-box annotation; :mod:`assets.sample_world.scan_layouts`).
        scannetpp_scenes (`int`, *optional*, defaults to 0):
            Further rooms (after those) written as ScanNet++ scenes (`scannetpp/data/`: the iPhone stream as
            the toolkit extracts it, the aligned mesh and its segment annotation); needs a 4:3 image size.
        scan_realism (`str`, *optional*, defaults to `"realistic"`):
            `"realistic"`: the scans carry Kinect-like depth noise and holes, small pose registration
            errors, an over-segmented mesh (each object the union of several segments) with annotated
            floor, walls and ceiling, and loose annotated boxes (:mod:`assets.sample_world.realism`);
            `"exact"`: the generator's exact depth, poses, boxes and one segment per object part. Other
            formats and the truth file are the same in both modes.
        show_progress (`bool`, *optional*, defaults to True):
            Show a tqdm bar over scenes.
    """

    root: Path = field(default_factory=default_root)
    seed: int = 0
    num_scenes: int = 12
    views_per_scene: int = 6
    width: int = 320
    height: int = 240
    depth_downsample: int = 2
    horizontal_fov_degrees: float = 65.0
    min_objects: int = 4
    max_objects: int = 12
    room_width_range: tuple[float, float] = (4.5, 7.0)
    room_depth_range: tuple[float, float] = (4.5, 7.0)
    room_height_range: tuple[float, float] = (2.5, 3.0)
    object_wall_margin: float = 0.8
    camera_wall_margin: float = 0.35
    camera_height_range: tuple[float, float] = (0.9, 2.1)
    camera_path: str = DEFAULT_WORLD_CAMERA_PATH
    omnispatial_questions_per_image: int = 2
    spatialab_questions_per_image: int = 1
    max_relationships_per_image: int = 15
    min_object_pixels: int = 20
    min_question_pixels: int = 60
    min_question_visibility: float = 0.4
    jpeg_quality: int = 95
    truncation_stride: int = 4
    arkitscenes_videos: int = 0
    scannetpp_scenes: int = 0
    scan_realism: str = "realistic"
    show_progress: bool = True

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
        if self.scan_realism not in ("realistic", "exact"):
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
