"""Time the sample world generator: the default world and one 50-frame 640x480 scene (DGE size).

Usage:
    python benchmarks/bench_sample_world.py [--many N]
    python benchmarks/bench_sample_world.py --tiny    # smoke run: small worlds of a few views

Prints wall seconds, views per second and size on disk for each case. `--many N` also times an
N-scene default-resolution world (how the generator scales to large benchmark worlds). The sizes of
the two cases are flags (`--scenes`, `--views`, `--dge-frames`, `--dge-width`, `--dge-height`);
without them the first case is the generator's default world.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

from assets.sample_world import SampleWorldConfig, generate_sample_world

logger = logging.getLogger(__name__)

TINY = {"scenes": 1, "views": 2, "dge_frames": 3, "dge_width": 160, "dge_height": 120}
"""Defaults under `--tiny` (explicit flags still win)."""


def _run(name: str, config: SampleWorldConfig) -> None:
    started = time.perf_counter()
    summary = generate_sample_world(config)
    seconds = time.perf_counter() - started
    sys.stdout.write(
        f"{name:<34} {seconds:8.2f} s  {summary.num_views / seconds:7.1f} views/s  "
        f"{summary.bytes_on_disk / 1e6:8.1f} MB  ({config.num_scenes} scenes x {config.views_per_scene} views "
        f"at {config.width}x{config.height})\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark cases and print one line per case."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--many", type=int, default=0, help="Also time a world with this many scenes.")
    parser.add_argument(
        "--scenes", type=int, default=None, help="scenes of the first world (default: its default)"
    )
    parser.add_argument("--views", type=int, default=None, help="views per scene of the first world")
    parser.add_argument("--dge-frames", type=int, default=50, help="frames of the DGE-size scene")
    parser.add_argument("--dge-width", type=int, default=640, help="width of the DGE-size scene")
    parser.add_argument("--dge-height", type=int, default=480, help="height of the DGE-size scene")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    args = parser.parse_args(argv)
    sys.stdout.write(f"cpu cores available: {len(os.sched_getaffinity(0))}\n")
    first_world = {
        name: value
        for name, value in (("num_scenes", args.scenes), ("views_per_scene", args.views))
        if value is not None
    }
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _run(
            "default world" if not first_world else "world",
            SampleWorldConfig(root=root / "default", show_progress=False, **first_world),
        )
        _run(
            f"one {args.dge_frames}-frame {args.dge_width}x{args.dge_height} scene",
            SampleWorldConfig(
                root=root / "dge",
                num_scenes=1,
                views_per_scene=args.dge_frames,
                width=args.dge_width,
                height=args.dge_height,
                show_progress=False,
            ),
        )
        if args.many:
            _run(
                f"{args.many}-scene world",
                SampleWorldConfig(root=root / "many", num_scenes=args.many, show_progress=False),
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
