"""Speed of the heavy stages on Ray: Grounding DINO images/s and scan geometry scans/s, local vs 1 and 2 Ray workers.

Runs the code paths of the assets (:func:`assets.compute.partition_results`): ``pseudo_gt_boxes`` shards
(``grounding_dino`` backend; on Ray one task per shard, the questions split into as many shards as
workers) and each scan's ``scene_geometry`` partition, each in the process (``compute: local``) and on a
local Ray cluster started here with 1 and then 2 CPUs (one task per CPU). The Ray figures include what a
run pays: cluster start-up is not counted, task start-up (loading the model) and transfers are. The detector is the tiny Grounding DINO built locally (random weights) unless
``--full-size`` builds the Swin-T architecture of IDEA-Research/grounding-dino-tiny. The images are
random noise with three phrases each (the content does not change the compute); the scans come from a
sample world generated here.

The OmniSpatial projection (6.9k images on 8 GPUs, one shard's task per GPU) divides a measured local
per-image cost by 8: the Swin-T architecture's, on ``--projection-images`` images of
``--projection-size`` pixels (batch 1, after one warm-up pass), on ``--device`` (a CPU core here, so
the line says it is CPU-based; run with ``--device cuda`` on a GPU machine for the GPU figure).
Under ``--tiny`` the tiny detector's cost is used instead, and the line says so.

Usage::

    python benchmarks/bench_ray.py [--images 48] [--scenes 4] [--views 6] [--batch-size 4]
    python benchmarks/bench_ray.py --full-size --device cuda --images 256 --batch-size 8
    python benchmarks/bench_ray.py --tiny    # smoke run: 6 images, 2 small scans

Prints one table, the projection, and a JSON summary on the last line.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
from PIL import Image

from assets.compute import ComputeSettings, partition_results
from assets.dge.assets import scene_geometry_partition
from assets.dge.geometry import SceneGeometrySettings
from assets.grounding.assets import pseudo_gt_boxes_shard
from assets.grounding.detector import build_tiny_grounding_dino
from assets.grounding.pseudo_gt import PseudoGtSettings
from assets.partition_ranges import restore_events
from assets.provenance import TableFilePlan
from assets.sample_world import SampleWorldConfig, generate_sample_world
from data_contracts.storage import table_path, write_table
from readers.scannet import read_scannet

logger = logging.getLogger("bench_ray")

OMNISPATIAL_IMAGES = 6_900
PROJECTION_GPUS = 8
TINY = {
    "images": 6,
    "scenes": 2,
    "views": 3,
    "batch_size": 2,
    "world_size": [160, 120],
    "image_size": [64, 48],
    "projection_images": 0,
}
"""Defaults under `--tiny` (explicit flags still win)."""

PHRASES = [
    ["red box", "green plant", "orange chair"],
    ["boy in orange clothes", "gray vehicle", "dog"],
    ["white lamp", "blue ball", "brown table"],
    ["black sofa", "yellow vase", "teal book"],
]


def synthetic_shard(count: int, width: int, height: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`mcq_questions` and `object_phrases` rows of ``count`` questions, each with its own random image."""
    rng = np.random.default_rng(seed)
    cells = []
    for index in range(count):
        pixels = rng.integers(0, 255, size=(height, width, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, format="PNG")
        cells.append({"bytes": buffer.getvalue(), "path": f"bench_{index:05d}.png"})
    identifiers = [f"bench-{index:05d}" for index in range(count)]
    questions = pl.DataFrame(
        {
            "question_id": identifiers,
            "image": cells,
            "image_width": [width] * count,
            "image_height": [height] * count,
            "task_type": ["relation"] * count,
        }
    )
    phrases = pl.DataFrame(
        {"question_id": identifiers, "phrases": [PHRASES[index % len(PHRASES)] for index in range(count)]}
    )
    return questions, phrases


def time_grounding(
    questions, phrases, settings: PseudoGtSettings, compute: ComputeSettings, shards: int = 1
) -> float:
    """Seconds to ground the questions as ``shards`` ``pseudo_gt_boxes`` shards where ``compute`` says (locally:
    one after another in this process; on Ray: one task per shard)."""
    phrases = phrases.with_columns(pl.lit(False).alias("skipped"))
    storage = Path(tempfile.mkdtemp(prefix="bench_ray_storage_"))
    arguments = {}
    for shard in range(shards):
        shard_phrases = phrases.gather_every(shards, offset=shard)
        shard_questions = questions.filter(
            pl.col("question_id").is_in(shard_phrases["question_id"].implode())
        )
        key = f"shard-{shard:02d}"
        arguments[key] = (
            key,
            shard_questions,
            storage / "mcq_images.parquet",  # not read: the questions carry their images
            shard_phrases.join(questions.select("question_id", "task_type"), on="question_id"),
            settings,
            None,
            storage,
            _plans(storage, "pseudo_gt_boxes"),
        )
    started = time.perf_counter()
    rows = 0
    with partition_results(pseudo_gt_boxes_shard, arguments, workers=1, compute=compute) as result:
        for key in arguments:
            rows += sum(
                event.value.rows
                for event in restore_events(result(key))
                if isinstance(event, dg.Output) and event.output_name == "pseudo_gt_boxes"
            )
    seconds = time.perf_counter() - started
    if rows != questions.height:
        raise RuntimeError(f"{rows} rows for {questions.height} questions")
    return seconds


def time_scans(frames: pl.DataFrame, scenes: pl.DataFrame, compute: ComputeSettings) -> float:
    """Seconds to build every scan's ``scene_geometry`` partition where ``compute`` says (locally: one
    after another in this process), from its ``rgbd_scenes`` and ``rgbd_frames`` files."""
    storage = Path(tempfile.mkdtemp(prefix="bench_ray_storage_"))
    plans = _plans(storage, "scene_geometry")
    arguments = {}
    for scene_id in scenes["scene_id"]:
        files = []
        for table, rows in (("rgbd_scenes", scenes), ("rgbd_frames", frames)):
            files.append(table_path(storage, table, scene_id))
            write_table(rows.filter(pl.col("scene_id") == scene_id), files[-1])
        arguments[scene_id] = (scene_id, *files, SceneGeometrySettings(), storage, plans)
    started = time.perf_counter()
    with partition_results(scene_geometry_partition, arguments, workers=1, compute=compute) as result:
        for key in arguments:
            result(key)
    return time.perf_counter() - started


def _plans(storage: Path, table: str) -> dict[str, TableFilePlan]:
    """Plans that write ``table`` and its quarantine under ``storage`` (no upstream versions)."""
    return {
        name: TableFilePlan(root=storage, table=name, code_version=None, upstream=())
        for name in (table, f"{table}_quarantine")
    }


def swin_t_seconds_per_image(model: Path, arguments: argparse.Namespace) -> float:
    """Seconds per image of the Swin-T detector, local mode, batch 1, after one warm-up image."""
    count = arguments.projection_images
    questions, phrases = synthetic_shard(count + 1, *arguments.projection_size, seed=1)
    settings = PseudoGtSettings(
        backend="grounding_dino", model=str(model), device=arguments.device, batch_size=1
    )
    time_grounding(questions.head(1), phrases.head(1), settings, ComputeSettings())
    return time_grounding(questions.tail(count), phrases.tail(count), settings, ComputeSettings()) / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=48, help="questions (one image each) to ground")
    parser.add_argument("--image-size", type=int, nargs=2, default=[320, 240], metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--batch-size", type=int, default=4, help="images per Grounding DINO forward pass")
    parser.add_argument("--full-size", action="store_true", help="the Swin-T architecture (random weights)")
    parser.add_argument("--device", default="cpu", help="detector device of the local run: cpu, cuda")
    parser.add_argument("--scenes", type=int, default=4, help="scans of the generated sample world")
    parser.add_argument("--views", type=int, default=6, help="frames per scan")
    parser.add_argument("--world-size", type=int, nargs=2, default=[320, 240], metavar=("WIDTH", "HEIGHT"))
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray cluster sizes (CPUs)")
    parser.add_argument(
        "--projection-images",
        type=int,
        default=3,
        help="Swin-T images timed for the projection (0: tiny model)",
    )
    parser.add_argument(
        "--projection-size", type=int, nargs=2, default=[1280, 960], metavar=("WIDTH", "HEIGHT")
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stdout)
    logger.setLevel(logging.INFO)

    import ray
    import torch

    torch.set_num_threads(1)  # the local run on one core, as each one-CPU actor
    architecture = "Swin-T Grounding DINO" if arguments.full_size else "tiny Grounding DINO"
    with tempfile.TemporaryDirectory(prefix="bench_ray") as scratch:
        model = build_tiny_grounding_dino(
            Path(scratch) / "model",
            full_size=arguments.full_size,
            image_size=(800, 1333) if arguments.full_size else (64, 96),
            score_scale=1.0 if arguments.full_size else 0.1,
        )
        world = Path(scratch) / "world"
        width, height = arguments.world_size
        generate_sample_world(
            SampleWorldConfig(
                root=world,
                seed=0,
                num_scenes=arguments.scenes,
                views_per_scene=arguments.views,
                width=width,
                height=height,
                show_progress=False,
            )
        )
        tables = read_scannet(world / "scannet" / "scans")
        scenes = tables.scenes
        questions, phrases = synthetic_shard(arguments.images, *arguments.image_size)
        settings = PseudoGtSettings(
            backend="grounding_dino",
            model=str(model),
            device=arguments.device,
            batch_size=arguments.batch_size,
        )
        results = {
            "local": {
                "image_seconds": time_grounding(questions, phrases, settings, ComputeSettings()),
                "scan_seconds": time_scans(tables.frames, scenes, ComputeSettings()),
            }
        }
        for workers in arguments.workers:
            ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
            try:
                compute = ComputeSettings(compute="ray")
                remote = settings.model_copy(update={"device": "cpu"})
                results[f"ray, {workers} worker{'s' if workers > 1 else ''}"] = {
                    "image_seconds": time_grounding(questions, phrases, remote, compute, shards=workers),
                    "scan_seconds": time_scans(tables.frames, scenes, compute),
                }
            finally:
                ray.shutdown()
        projection_model = "tiny Grounding DINO"
        per_image = results["local"]["image_seconds"] / arguments.images
        if arguments.projection_images > 0 and not arguments.full_size:
            swin_t = build_tiny_grounding_dino(
                Path(scratch) / "swin-t", full_size=True, image_size=(800, 1333)
            )
            per_image = swin_t_seconds_per_image(swin_t, arguments)
            projection_model = "Swin-T Grounding DINO, 800x1333 input"
        elif arguments.full_size:
            projection_model = architecture

    logger.info(
        "%d images %dx%d (%s, random weights, batch %d); %d scans of %d frames %dx%d",
        arguments.images,
        *arguments.image_size,
        architecture,
        arguments.batch_size,
        len(scenes),
        arguments.views,
        width,
        height,
    )
    logger.info("%-16s %10s %10s", "mode", "images/s", "scans/s")
    for mode, figures in results.items():
        figures["images_per_second"] = arguments.images / figures["image_seconds"]
        figures["scans_per_second"] = len(scenes) / figures["scan_seconds"]
        logger.info("%-16s %10.2f %10.3f", mode, figures["images_per_second"], figures["scans_per_second"])
    where = "GPU" if arguments.device.startswith("cuda") else "one CPU core"
    projection_hours = OMNISPATIAL_IMAGES * per_image / PROJECTION_GPUS / 3600
    logger.info(
        "OmniSpatial projection (%s-based): %d images x %.4f s/image measured on %s (%s) / %d workers = %.3f h",
        where,
        OMNISPATIAL_IMAGES,
        per_image,
        where,
        projection_model,
        PROJECTION_GPUS,
        projection_hours,
    )
    sys.stdout.write(
        json.dumps(
            {
                "results": results,
                "per_image_seconds": per_image,
                "projection_basis": where,
                "projection_model": projection_model,
                "omnispatial_8_worker_hours": projection_hours,
            }
        )
        + "\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
