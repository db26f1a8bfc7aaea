"""Benchmark: CPU seconds of :func:`~assets.dge.objects.measure_object` on one scan, old code beside new code in one run,
with the thin objects' extents against the generator's truth.

The scan's geometry is built once per object source (``mesh``, ``instance_masks``) while the arguments that
:func:`~assets.dge.geometry.build_scan_geometry` passes to ``measure_object`` are recorded; then the recorded
objects are measured by the old module (``assets/dge/objects.py`` as it was at ``--old-rev``, loaded beside the new
one) and by the working tree's, alternately, ``--repeats`` times (best kept). CPU seconds are the process's (every
thread). The default scan is ``bench_dge.py``'s realistic 50-frame 640x480 scan (generated under ``--work-dir``
when missing). "same fields" counts the objects that both variants reject, or whose every field (boxes, centroid,
stored points, normals and areas, spread, blur, point count) is the same to the bit.

    .venv/bin/python benchmarks/bench_dge_objects.py [--world PATH] [--repeats 3] [--old-rev REV]
    .venv/bin/python benchmarks/bench_dge_objects.py --tiny    # smoke run: bench_dge.py's tiny scan, one repeat
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

logger = logging.getLogger("bench_dge_objects")

REPO = Path(__file__).resolve().parents[1]
OLD_REV = "166ec6709de46baea9fd5588dc21e910278e1392"
"""The commit before this round of object measurement work (curved ends of noisy boxes, cheaper cleaning)."""
SOURCES = ("mesh", "instance_masks")
THIN_CATEGORIES = ("lamp", "chair", "shelf")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--world",
        type=Path,
        help="sample world root (default: bench_dge.py's realistic scan under --work-dir)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "bench_dge",
        help="where bench_dge.py's scans are cached (generated when missing)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per variant (best kept)")
    parser.add_argument("--old-rev", default=OLD_REV, help="git revision of the old assets/dge/objects.py")
    parser.add_argument("--sources", nargs="+", choices=SOURCES, default=list(SOURCES))
    parser.add_argument(
        "--tiny", action="store_true", help="bench_dge.py's tiny scan and one repeat (smoke run)"
    )
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(repeats=1)
    return parser.parse_args(argv)


def bench_dge_world(work_dir: Path, tiny: bool) -> Path:
    """bench_dge.py's realistic scan (its ``--tiny`` one with ``tiny``), generated when missing."""
    spec = importlib.util.spec_from_file_location(
        "bench_dge", Path(__file__).resolve().parent / "bench_dge.py"
    )
    bench_dge = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench_dge)
    defaults = bench_dge.parse_args(["--work-dir", str(work_dir), *(["--tiny"] if tiny else [])])
    return bench_dge.world_root(defaults, "realistic")


def old_objects_module(rev: str, folder: Path):
    """``assets/dge/objects.py`` as it was at ``rev``, imported under another name."""
    text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{rev}:assets/dge/objects.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = folder / "objects_old.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("bench_objects_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def recorded_objects(world: Path, source: str) -> tuple[list[dict], dict]:
    """The arguments of every ``measure_object`` call of building each scene (``source`` objects), and the settings."""
    from assets.dge import geometry
    from readers.scannet import read_scannet

    tables = read_scannet(world / "scannet" / "scans")
    settings = geometry.SceneGeometrySettings(object_points_source=source)
    calls: list[dict] = []
    measure = geometry.measure_object

    def recording(object_id, label, points, normals, point_areas, config, noisy=False):
        calls.append(
            {
                "scene_id": scene_id,
                "object_id": object_id,
                "label": label,
                "points": points,
                "normals": normals,
                "point_areas": point_areas,
                "noisy": noisy,
            }
        )
        return measure(object_id, label, points, normals, point_areas, config, noisy=noisy)

    geometry.measure_object = recording
    try:
        for scene in tables.scenes.iter_rows(named=True):
            scene_id = scene["scene_id"]
            geometry.build_scan_geometry(tables.frames, scene, settings)
    finally:
        geometry.measure_object = measure
    return calls, settings.model_dump()


