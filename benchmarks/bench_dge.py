"""Benchmark: seconds to build ``scene_geometry`` + ``frame_visibility`` for one 50-frame 640x480 scan.

Generates (once, cached under ``--work-dir``) a one-room sample world with 50 RGB-D frames at
640x480 (depth at full resolution), then times the pure functions behind the two assets, for the
object-point sources ``mesh`` (the default when a scan has a segmented mesh) and
``instance_masks`` (fused frame points); visibility is cast against the scan's mesh. The scan is
realistic by default (noisy depth, pose error, over-segmented mesh; ``--scan-realism exact`` for the
generator's exact scan). Target: at most 3 s CPU per scene on 2 cores.

    .venv/bin/python benchmarks/bench_dge.py [--frames 50] [--width 640] [--height 480] [--repeats 3] [--scan-realism exact]
    .venv/bin/python benchmarks/bench_dge.py --tiny    # smoke run: 3 frames at 160x120, one repeat
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
from assets.dge.visibility import build_frame_visibility
from assets.sample_world.config import SampleWorldConfig
from assets.sample_world.generator import generate_sample_world
from readers.scannet import read_scannet

logger = logging.getLogger("bench_dge")

TINY = {"frames": 3, "width": 160, "height": 120, "repeats": 1}
"""Defaults under `--tiny` (explicit flags still win)."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    # Scene
    parser.add_argument("--frames", type=int, default=50, help="RGB-D frames of the scan")
    parser.add_argument("--width", type=int, default=640, help="colour and depth width")
    parser.add_argument("--height", type=int, default=480, help="colour and depth height")
    parser.add_argument("--seed", type=int, default=3, help="sample world seed")
    # Run
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per configuration")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench_dge",
        help="where the scene is cached",
    )
    parser.add_argument(
        "--scan-realism",
        choices=("realistic", "exact"),
        default="realistic",
        help="the sample world's scan mode (realistic: noisy depth, pose error, over-segmented mesh)",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    return parser.parse_args(argv)


def scene_tables(args: argparse.Namespace) -> tuple[pl.DataFrame, dict]:
    """Generate (or reuse) the benchmark scan and read it as ``rgbd_frames`` rows and its ``rgbd_scenes`` row."""
    root = args.work_dir / f"world_{args.frames}_{args.width}x{args.height}_s{args.seed}_{args.scan_realism}"
    if not (root / "truth" / "world.json").is_file():
        started = time.perf_counter()
        generate_sample_world(
            SampleWorldConfig(
                root=root,
                seed=args.seed,
                num_scenes=1,
                views_per_scene=args.frames,
                width=args.width,
                height=args.height,
                depth_downsample=1,
                min_objects=10,
                max_objects=12,
                scan_realism=args.scan_realism,
                show_progress=False,
            )
        )
        logger.info("generated the benchmark scan in %.1f s", time.perf_counter() - started)
    tables = read_scannet(root / "scannet" / "scans")
    return tables.frames, tables.scenes.row(0, named=True)


def time_once(frames: pl.DataFrame, scene: dict, source: str) -> tuple[float, float, int, int, float]:
    cpu_started = time.process_time()
    started = time.perf_counter()
    geometry = build_scan_geometry(frames, scene, SceneGeometrySettings(object_points_source=source))
    middle = time.perf_counter()
    visibility = build_frame_visibility(geometry, frames, scene=scene)
    finished = time.perf_counter()
    cpu = time.process_time() - cpu_started
    return middle - started, finished - middle, len(geometry.objects), visibility.height, cpu


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = parse_args(argv)
    frames, scene = scene_tables(args)
    sys.stdout.write(
        f"scan {scene['scene_id']}: {frames.height} frames, colour {frames['color_width'][0]}x{frames['color_height'][0]}, "
        f"depth {frames['depth_width'][0]}x{frames['depth_height'][0]}, {len(scene['objects'])} objects; "
        f"{os.cpu_count()} CPUs\n"
    )
    for source in ("mesh", "instance_masks"):
        runs = [time_once(frames, scene, source) for _ in range(args.repeats)]
        geometry_s = min(run[0] for run in runs)
        visibility_s = min(run[1] for run in runs)
        sys.stdout.write(
            f"{source:15s} scene_geometry {geometry_s:6.2f} s + frame_visibility {visibility_s:5.2f} s "
            f"= {geometry_s + visibility_s:6.2f} s per scene (best of {args.repeats}; "
            f"{runs[0][2]} objects, {runs[0][3]} visibility rows; CPU {min(run[4] for run in runs):.2f} s)\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
