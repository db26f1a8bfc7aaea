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
    SCAN_REALISMS,
    SampleWorldConfig,
    default_root,
    setting_default,
    setting_help,
)
from assets.sample_world.generator import generate_sample_world

logger = logging.getLogger(__name__)


FLAGS = {
    "--scenes": "num_scenes",
    "--views": "views_per_scene",
    "--seed": "seed",
    "--width": "width",
    "--height": "height",
    "--depth-downsample": "depth_downsample",
    "--min-objects": "min_objects",
    "--max-objects": "max_objects",
    "--camera-path": "camera_path",
    "--arkitscenes-videos": "arkitscenes_videos",
    "--scannetpp-scenes": "scannetpp_scenes",
    "--scan-realism": "scan_realism",
}
"""Flag -> the :class:`SampleWorldConfig` field it sets (its default and help are the field's)."""
CHOICES = {"camera_path": CAMERA_PATHS, "scan_realism": SCAN_REALISMS}


def make_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The argument parser of `spatial-sample-world`: one flag per field of :data:`FLAGS`, and the output's."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help=setting_help("root"))
    for flag, name in FLAGS.items():
        default = setting_default(name)
        if name in CHOICES:
            parser.add_argument(
                flag, dest=name, choices=CHOICES[name], default=default, help=setting_help(name)
            )
        else:
            parser.add_argument(flag, dest=name, type=type(default), default=default, help=setting_help(name))
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
            show_progress=not args.no_progress,
            **{name: getattr(args, name) for name in FLAGS.values()},
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
