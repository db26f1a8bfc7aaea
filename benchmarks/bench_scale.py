"""The build at the real data sets' shape: CPU seconds, peak memory and disk per stage and per unit, projected.

Usage:
    python benchmarks/bench_scale.py                      # every stage at this machine's sizes (about 30 minutes)
    python benchmarks/bench_scale.py --stages observe,vg --scans 1500 --vg-images 100000
    python benchmarks/bench_scale.py --tiny               # smoke run: every stage at a few units, 1 build worker

Data of the real sets' shape is synthesized under ``--work-dir`` (reused between runs), as cheaply as disk
allows: files are hard links of a few originals, records repeat with new ids.

- ``observe``: ``--scans`` scan folders of ``--scan-files`` files each (hard links of one scan): the raw-file
  observation cold (an empty hash cache) and warm (nothing changed), CPU seconds and microseconds per file.
- ``events``: the run's own process alone: one range run of a trivial scan-partitioned asset (a table, its
  quarantine, its contract check and operator signals, every partition's file written) over ``--event-scans``
  partitions, CPU per partition at each size: Dagster's events and our per-partition bookkeeping, no work.
- ``build``: the scan chain (``rgbd_frames`` to ``dge_tasks``) of ``--build-scans`` scans (each size one range
  run, as a backfill or ``spatial-build`` runs it), the scans hard links of a generated 12-scene world (the
  default world's scans): CPU of
  the run's own process and of every process, the run's peak memory; per scan, the slope between the sizes.
  ``--profile-run`` profiles the run's own process and splits its per-scan CPU between the project's code and
  Dagster's (the profiler's cost then inflates that process's figures).
- ``long``: one scan of ``--long-frames`` frames at 640x480 (the sample world's loop, a few centimetres between
  frames, as a ScanNet capture): its geometry, visibility and tasks, CPU seconds and peak memory.
- ``vg``: raw Visual Genome JSON of ``--vg-images`` images (35 objects and 21 relations each, images hard links
  of one ~140 KB JPEG): the ``scene_graphs`` asset's CPU, peak memory and table size, then one STVQA shard's
  read of its rows.
- ``mcq``: an OmniSpatial ``data.json`` of ``--mcq-questions`` questions (two per image, images ~140 KB PNGs,
  no two equal): the ``mcq_questions`` asset's CPU, peak memory and table size.

Each measured step runs in its own process (``python -c``), so its peak memory (``ru_maxrss``) is its own; the
CPU of every process it starts (workers included) is counted by making this script their child subreaper
(as ``bench_build.py`` does). Last, the per-unit figures are projected to ScanNet (1,513 scans of 1-5 thousand
frames, about 10 million files), Visual Genome (108,077 images) and OmniSpatial in full, on this machine and
on a Ray cluster of ``--ray-nodes`` nodes of ``--ray-cores`` cores (the per-scan work spreads over the
cluster; the run's own process does not).
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import resource
import runpy
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

_BUILD = runpy.run_path(str(Path(__file__).resolve().parent / "bench_build.py"))
"""``bench_build.py``'s functions: the child subreaper that counts every process's CPU, and the export of a
revision."""
become_subreaper, export_revision, reap_descendants = (
    _BUILD["become_subreaper"],
    _BUILD["export_revision"],
    _BUILD["reap_descendants"],
)

logger = logging.getLogger("bench_scale")

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
STAGES = ("observe", "events", "build", "long", "vg", "mcq")
FULL = {
    "scans": 1513,
    "files": 10_000_000,
    "frames_per_scan": 2000,
    "vg_images": 108_077,
    "mcq_questions": 20_000,
}
"""The full data sets: ScanNet's scans and files (frames: a middle length), Visual Genome, OmniSpatial-like."""
VG_OBJECTS, VG_RELATIONS = 35, 21
IMAGE_BYTES = 140_000