def measure_all(module, calls: list[dict], settings: dict) -> tuple[list, float, float]:
    """Every recorded object measured by ``module``: ``(results, CPU seconds, wall seconds)``."""
    config = module.ObjectSettings(
        **{name: settings[name] for name in module.ObjectSettings.model_fields if name in settings}
    )
    cpu, wall = time.process_time(), time.perf_counter()
    results = []
    for call in calls:
        try:
            results.append(
                module.measure_object(
                    call["object_id"],
                    call["label"],
                    call["points"],
                    call["normals"],
                    call["point_areas"],
                    config,
                    noisy=call["noisy"],
                )
            )
        except module.ObjectRejectedError:
            results.append(None)
    return results, time.process_time() - cpu, time.perf_counter() - wall


def extent_errors(result, truth: dict) -> np.ndarray:
    """Relative error of (longer, shorter horizontal extent, height) against the generator's box."""
    true = np.asarray(truth["extents"], dtype=np.float64)
    true = np.array([max(true[:2]), min(true[:2]), true[2]])
    measured = np.array([max(result.obb_extents[:2]), min(result.obb_extents[:2]), result.obb_extents[2]])
    return (measured - true) / true


def same_bits(first, second) -> bool:
    """Whether two field values are the same to the bit: arrays of one dtype and shape with the same bytes, or
    equal scalars (NaN equal to NaN).

    >>> same_bits(np.array([0.0, np.nan]), np.array([0.0, np.nan])), same_bits(np.array([0.0]), np.array([-0.0]))
    (True, False)
    """
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        first, second = np.asarray(first), np.asarray(second)
        return (
            first.dtype == second.dtype
            and first.shape == second.shape
            and first.tobytes() == second.tobytes()
        )
    return first == second or (first != first and second != second)


def same_geometry(first, second) -> bool:
    """Whether two measurements (or rejections, None) agree to the bit in every field of the old one."""
    if first is None or second is None:
        return first is second
    return all(
        hasattr(second, field.name) and same_bits(getattr(first, field.name), getattr(second, field.name))
        for field in dataclasses.fields(first)
    )


def emit(line: str = "") -> None:
    """One line of the report on stdout."""
    sys.stdout.write(line + "\n")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    args = parse_args(argv)
    world = args.world or bench_dge_world(args.work_dir, args.tiny)
    truth = {
        scene["scene_id"]: {item["object_id"]: item for item in scene["objects"]}
        for scene in json.loads((world / "truth" / "world.json").read_text())["scenes"]
    }
    from assets.dge import objects as new_module

    with tempfile.TemporaryDirectory() as folder:
        old_module = old_objects_module(args.old_rev, Path(folder))
        emit(f"scan {world}, old = objects.py at {args.old_rev[:10]}, best of {args.repeats}")
        emit(
            "| object source | objects | old CPU s | new CPU s | CPU old/new | old wall s | new wall s | same fields |"
        )
        emit("|---|---|---|---|---|---|---|---|")
        errors_table = []
        for source in args.sources:
            calls, settings = recorded_objects(world, source)
            best = {"old": (np.inf, np.inf, None), "new": (np.inf, np.inf, None)}
            for _ in range(args.repeats):
                for name, module in (("old", old_module), ("new", new_module)):
                    results, cpu, wall = measure_all(module, calls, settings)
                    if cpu < best[name][0]:
                        best[name] = (cpu, wall, results)
            (old_cpu, old_wall, old_results), (new_cpu, new_wall, new_results) = best["old"], best["new"]
            same = sum(same_geometry(a, b) for a, b in zip(old_results, new_results, strict=True))
            emit(
                f"| {source} | {len(calls)} | {old_cpu:.3f} | {new_cpu:.3f} | {old_cpu / max(new_cpu, 1e-9):.2f} "
                f"| {old_wall:.3f} | {new_wall:.3f} | {same} of {len(calls)} |"
            )
            for call, old, new in zip(calls, old_results, new_results, strict=True):
                item = truth.get(call["scene_id"], {}).get(call["object_id"])
                if item is None or item["category"] not in THIN_CATEGORIES or old is None or new is None:
                    continue
                errors_table.append(
                    (
                        source,
                        call["scene_id"],
                        item["name"],
                        extent_errors(old, item),
                        extent_errors(new, item),
                    )
                )
        emit()
        emit("Thin objects, relative error (length, width, height) against the generator's boxes:")
        emit("| object source | scene | object | old | new |")
        emit("|---|---|---|---|---|")
        for source, scene_id, name, old, new in errors_table:
            old_text = ", ".join(f"{100 * value:+.1f}%" for value in old)
            new_text = ", ".join(f"{100 * value:+.1f}%" for value in new)
            emit(f"| {source} | {scene_id} | {name} | {old_text} | {new_text} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
