"""Time the sample world generator: the default world and one 50-frame 640x480 scene (DGE size).

Usage:
    python benchmarks/bench_sample_world.py [--many N]

Prints wall seconds, views per second and size on disk for each case. `--many N` also times an
N-scene default-resolution world (how the generator scales to large benchmark worlds).
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
    args = parser.parse_args(argv)
    sys.stdout.write(f"cpu cores available: {len(os.sched_getaffinity(0))}\n")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _run("default world", SampleWorldConfig(root=root / "default", show_progress=False))
        _run(
            "one 50-frame 640x480 scene",
            SampleWorldConfig(
                root=root / "dge",
                num_scenes=1,
                views_per_scene=50,
                width=640,
                height=480,
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
