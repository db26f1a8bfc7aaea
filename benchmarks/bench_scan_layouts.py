"""Benchmark: CPU seconds per scan of each scan data set's chain (read, ``scene_geometry``, ``frame_visibility``,
``dge_tasks``): ScanNet, ARKitScenes and ScanNet++.

Generates (once, cached under ``--work-dir``) a realistic sample world with one room per layout, ``--frames``
frames each on the hand-held path: a ScanNet scan (colour ``--width`` x ``--height``, depth half that), an
ARKitScenes video (256x192, stored rotated: sky direction Left) and a ScanNet++ scene (colour ``--width`` x
``--height``, depth 256x192). Then times, in this process, the pure functions behind the assets for each scan:
its reader (:func:`readers.scans.read_scan`), :func:`~assets.dge.geometry.build_scan_geometry` (objects from
the segmented mesh for ScanNet and ScanNet++, the annotated boxes for ARKitScenes),
:func:`~assets.dge.visibility.build_frame_visibility` and :func:`~assets.dge.tasks.build_scene_tasks`. CPU
seconds are the process's (every thread), ``--repeats`` times, the median printed.

    .venv/bin/python benchmarks/bench_scan_layouts.py [--frames 50] [--width 640] [--height 480] [--repeats 3]
    .venv/bin/python benchmarks/bench_scan_layouts.py --tiny    # smoke run: 3 frames at 160x120
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("bench_scan_layouts")

LAYOUTS = {
    "scannet": ("scannet/scans", "mesh"),
    "arkitscenes": ("arkitscenes/3dod", "annotated_boxes"),
    "scannetpp": ("scannetpp", "mesh"),
}
"""Per data set: its root in the sample world and the object source its scan uses."""
STAGES = ("read", "scene_geometry", "frame_visibility", "dge_tasks")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=50, help="frames per scan")
    parser.add_argument(
        "--width", type=int, default=640, help="colour width of the ScanNet and ScanNet++ scans"
    )
    parser.add_argument("--height", type=int, default=480, help="colour height (4:3 for ScanNet++)")
    parser.add_argument("--seed", type=int, default=3, help="sample world seed")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per scan (the median is printed)")
    parser.add_argument("--work-dir", type=Path, default=None, help="where the world is generated and kept")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    args = parser.parse_args(argv)
    if args.tiny:
        args.frames, args.width, args.height, args.repeats = 3, 160, 120, 1
    return args


def world_root(args: argparse.Namespace) -> Path:
    """The benchmark's world, generated unless the work folder already holds it."""
    from assets.sample_world import SampleWorldConfig, ensure_sample_world

    work = args.work_dir or Path(tempfile.gettempdir()) / "bench_scan_layouts"
    root = work / f"world_{args.frames}_{args.width}x{args.height}_{args.seed}"
    config = SampleWorldConfig(
        root=root,
        seed=args.seed,
        num_scenes=1,
        views_per_scene=args.frames,
        width=args.width,
        height=args.height,
        camera_path="handheld",
        arkitscenes_videos=1,
        scannetpp_scenes=1,
        show_progress=False,
    )
    started = time.perf_counter()
    _, built = ensure_sample_world(config)
    logger.info("world %s %s in %.1f s", root, "built" if built else "reused", time.perf_counter() - started)
    return root


def time_scan(world: Path, dataset: str) -> tuple[int, dict[str, float]]:
    """The scan's frame count and the CPU seconds of each stage of its chain."""
    from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
    from assets.dge.tasks import build_scene_tasks
    from assets.dge.visibility import build_frame_visibility
    from assets.sources.assets import with_origin
    from readers.scan_tables import scan_tables
    from readers.scans import list_scans, read_scan

    folder, source = LAYOUTS[dataset]
    (scan,) = list_scans(dataset, world / folder)
    seconds = {}
    started = time.process_time()
    rows, scene, log = read_scan(scan)
    frames = with_origin(scan_tables(rows, [scene], log).frames, "sample_world")
    seconds["read"] = time.process_time() - started
    started = time.process_time()
    geometry = build_scan_geometry(frames, scene, SceneGeometrySettings(object_points_source=source))
    seconds["scene_geometry"] = time.process_time() - started
    started = time.process_time()
    visibility = build_frame_visibility(geometry, frames, scene=scene)
    seconds["frame_visibility"] = time.process_time() - started
    started = time.process_time()
    build_scene_tasks(geometry.to_row(), visibility, frames)
    seconds["dge_tasks"] = time.process_time() - started
    return frames.height, seconds


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in ("assets", "readers"):
        logging.getLogger(name).setLevel(logging.WARNING)
    world = world_root(args)
    sys.stdout.write(
        f"CPU seconds per scan, median of {args.repeats} ({args.frames} frames, hand-held path, realistic)\n"
        f"{'data set':<12} {'frames':>6} " + " ".join(f"{stage:>16}" for stage in STAGES) + f" {'total':>8}\n"
    )
    for dataset in LAYOUTS:
        runs = [time_scan(world, dataset) for _ in range(args.repeats)]
        frames = runs[0][0]
        medians = {stage: statistics.median(run[1][stage] for run in runs) for stage in STAGES}
        sys.stdout.write(
            f"{dataset:<12} {frames:>6} "
            + " ".join(f"{medians[stage]:>16.2f}" for stage in STAGES)
            + f" {sum(medians.values()):>8.2f}\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
