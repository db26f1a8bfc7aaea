"""`spatial-sample-world`: generate the sample world from the command line.

Example:
    spatial-sample-world --out data/sample_world --scenes 12 --views 6 --seed 0 --width 320 --height 240
    spatial-sample-world --out data/handheld --views 24 --camera-path handheld
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from assets.sample_world.config import (
    CAMERA_PATHS,
    DEFAULT_WORLD_ARKITSCENES_VIDEOS,
    DEFAULT_WORLD_SCANNETPP_SCENES,
    SampleWorldConfig,
    default_root,
)
from assets.sample_world.generator import generate_sample_world

logger = logging.getLogger(__name__)


def make_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of `spatial-sample-world`."""
    defaults = SampleWorldConfig(root=Path("."))
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    # Output
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="Output folder (default: $SPATIAL_DATA_ROOT/sample_world, else data/sample_world).",
    )
    # World size
    parser.add_argument("--scenes", type=int, default=defaults.num_scenes, help="Number of rooms.")
    parser.add_argument("--views", type=int, default=defaults.views_per_scene, help="Camera views per room.")
    parser.add_argument("--seed", type=int, default=defaults.seed, help="Random seed.")
    parser.add_argument("--width", type=int, default=defaults.width, help="Colour image width.")
    parser.add_argument("--height", type=int, default=defaults.height, help="Colour image height.")
    parser.add_argument(
        "--depth-downsample",
        type=int,
        default=defaults.depth_downsample,
        help="Depth image = colour size / this.",
    )
    parser.add_argument(
        "--min-objects", type=int, default=defaults.min_objects, help="Fewest objects per room."
    )
    parser.add_argument(
        "--max-objects", type=int, default=defaults.max_objects, help="Most objects per room."
    )
    parser.add_argument(
        "--camera-path",
        choices=CAMERA_PATHS,
        default=defaults.camera_path,
        help="'mixed' (default): the rooms take the other four paths in turn; 'loop': once around the room looking "
        "inward; 'handheld': walks and pans in place, so cameras stand behind each other and turn; 'partial': the "
        "loop's first third, a capture of part of the room; 'lookaround': turns once around on the spot "
        "(SampleWorldConfig.camera_path).",
    )
    parser.add_argument(
        "--arkitscenes-videos",
        type=int,
        default=DEFAULT_WORLD_ARKITSCENES_VIDEOS,
        help="Further rooms written as ARKitScenes 3dod videos (SampleWorldConfig.arkitscenes_videos).",
    )
    parser.add_argument(
        "--scannetpp-scenes",
        type=int,
        default=DEFAULT_WORLD_SCANNETPP_SCENES,
        help="Further rooms written as ScanNet++ scenes (SampleWorldConfig.scannetpp_scenes; needs a 4:3 size).",
    )
    parser.add_argument(
        "--scan-realism",
        choices=("realistic", "exact"),
        default=defaults.scan_realism,
        help="'realistic': Kinect-like depth noise, holes, pose errors and an over-segmented mesh; 'exact': "
        "the generator's exact geometry (SampleWorldConfig.scan_realism).",
    )
    # Output details
    parser.add_argument("--no-progress", action="store_true", help="Hide the progress bar.")
    parser.add_argument("--json", action="store_true", help="Print the summary as JSON.")
    parser.add_argument("--verbose", "-v", action="store_true", help="Log at INFO level.")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:  # doctest: +ELLIPSIS
    ...     main(["--out", f"{folder}/w", "--scenes", "1", "--views", "2", "--width", "64", "--height", "48", "--no-progress"])
    sample world: ...
    0
    """
    args = make_parser(prog="spatial-sample-world").parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        config = SampleWorldConfig(
            root=args.out if args.out is not None else default_root(),
            seed=args.seed,
            num_scenes=args.scenes,
            views_per_scene=args.views,
            width=args.width,
            height=args.height,
            depth_downsample=args.depth_downsample,
            min_objects=args.min_objects,
            max_objects=args.max_objects,
            camera_path=args.camera_path,
            arkitscenes_videos=args.arkitscenes_videos,
            scannetpp_scenes=args.scannetpp_scenes,
            scan_realism=args.scan_realism,
            show_progress=not args.no_progress,
        )
    except ValueError as error:
        sys.stderr.write(f"spatial-sample-world: {error}\n")
        return 2
    summary = generate_sample_world(config)
    if args.json:
        sys.stdout.write(json.dumps(summary.as_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(
            f"sample world: {summary.root}\n"
            f"  scenes {summary.num_scenes}, views {summary.num_views}, objects {summary.num_objects}\n"
            f"  OmniSpatial {summary.num_omnispatial_questions} questions on {summary.num_omnispatial_images} images\n"
            f"  SpatiaLab {summary.num_spatialab_questions} questions on {summary.num_spatialab_images} images\n"
            f"  Visual Genome {summary.num_vg_images} images, {summary.num_vg_objects} objects, "
            f"{summary.num_vg_relationships} relationships\n"
            f"  COCO {summary.num_coco_annotations} annotations on {summary.num_coco_images} images\n"
            f"  scans in other layouts: {summary.num_arkitscenes_videos} ARKitScenes videos, "
            f"{summary.num_scannetpp_scenes} ScanNet++ scenes\n"
            f"  {summary.bytes_on_disk / 1e6:.1f} MB in {summary.seconds:.1f} s\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
