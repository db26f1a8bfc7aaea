"""Benchmark: seconds to build ``scene_geometry`` + ``frame_visibility`` for one 50-frame 640x480 scan, old code
beside new code in one run.

Generates (once, cached under ``--work-dir``) a one-room sample world with 50 RGB-D frames at
640x480 (depth at full resolution) per scan mode (``exact``: the generator's exact scan;
``realistic``: noisy depth, pose error, over-segmented mesh), then times the pure functions behind
the two assets for the object-point sources ``mesh`` and ``instance_masks`` (visibility is cast
against the scan's mesh either way). Stages: ``fusion`` (:func:`~assets.dge.fusion.fuse_frames` as
``scene_geometry`` calls it, timed on its own), ``scene_geometry`` (the whole of
:func:`~assets.dge.geometry.build_scan_geometry`, fusion included) and ``frame_visibility``.

*old* is this working tree with the DGE modules named by ``--old-paths`` taken from ``--old-rev``
(``git show REV:PATH`` into a temporary copy of the packages); *new* is this working tree. Each
variant and configuration runs in its own Python process (under ``--tiny`` each variant times both
object-point sources in one process). CPU seconds are the process's (every thread). Target: at most 3 s CPU
per realistic scene on 2 cores.

    .venv/bin/python benchmarks/bench_dge.py [--frames 50] [--width 640] [--height 480] [--repeats 1]
    .venv/bin/python benchmarks/bench_dge.py --tiny    # smoke run: the realistic scan, 3 frames at 160x120
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger("bench_dge")

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("assets", "readers", "data_contracts", "pipelines", "training", "model_clients")
"""Top-level packages copied into the old variant's tree."""
OLD_REV = "de75d3a"
"""The commit before the third round of DGE speed work (issue 13: each depth and instance image decoded once per asset
with no extra passes over it, mask boxes straight from the stored labels, the label vote and the RANSAC scoring
element-wise instead of through BLAS, the voxel grid column by column, depth normals gathered from the strided grid,
the ray cast's bookkeeping without a sort). The second round (numpy voxel grid, outlier tests on voxels) is measured
with ``--old-rev 98a6cc0e2ce75b8c33bc604a6059d3e1c6ba3f0f --old-paths`` these modules and ``assets/dge/objects.py``;
the first with ``--old-rev b7f49ff7ff40f35b740572f136bf4dd8afa7ad18 --old-paths assets/dge/fusion.py
assets/dge/visibility.py assets/dge/raycast.py assets/dge/camera.py assets/dge/geometry.py``. A later change (the
mask tops of DGE code version 6) is measured with ``--old-rev 765971c --old-paths assets/dge/fusion.py
assets/dge/geometry.py assets/dge/objects.py``."""
OLD_PATHS = (
    "assets/dge/fusion.py",
    "assets/dge/visibility.py",
    "assets/dge/raycast.py",
    "assets/dge/camera.py",
    "assets/dge/floor.py",
    "assets/dge/room.py",
    "assets/dge/geometry.py",
)
"""The modules the third round changed, and ``assets/dge/geometry.py`` (unchanged in that round), which must come
from the same revision as ``fusion.py``: since DGE code version 6 it reads the mask tops the new ``fusion.py`` adds
(``assets/dge/objects.py``, sped up on its own, is the working tree's in both variants)."""
SOURCES = ("mesh", "instance_masks")
STAGES = ("fusion", "scene_geometry", "frame_visibility")

TINY = {"frames": 3, "width": 160, "height": 120, "repeats": 1, "scan_realism": ["realistic"]}
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
    parser.add_argument(
        "--scan-realism",
        nargs="+",
        choices=("exact", "realistic"),
        default=["exact", "realistic"],
        help="the sample world's scan modes to time",
    )
    # Run
    parser.add_argument(
        "--repeats", type=int, default=1, help="timed repetitions per configuration (best kept)"
    )
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the old modules")
    parser.add_argument(
        "--old-paths", nargs="+", default=list(OLD_PATHS), help="modules taken from --old-rev"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench_dge",
        help="where the scenes are cached",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    # One timed configuration in this process (what the main process runs per variant).
    parser.add_argument("--worker-world", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--worker-sources", nargs="+", choices=SOURCES, help=argparse.SUPPRESS)
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    return parser.parse_args(argv)


def world_root(args: argparse.Namespace, realism: str) -> Path:
    """Generate (or reuse) the benchmark scan of one scan mode."""
    from assets.sample_world.config import SampleWorldConfig
    from assets.sample_world.generator import generate_sample_world

    root = args.work_dir / f"world_{args.frames}_{args.width}x{args.height}_s{args.seed}_{realism}"
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
                scan_realism=realism,
                show_progress=False,
            )
        )
        logger.info("generated the %s benchmark scan in %.1f s", realism, time.perf_counter() - started)
    return root


def old_tree(rev: str, paths: list[str], into: Path) -> Path:
    """This working tree's packages with ``paths`` as they were at ``rev``."""
    for package in PACKAGES:
        if (REPO / package).is_dir():
            shutil.copytree(REPO / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    for path in paths:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
        ).stdout
        (into / path).write_text(text)
    return into


def _timed(function, *arguments, **keywords):
    cpu, wall = time.process_time(), time.perf_counter()
    result = function(*arguments, **keywords)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def _stride(settings, records, with_instances: bool) -> int:
    """The pixel stride ``build_scan_geometry`` fuses the scan with (older code's ``stride_for`` has no frame count)."""
    try:
        return settings.stride_for(records[0].depth_size, with_instances, frames=len(records))
    except TypeError:
        return settings.stride_for(records[0].depth_size, with_instances)