def _cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(code: str, folder: Path, code_root: Path = REPOSITORY_ROOT, **environment: str) -> dict:
    """Run ``code`` (Python) in its own process; its wall time, its own CPU and peak memory (it prints them as
    its last line, JSON), the CPU of every process it started, and what else it printed as JSON."""
    prologue = textwrap.dedent(
        """
        import json, resource, sys
        def report(**figures):
            usage = resource.getrusage(resource.RUSAGE_SELF)
            figures.update(own_cpu=usage.ru_utime + usage.ru_stime, peak_mib=usage.ru_maxrss / 1024)
            print(json.dumps(figures))
        """
    )
    reap_descendants(5)
    before = _cpu_of_children()
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(code_root), "HF_HUB_OFFLINE": "1", **environment}
    completed = subprocess.run(
        [sys.executable, "-c", prologue + textwrap.dedent(code)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    reap_descendants(5)
    if completed.returncode != 0:
        raise SystemExit(f"a measured step failed:\n{completed.stderr[-4000:]}")
    figures = json.loads(completed.stdout.strip().splitlines()[-1])
    figures.update(wall=wall, all_cpu=_cpu_of_children() - before)
    return figures


def _line(label: str, value: str) -> None:
    sys.stdout.write(f"  {label:<66} {value}\n")
    sys.stdout.flush()


# -- data of the real shape ------------------------------------------------------------------------------


def sample_world(work: Path, name: str, **config: object) -> Path:
    """A sample world generated once under ``work`` (reused when its folder exists)."""
    root = work / name
    if not (root / "truth" / "world.json").exists():
        from assets.sample_world.config import SampleWorldConfig
        from assets.sample_world.generator import generate_sample_world

        generate_sample_world(SampleWorldConfig(root=root, show_progress=False, **config))
    return root


def linked_scans(originals: list[Path], folder: Path, count: int) -> Path:
    """``count`` scan folders under ``folder``: hard links of ``originals`` in turn, files renamed to the new
    scan id as ScanNet names them (``<scene>.aggregation.json``, ...)."""
    existing = sorted(folder.iterdir()) if folder.is_dir() else []
    if len(existing) == count:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    for index in range(count):
        original = originals[index % len(originals)]
        scene = f"scene{index:04d}_00"
        for path in original.rglob("*"):
            if path.is_file():
                relative = path.relative_to(original).as_posix().replace(original.name, scene)
                target = folder / scene / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target)
    return folder


def file_scans(folder: Path, scans: int, files: int) -> Path:
    """``scans`` folders of ``files`` files each (colour, depth and pose files of ScanNet's sizes), hard links
    of one scan."""
    if folder.is_dir() and len(list(folder.iterdir())) == scans:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    base = folder.parent / f"{folder.name}_original"
    shutil.rmtree(base, ignore_errors=True)
    frames = max(1, (files - 2) // 3)
    for index in range(frames):
        for kind, size in (("color", 60_000), ("depth", 200_000), ("pose", 120)):
            path = (
                base / kind / f"{index}.{'jpg' if kind == 'color' else 'png' if kind == 'depth' else 'txt'}"
            )
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(os.urandom(size))
    (base / "scene.txt").write_text("axisAlignment = 1 0 0 0 0 1 0 0 0 0 1 0 0 0 0 1\n")
    (base / "scene_vh_clean_2.ply").write_bytes(os.urandom(1_000_000))
    for index in range(scans):
        shutil.copytree(base, folder / f"scene{index:04d}_00", copy_function=os.link)
    return folder


def _jpeg(size: int) -> bytes:
    """A JPEG of about ``size`` bytes (noise, so it does not compress)."""
    import numpy as np
    from PIL import Image

    side = 64
    while True:
        pixels = np.random.default_rng(0).integers(0, 255, (side * 3 // 4, side, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
        if buffer.tell() >= size:
            return buffer.getvalue()
        side = int(side * 1.25)


def visual_genome(folder: Path, images: int) -> Path:
    """A raw VG v1.4 folder of ``images`` images (35 objects, 21 relations, 10 attributes each), written as a
    stream (no whole file in memory), image files hard links of one JPEG."""
    marker = folder / f".complete-{images}"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "VG_100K").mkdir(parents=True)
    original = folder / "original.jpg"
    original.write_bytes(_jpeg(IMAGE_BYTES))
    names = ["chair", "table", "cup", "lamp", "window", "man", "shirt", "tree", "car", "sign", "plate"]
    files = {
        name: (folder / f"{name}.json").open("w")
        for name in ("image_data", "objects", "relationships", "attributes")
    }
    for handle in files.values():
        handle.write("[")
    for index in range(images):
        image_id = 1 + index
        os.link(original, folder / "VG_100K" / f"{image_id}.jpg")
        objects = [
            {
                "object_id": image_id * 100 + k,
                "x": 10 * (k % 7),
                "y": 8 * (k % 5),
                "w": 40 + k,
                "h": 30 + k,
                "names": [names[k % len(names)]],
                "synsets": [f"{names[k % len(names)]}.n.01"],
            }
            for k in range(VG_OBJECTS)
        ]
        relations = [
            {
                "relationship_id": image_id * 100 + k,
                "predicate": "ON" if k % 2 else "near",
                "subject": {**objects[k], "name": objects[k]["names"][0]},
                "object": objects[(k + 1) % VG_OBJECTS],
                "synsets": [],
            }
            for k in range(VG_RELATIONS)
        ]
        attributes = [{**objects[k], "attributes": ["white", "wooden"]} for k in range(10)]
        separator = "," if index else ""
        entries = {
            "image_data": {
                "image_id": image_id,
                "width": 500,
                "height": 375,
                "url": f"x/VG_100K/{image_id}.jpg",
            },
            "objects": {"image_id": image_id, "objects": objects},
            "relationships": {"image_id": image_id, "relationships": relations},
            "attributes": {"image_id": image_id, "attributes": attributes},
        }
        for name, entry in entries.items():
            files[name].write(separator + json.dumps(entry))
    for handle in files.values():
        handle.write("]")
        handle.close()
    original.unlink()
    marker.touch()
    return folder


def omnispatial(folder: Path, questions: int) -> Path:
    """An OmniSpatial folder of ``questions`` questions, two per image, each image a PNG of noise of its own
    (~140 KB, stored uncompressed so that writing them is cheap): no two images are equal or compress
    against each other, as in the real set."""
    marker = folder / f".complete-{questions}-noise"
    if marker.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "Perspective_Taking").mkdir(parents=True)
    import numpy as np
    from PIL import Image

    generator = np.random.default_rng(0)
    records = []
    for index in range(questions):
        image = index // 2
        if index % 2 == 0:
            pixels = generator.integers(0, 255, (216, 216, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / "Perspective_Taking" / f"{image}.png", compress_level=0)
        records.append(
            {
                "id": f"{image}_{index % 2}",
                "question": f"From the man's view, is the cup {index} left of the lamp?",
                "options": ["left", "right", "behind", "in front"],
                "answer": index % 4,
                "task_type": "Perspective_Taking",
                "sub_task_type": "Allocentric",
            }
        )
    (folder / "data.json").write_text(json.dumps(records))
    marker.touch()
    return folder


# -- stages ----------------------------------------------------------------------------------------------


def stage_observe(work: Path, scans: int, files: int, variants: dict[str, Path]) -> dict:
    folder = file_scans(work / "observe" / "scans", scans, files)
    code = f"""
    import resource
    from pathlib import Path
    from assets.raw_files import FileHashCache, _observe
    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    folders = sorted(Path({str(folder)!r}).iterdir())
    cache = Path({str(work / "observe" / "hashes.sqlite")!r})
    cache.unlink(missing_ok=True)
    seconds = []
    for _ in range(2):
        started = cpu()
        with FileHashCache(cache) as hashes:
            for scan in folders:
                _observe(hashes, "raw_scan_files", scan.name, [scan])
        seconds.append(cpu() - started)
    report(cold=seconds[0], warm=seconds[1], files=sum(1 for scan in folders for p in scan.rglob("*") if p.is_file()))
    """
    for name, root in variants.items():
        figures = measure(code, work, root)
        label = f"observe ({name}): {scans} scans x {files} files"
        _line(f"{label}, cold (empty cache)", f"{figures['cold']:.2f} CPU-s")
        _line(f"{label}, warm, nothing changed", f"{figures['warm']:.2f} CPU-s")
        _line(f"{label}, warm, per file", f"{1e6 * figures['warm'] / figures['files']:.1f} us")
    return {
        "observe_us_per_file": 1e6 * figures["warm"] / figures["files"],
        "observe_cold_s": figures["cold"],
    }


EVENTS_CODE = """
import resource
import dagster as dg
from assets.partition_ranges import SINGLE_RUN, run_partitions
from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.provenance import table_file_plans
from assets.resources import StorageResource
from assets.tables import contract_check_specs, finalize_table, quarantine_output, table_and_quarantine_outs
from data_contracts.quarantine import QuarantineLog, Quarantine
from pipelines.cli import partition_range_tags
from pipelines.io_manager import ParquetIOManager
from pipelines.signals import build_signal_checks

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

def body(key):
    rows = QuarantineLog("events")
    rows.add(key, "one row of a trivial table")
    log = QuarantineLog("events")
    checked = finalize_table(rows.to_frame(), Quarantine, "1", asset_key="events", quarantine=log)
    quarantine, metadata = quarantine_output(log)
    yield dg.Output(checked.frame, output_name="events", metadata=checked.metadata)
    yield checked.check
    yield dg.Output(quarantine, output_name="events_quarantine", metadata=metadata)

@dg.multi_asset(outs=table_and_quarantine_outs("events", "A trivial table per scan.", "1"),
    check_specs=contract_check_specs("events"), partitions_def=scenes_partitions, backfill_policy=SINGLE_RUN)
def events_asset(context: dg.AssetExecutionContext, storage: StorageResource):
    yield from run_partitions(context, body, table_file_plans(context, storage.path))

instance = dg.DagsterInstance.get()
defs = dg.Definitions(assets=[events_asset], asset_checks=build_signal_checks([events_asset]),
    resources={"io_manager": ParquetIOManager(root=STORAGE), "storage": StorageResource(root=STORAGE)})
keys = [f"scene{index:05d}_00" for index in range(COUNT)]
instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, keys)
job = defs.resolve_implicit_global_asset_job_def()
started = cpu()
assert job.execute_in_process(instance=instance, tags=partition_range_tags(keys[0], keys[-1])).success
report(run_cpu=cpu() - started)
"""


def stage_events(work: Path, sizes: list[int]) -> dict:
    per_partition = {}
    for count in sizes:
        home, storage = work / "events" / f"home{count}", work / "events" / f"storage{count}"
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(storage, ignore_errors=True)
        home.mkdir(parents=True)
        shutil.copy(REPOSITORY_ROOT / "pipelines" / "deploy" / "dagster.yaml", home / "dagster.yaml")
        code = EVENTS_CODE.replace("STORAGE", repr(str(storage))).replace("COUNT", str(count))
        figures = measure(code, work, DAGSTER_HOME=str(home))
        per_partition[count] = figures["run_cpu"] / count
        _line(
            f"events: one range run over {count} partitions (no work)",
            f"{figures['run_cpu']:.1f} CPU-s, {1000 * per_partition[count]:.0f} ms per partition, "
            f"peak {figures['peak_mib']:.0f} MiB",
        )
    return {"events_s_per_partition": per_partition}


def stage_build(
    work: Path,
    sizes: list[int],
    workers: int,
    variants: dict[str, Path],
    scenes: int = 12,
    views: int = 6,
    profile: bool = False,
) -> dict:
    world = sample_world(
        work, f"world{scenes}x{views}", num_scenes=scenes, views_per_scene=views, camera_path="mixed"
    )
    originals = sorted((world / "scannet" / "scans").iterdir())
    per_variant = {
        name: build_slopes(work, originals, sizes, workers, name, root, profile)
        for name, root in variants.items()
    }
    return per_variant["new"]


PROJECT_SHARE_CODE = """
import cProfile
import pstats
import time


def project_share(profiler, root):
    \"\"\"The profiled CPU of the process, and the part of it spent in the project's code (``root``, not its
    virtual environment) as entered from other code: Dagster calling our assets, IO manager, resources and
    hooks, with all they call in turn. Re-entries (ours -> Dagster -> ours) count twice: an upper bound.\"\"\"
    def ours(filename):
        return filename.startswith(root) and "/.venv/" not in filename and "site-packages" not in filename
    stats = pstats.Stats(profiler).stats
    total = sum(entry[2] for entry in stats.values())
    project = sum(
        caller_entry[3]
        for function, entry in stats.items() if ours(function[0])
        for caller, caller_entry in entry[4].items() if not ours(caller[0])
    )
    return {"profiled_cpu": total, "project_cpu": project}
"""
"""The code the profiled build run uses to split its process's CPU between the project and the rest."""


def build_slopes(
    work: Path,
    originals: list[Path],
    sizes: list[int],
    workers: int,
    name: str,
    root: Path,
    profile: bool = False,
) -> dict:
    """The scan chain at each size with the code at ``root``, and its per-scan slopes."""
    results = {}
    for count in sizes:
        scans = linked_scans(originals, work / "build" / f"scans{count}", count)
        storage = work / "build" / f"storage{count}"
        home = work / "build" / f"home{count}"
        shutil.rmtree(storage, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        shutil.copy(REPOSITORY_ROOT / "pipelines" / "deploy" / "dagster.yaml", home / "dagster.yaml")
        code = f"""
        import resource
        import dagster as dg
        from assets.partitions import SCENES_PARTITIONS_NAME
        from pipelines.automation import OBSERVE_RAW_FILES_JOB
        from pipelines.cli import partition_range_tags
        from pipelines.definitions import build_definitions
        def cpu():
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return usage.ru_utime + usage.ru_stime
        defs = build_definitions({str(storage)!r})
        instance = dg.DagsterInstance.get()
        config = {{"resources": {{"sources": {{"config": {{"scannet_root": {str(scans)!r}}}}},
                                "workers": {{"config": {{"max_workers": {workers}}}}}}}}}
        scenes = sorted(p.name for p in __import__("pathlib").Path({str(scans)!r}).iterdir())
        instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, scenes)
        observe = defs.resolve_job_def(OBSERVE_RAW_FILES_JOB).execute_in_process(instance=instance, run_config=config)
        assert observe.success
        started = cpu()
        chain = [dg.AssetKey(name) for name in ("rgbd_frames", "rgbd_scenes", "rgbd_frames_quarantine",
                 "scene_geometry", "scene_geometry_quarantine", "frame_visibility", "frame_visibility_quarantine",
                 "dge_tasks", "dge_tasks_quarantine")]
        profiler = cProfile.Profile(time.process_time) if {profile!r} else None
        if profiler:
            profiler.enable()
        result = defs.resolve_job_def("dge_job").execute_in_process(
            instance=instance, run_config=config, asset_selection=chain,
            tags=partition_range_tags(scenes[0], scenes[-1]))
        assert result.success
        run_cpu = cpu() - started
        if profiler:
            profiler.disable()
            report(run_cpu=run_cpu, **project_share(profiler, {str(root)!r}))
        else:
            report(run_cpu=run_cpu)
        """
        figures = measure(PROJECT_SHARE_CODE + textwrap.dedent(code), work, root, DAGSTER_HOME=str(home))
        disk = sum(path.stat().st_size for path in storage.rglob("*.parquet"))
        results[count] = figures
        _line(
            f"build ({name}): {count} scans, one range run ({workers} workers)",
            f"{figures['all_cpu']:.1f} CPU-s every process, {figures['run_cpu']:.1f} CPU-s the run's own process, "
            f"peak {figures['peak_mib']:.0f} MiB, {disk / 2**20:.1f} MiB of tables",
        )
    small, large = min(sizes), max(sizes)
    per_scan = {
        "all_cpu": (results[large]["all_cpu"] - results[small]["all_cpu"]) / max(1, large - small),
        "run_cpu": (results[large]["run_cpu"] - results[small]["run_cpu"]) / max(1, large - small),
        "peak_mib": (results[large]["peak_mib"] - results[small]["peak_mib"]) / max(1, large - small),
    }
    _line(
        f"build ({name}): per scan (slope)",
        f"{per_scan['all_cpu']:.2f} CPU-s every process, "
        f"{per_scan['run_cpu']:.3f} CPU-s run's process, {per_scan['peak_mib']:.2f} MiB run's peak memory",
    )
    if profile:
        project, profiled = (
            (results[large][key] - results[small][key]) / max(1, large - small)
            for key in ("project_cpu", "profiled_cpu")
        )
        _line(
            f"build ({name}): the run's process per scan, profiled",
            f"{project:.3f} of {profiled:.3f} CPU-s in the project's code "
            f"({f'{100 * project / profiled:.0f}%' if profiled > 0 else 'no slope'}), the rest Dagster's",
        )
    return {
        "build_cpu_per_scan": per_scan["all_cpu"],
        "build_run_cpu_per_scan": per_scan["run_cpu"],
        "build_run_mib_per_scan": per_scan["peak_mib"],
    }


def stage_long(work: Path, frames: int, width: int, height: int) -> dict:
    world = sample_world(
        work,
        f"long{frames}",
        num_scenes=1,
        views_per_scene=frames,
        camera_path="loop",
        width=width,
        height=height,
    )
    code = f"""
    import resource
    from pathlib import Path
    from assets.dge.geometry import SceneGeometrySettings, build_scan_geometry
    from assets.dge.tasks import build_scene_tasks
    from assets.dge.visibility import build_frame_visibility
    from assets.sources.assets import with_origin
    from readers.scannet import read_scannet
    def cpu():
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime
    started = cpu()
    tables = read_scannet(Path({str(world / "scannet" / "scans")!r}))
    frames = with_origin(tables.frames, "sample_world")
    (scene,) = with_origin(tables.scenes, "sample_world").iter_rows(named=True)
    read = cpu()
    geometry = build_scan_geometry(frames, scene, SceneGeometrySettings())
    built = cpu()
    visibility = build_frame_visibility(geometry, frames, scene=scene)
    seen = cpu()
    tasks = build_scene_tasks(geometry.to_row(), visibility, frames)
    report(read=read - started, geometry=built - read, visibility=seen - built, tasks=cpu() - seen,
           frames=frames.height, used=len(geometry.used_frames), questions=tasks.height)
    """
    figures = measure(code, work)
    total = figures["read"] + figures["geometry"] + figures["visibility"] + figures["tasks"]
    _line(
        f"long scan: {figures['frames']} frames at {width}x{height}, {figures['used']} keyframes used",
        f"{total:.2f} CPU-s (read {figures['read']:.2f}, geometry {figures['geometry']:.2f}, visibility "
        f"{figures['visibility']:.2f}, tasks {figures['tasks']:.2f}), peak {figures['peak_mib']:.0f} MiB, "
        f"{figures['questions']} questions",
    )
    return {"long_scan_cpu": total, "long_scan_mib": figures["peak_mib"]}


SOURCE_CODE = """
import resource
import dagster as dg
from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import ASSET
from pipelines.io_manager import ParquetIOManager
resources = {"io_manager": ParquetIOManager(root=STORAGE), "storage": StorageResource(root=STORAGE),
             "sources": SourcesResource(FIELDS)}
usage = resource.getrusage(resource.RUSAGE_SELF)
result = dg.materialize([ASSET, dg.AssetSpec("sample_world"), dg.AssetSpec(RAW)], resources=resources)
assert result.success
after = resource.getrusage(resource.RUSAGE_SELF)
report(work_cpu=after.ru_utime + after.ru_stime - usage.ru_utime - usage.ru_stime)
"""
"""A source asset materialized alone (``ASSET``, ``RAW``, ``FIELDS`` and ``STORAGE`` filled in)."""


def source_run(work: Path, root: Path, asset: str, raw: str, fields: str, storage: Path) -> tuple[dict, int]:
    """One source asset built by the code at ``root`` into ``storage``: its figures and the bytes it wrote."""
    shutil.rmtree(storage, ignore_errors=True)
    code = (
        SOURCE_CODE.replace("ASSET", asset)
        .replace("RAW", repr(raw))
        .replace("FIELDS", fields)
        .replace("STORAGE", repr(str(storage)))
    )
    figures = measure(code, work, root)
    return figures, sum(path.stat().st_size for path in storage.glob("*.parquet"))


def stage_vg(work: Path, images: int, variants: dict[str, Path]) -> dict:
    folder = visual_genome(work / "vg" / f"vg{images}", images)
    fields = f"visual_genome_root={str(folder)!r}, visual_genome_layout='raw'"
    result: dict = {}
    for name, root in variants.items():
        storage = work / "vg" / f"storage_{name}"
        figures, disk = source_run(work, root, "scene_graphs_asset", "raw_scene_graph_files", fields, storage)
        _line(
            f"vg ({name}): scene_graphs from {images} images ({VG_OBJECTS} objects, {VG_RELATIONS} relations)",
            f"{figures['work_cpu']:.1f} CPU-s (after imports), peak {figures['peak_mib']:.0f} MiB, "
            f"tables {disk / 2**20:.0f} MiB",
        )
        if name == "new":
            result = {
                "vg_cpu_per_image": figures["work_cpu"] / images,
                "vg_peak_mib": figures["peak_mib"],
                "vg_disk_per_image": disk / images,
            }
            shard = measure(
                f"""
                from assets.stvqa.shards import read_shard_rows
                rows = read_shard_rows({str(storage / "scene_graphs.parquet")!r}, "07")
                report(rows=rows.height)
                """,
                work,
            )
            _line(
                f"vg ({name}): one STVQA shard's rows ({shard['rows']} of {images})",
                f"{shard['own_cpu']:.2f} CPU-s, peak {shard['peak_mib']:.0f} MiB",
            )
    return result


def stage_mcq(work: Path, questions: int, variants: dict[str, Path]) -> dict:
    folder = omnispatial(work / "mcq" / f"omnispatial{questions}", questions)
    result: dict = {}
    for name, root in variants.items():
        storage = work / "mcq" / f"storage_{name}"
        figures, disk = source_run(
            work, root, "mcq_questions_asset", "raw_mcq_files", f"omnispatial_root={str(folder)!r}", storage
        )
        _line(
            f"mcq ({name}): mcq_questions from {questions} questions (2 per image)",
            f"{figures['work_cpu']:.1f} CPU-s (after imports), peak {figures['peak_mib']:.0f} MiB, "
            f"tables {disk / 2**20:.0f} MiB",
        )
        if name == "new":
            result = {
                "mcq_cpu_per_question": figures["work_cpu"] / questions,
                "mcq_peak_mib": figures["peak_mib"],
                "mcq_disk_per_question": disk / questions,
            }
    return result


def baseline_code(given: str, work: Path) -> Path:
    """The old code: a folder holding a copy of the repository, or a git revision exported under ``work``."""
    if Path(given).is_dir():
        return Path(given).resolve()
    folder = work / f"baseline_{given}"
    if not folder.is_dir():
        export_revision(given, folder)
    return folder


def project(figures: dict, cores: int, ray_nodes: int, ray_cores: int) -> None:
    """The per-unit figures times the full data sets."""
    sys.stdout.write("Projection to the full data sets\n")
    if "observe_us_per_file" in figures:
        _line(
            f"observation of ScanNet ({FULL['files']:,} files), nothing changed",
            f"{figures['observe_us_per_file'] * FULL['files'] / 1e6 / 60:.1f} CPU-min",
        )
    if "build_cpu_per_scan" in figures:
        long_extra = figures.get("long_scan_cpu", 0.0)
        per_scan = figures["build_cpu_per_scan"] + long_extra
        run_part = figures["build_run_cpu_per_scan"] * FULL["scans"]
        work_part = per_scan * FULL["scans"]
        _line(
            f"scan chain of ScanNet ({FULL['scans']} scans of ~{FULL['frames_per_scan']} frames)",
            f"{work_part / 3600:.1f} CPU-h; the run's own process {run_part / 60:.1f} CPU-min "
            f"and {figures['build_run_mib_per_scan'] * FULL['scans']:.0f} MiB more memory",
        )
        _line(
            f"  wall on this machine ({cores} cores)",
            f"{max(work_part / cores, run_part) / 3600:.1f} h",
        )
        _line(
            f"  wall on Ray ({ray_nodes} nodes x {ray_cores} cores)",
            f"{max(work_part / (ray_nodes * ray_cores), run_part) / 3600:.2f} h (the run's process: "
            f"{run_part / 3600:.2f} h)",
        )
    if "vg_cpu_per_image" in figures:
        _line(
            f"scene_graphs of Visual Genome ({FULL['vg_images']:,} images)",
            f"{figures['vg_cpu_per_image'] * FULL['vg_images'] / 60:.1f} CPU-min, peak {figures['vg_peak_mib']:.0f} MiB "
            f"(a batch), table {figures['vg_disk_per_image'] * FULL['vg_images'] / 2**30:.1f} GiB",
        )
    if "mcq_cpu_per_question" in figures:
        _line(
            f"mcq_questions of {FULL['mcq_questions']:,} questions",
            f"{figures['mcq_cpu_per_question'] * FULL['mcq_questions'] / 60:.1f} CPU-min, "
            f"tables {figures['mcq_disk_per_question'] * FULL['mcq_questions'] / 2**30:.2f} GiB",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--stages", default=",".join(STAGES), help=f"Stages to run (default {','.join(STAGES)})."
    )
    parser.add_argument(
        "--work-dir", type=Path, default=Path("/tmp/bench_scale"), help="Where the data is made."
    )
    parser.add_argument("--scans", type=int, default=1500, help="observe: scan folders (default 1500).")
    parser.add_argument("--scan-files", type=int, default=32, help="observe: files per scan (default 32).")
    parser.add_argument(
        "--event-scans", default="100,400,1600", help="events: partition counts (default 100,400,1600)."
    )
    parser.add_argument(
        "--build-scans", default="12,48", help="build: scan counts, one range run each (default 12,48)."
    )
    parser.add_argument("--workers", type=int, default=2, help="build: worker processes (default 2).")
    parser.add_argument(
        "--profile-run",
        action="store_true",
        help="build: profile the run's own process (its CPU figures then include the profiler's cost) and split "
        "its per-scan CPU between the project's code and Dagster's.",
    )
    parser.add_argument(
        "--long-frames", type=int, default=2000, help="long: frames of the long scan (default 2000)."
    )
    parser.add_argument("--vg-images", type=int, default=20_000, help="vg: images (default 20,000).")
    parser.add_argument("--mcq-questions", type=int, default=20_000, help="mcq: questions (default 20,000).")
    parser.add_argument("--ray-nodes", type=int, default=8, help="Projection: Ray nodes (default 8).")
    parser.add_argument(
        "--ray-cores", type=int, default=32, help="Projection: cores per Ray node (default 32)."
    )
    parser.add_argument(
        "--baseline",
        default=None,
        help="Old code beside this working tree in the observe, build, vg and mcq stages: a git revision or a "
        "folder holding a copy of the repository.",
    )
    parser.add_argument("--tiny", action="store_true", help="Smoke run: every stage at a few units.")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    if args.tiny:
        # One events size (each size is the same run), and the build's range runs in their own process: two
        # worker processes per run cost more CPU than the two or three scans they build.
        args.scans, args.scan_files, args.build_scans, args.event_scans = 6, 8, "2,3", "4"
        args.workers, args.long_frames, args.vg_images, args.mcq_questions = 1, 40, 40, 40
        args.work_dir = args.work_dir.with_name(args.work_dir.name + "_tiny")
    stages = [stage.strip() for stage in args.stages.split(",") if stage.strip()]
    unknown = set(stages) - set(STAGES)
    if unknown:
        raise SystemExit(f"unknown stages {sorted(unknown)}: use {', '.join(STAGES)}")
    args.work_dir.mkdir(parents=True, exist_ok=True)
    become_subreaper()
    cores = len(os.sched_getaffinity(0))
    sys.stdout.write(
        f"bench_scale: {cores} cores, load average {os.getloadavg()[0]:.1f}, data under {args.work_dir}\n"
    )
    variants = {"new": REPOSITORY_ROOT}
    if args.baseline:
        variants = {"old": baseline_code(args.baseline, args.work_dir), **variants}
    figures: dict = {}
    if "observe" in stages:
        figures.update(stage_observe(args.work_dir, args.scans, args.scan_files, variants))
    if "events" in stages:
        figures.update(stage_events(args.work_dir, [int(size) for size in args.event_scans.split(",")]))
    if "build" in stages:
        sizes = [int(size) for size in args.build_scans.split(",")]
        world = (2, 3) if args.tiny else (12, 6)
        figures.update(stage_build(args.work_dir, sizes, args.workers, variants, *world, args.profile_run))
    if "long" in stages:
        width, height = (160, 120) if args.tiny else (640, 480)
        figures.update(stage_long(args.work_dir, args.long_frames, width, height))
    if "vg" in stages:
        figures.update(stage_vg(args.work_dir, args.vg_images, variants))
    if "mcq" in stages:
        figures.update(stage_mcq(args.work_dir, args.mcq_questions, variants))
    project(figures, cores, args.ray_nodes, args.ray_cores)
    sys.stdout.write(f"load average after: {os.getloadavg()[0]:.1f}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