def _settings_class():
    """``SceneGeometrySettings`` of the modules on the path, readable by an older ``geometry.py`` too.

    Older ``geometry.py`` reads ``object_seed``, which the objects' settings call ``seed`` since the DGE
    run configuration was split (fdbafc8); the old variant's settings answer it with ``seed``.
    """
    from assets.dge.geometry import SceneGeometrySettings

    fields = SceneGeometrySettings.model_fields
    if "object_seed" in fields or "seed" not in fields:
        return SceneGeometrySettings

    class Settings(SceneGeometrySettings):
        @property
        def object_seed(self) -> int:
            return self.seed

    return Settings


def work(world: Path, source: str, repeats: int) -> dict:
    """Time the stages of one scan and object source in this process (best of ``repeats`` per stage)."""
    from assets.dge.fusion import fuse_frames
    from assets.dge.geometry import build_scan_geometry, frame_records
    from assets.dge.visibility import build_frame_visibility
    from readers.scannet import read_scannet

    tables = read_scannet(world / "scannet" / "scans")
    scene = tables.scenes.row(0, named=True)
    settings = _settings_class()(object_points_source=source)
    records = frame_records(tables.frames)
    with_instances = source == "instance_masks"
    fusion = settings.model_copy(update={"pixel_stride": _stride(settings, records, with_instances)})
    best = {stage: (float("inf"), float("inf")) for stage in STAGES}
    for _ in range(repeats):
        _, *fusion_times = _timed(fuse_frames, records, fusion, with_instances=with_instances)
        geometry, *geometry_times = _timed(build_scan_geometry, tables.frames, scene, settings)
        visibility, *visibility_times = _timed(build_frame_visibility, geometry, tables.frames, scene=scene)
        for stage, times in zip(STAGES, (fusion_times, geometry_times, visibility_times), strict=True):
            best[stage] = min(best[stage], tuple(times), key=lambda pair: pair[1])
    return {
        "stages": {stage: {"wall": wall, "cpu": cpu} for stage, (wall, cpu) in best.items()},
        "objects": len(geometry.objects),
        "visibility_rows": visibility.height,
        "frames": tables.frames.height,
        "depth": f"{tables.frames['depth_width'][0]}x{tables.frames['depth_height'][0]}",
    }


def run_variant(root: Path, world: Path, sources: list[str], repeats: int) -> dict[str, dict]:
    """:func:`work` of each of ``sources``, one after another in a fresh process that imports the packages
    under ``root``; the figures per source."""
    environment = {**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    command = [sys.executable, str(Path(__file__).resolve()), "--worker-world", str(world)]
    command += ["--worker-sources", *sources, "--repeats", str(repeats)]
    done = subprocess.run(command, cwd=root, env=environment, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_variants(
    variants: dict[str, Path], world: Path, args: argparse.Namespace
) -> Iterator[tuple[str, dict[str, dict]]]:
    """Per object source, as each is timed: the source and each variant's figures. One process per variant and
    source, or under ``--tiny`` one process per variant for every source (a smoke run's figures are not
    compared; its interpreter start-ups cost more than its scan)."""
    if args.tiny:
        per_variant = {
            name: run_variant(root, world, list(SOURCES), args.repeats) for name, root in variants.items()
        }
        for source in SOURCES:
            yield source, {name: figures[source] for name, figures in per_variant.items()}
        return
    for source in SOURCES:
        yield (
            source,
            {
                name: run_variant(root, world, [source], args.repeats)[source]
                for name, root in variants.items()
            },
        )


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = parse_args(argv)
    if args.worker_world is not None:
        figures = {source: work(args.worker_world, source, args.repeats) for source in args.worker_sources}
        sys.stdout.write(json.dumps(figures) + "\n")
        return 0
    worlds = {realism: world_root(args, realism) for realism in args.scan_realism}
    with tempfile.TemporaryDirectory(prefix="bench_dge_old_") as folder:
        variants = {"old": old_tree(args.old_rev, args.old_paths, Path(folder)), "new": REPO}
        sys.stdout.write(
            f"old: {args.old_rev[:10]} for {', '.join(args.old_paths)}; new: this working tree; "
            f"{os.cpu_count()} CPUs; best of {args.repeats}; seconds wall / CPU\n\n"
        )
        columns = ("scan", "stage", "old wall", "old CPU", "new wall", "new CPU", "CPU old/new")
        sys.stdout.write("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n")
        notes = []
        for realism, world in worlds.items():
            for source, found in run_variants(variants, world, args):
                for stage in (*STAGES, "scene"):
                    if stage == "scene":
                        cells = {
                            name: {
                                key: result["stages"]["scene_geometry"][key]
                                + result["stages"]["frame_visibility"][key]
                                for key in ("wall", "cpu")
                            }
                            for name, result in found.items()
                        }
                    else:
                        cells = {name: result["stages"][stage] for name, result in found.items()}
                    name = "**geometry + visibility**" if stage == "scene" else stage
                    ratio = cells["old"]["cpu"] / max(cells["new"]["cpu"], 1e-9)
                    sys.stdout.write(
                        f"| {realism} {source} | {name} | {cells['old']['wall']:.2f} | {cells['old']['cpu']:.2f} "
                        f"| {cells['new']['wall']:.2f} | {cells['new']['cpu']:.2f} | {ratio:.1f} |\n"
                    )
                    sys.stdout.flush()
                notes.append(
                    f"{realism} {source}: {found['new']['frames']} frames, depth {found['new']['depth']}; objects "
                    f"old {found['old']['objects']} / new {found['new']['objects']}; visibility rows "
                    f"old {found['old']['visibility_rows']} / new {found['new']['visibility_rows']}"
                )
        sys.stdout.write("\n" + "\n".join(notes) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
