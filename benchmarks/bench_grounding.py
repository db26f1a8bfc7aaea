"""Speed of Grounding DINO pseudo-GT: images per second batched versus one image at a time.

Runs :class:`assets.grounding.detector.GroundingDinoDetector` (the code path of the
``pseudo_gt_boxes`` asset: processor, forward pass, label mapping, grid scaling) over synthetic
images with three phrases each. The model is built locally with random weights: the tiny test
configuration by default (CPU), or with ``--full-size`` the architecture of
IDEA-Research/grounding-dino-tiny (Swin-T + BERT-base, 900 queries) for GPU figures; random weights
cost the same compute as trained ones. ``--model DIR`` measures a real checkpoint instead.

Usage::

    python benchmarks/bench_grounding.py [--images 32] [--batch-sizes 1 8] [--size 320 240] [--threads 1]
    python benchmarks/bench_grounding.py --full-size --device cuda --images 256 --batch-sizes 1 8 32 --dtype float16
    python benchmarks/bench_grounding.py --tiny    # smoke run: 4 small images, batches 1 and 2, one repeat

Prints one line per batch size and a JSON summary on the last line.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from assets.grounding.detector import (
    DetectorSettings,
    GroundingDinoDetector,
    build_tiny_grounding_dino,
    load_grounding_dino,
)

logger = logging.getLogger("bench_grounding")

TINY = {"images": 4, "batch_sizes": [1, 2], "size": [64, 48], "repeats": 1}
"""Defaults under `--tiny` (explicit flags still win)."""

PHRASES = [
    ["red box", "green plant", "orange chair"],
    ["boy in orange clothes", "gray vehicle", "dog"],
    ["white lamp", "blue ball", "brown table"],
    ["black sofa", "yellow vase", "teal book"],
]


def make_images(count: int, width: int, height: int, seed: int = 0) -> list[Image.Image]:
    """Random-noise RGB images with a few flat rectangles (the content does not change the compute)."""
    rng = np.random.default_rng(seed)
    images = []
    for _ in range(count):
        pixels = rng.integers(0, 255, size=(height, width, 3), dtype=np.uint8)
        for _ in range(3):
            x, y = int(rng.integers(0, width // 2)), int(rng.integers(0, height // 2))
            pixels[y : y + height // 3, x : x + width // 3] = rng.integers(0, 255, size=3)
        images.append(Image.fromarray(pixels))
    return images


def measure(
    detector: GroundingDinoDetector, images: list[Image.Image], phrase_lists: list[list[str]], device: str
) -> float:
    """Seconds for one pass over all images (after the caller's warm-up)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()
    started = time.perf_counter()
    detector.detect(images, phrase_lists)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32, help="images per measurement")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8], help="batch sizes to compare")
    parser.add_argument("--size", type=int, nargs=2, default=[320, 240], metavar=("WIDTH", "HEIGHT"))
    parser.add_argument(
        "--model", default=None, help="a Grounding DINO folder or id (default: build one locally)"
    )
    parser.add_argument("--full-size", action="store_true", help="build the Swin-T sized architecture")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, auto")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--repeats", type=int, default=2, help="measurements per batch size (best kept)")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)

    import torch

    torch.set_num_threads(arguments.threads)
    with tempfile.TemporaryDirectory() as scratch:
        if arguments.model:
            model_path = arguments.model
        else:
            image_size = (800, 1333) if arguments.full_size else (64, 96)
            model_path = str(
                build_tiny_grounding_dino(
                    Path(scratch) / "model",
                    full_size=arguments.full_size,
                    image_size=image_size,
                    score_scale=1.0 if arguments.full_size else 0.1,
                )
            )
        model, processor, device = load_grounding_dino(model_path, arguments.device, arguments.dtype)
        parameters = sum(parameter.numel() for parameter in model.parameters())
        images = make_images(arguments.images, *arguments.size)
        phrase_lists = [PHRASES[index % len(PHRASES)] for index in range(arguments.images)]
        results = {}
        for batch_size in arguments.batch_sizes:
            settings = DetectorSettings(
                model=model_path, batch_size=batch_size, device=device, dtype=arguments.dtype
            )
            detector = GroundingDinoDetector(settings, model=model, processor=processor)
            detector.detect(images[: max(batch_size, 1)], phrase_lists[: max(batch_size, 1)])  # warm-up
            seconds = min(measure(detector, images, phrase_lists, device) for _ in range(arguments.repeats))
            results[batch_size] = arguments.images / seconds
            logger.info(
                "batch %3d: %8.2f images/s (%.3f s for %d images)",
                batch_size,
                results[batch_size],
                seconds,
                arguments.images,
            )
    baseline = results.get(1)
    summary = {
        "device": device,
        "model": "local" if not arguments.model else arguments.model,
        "full_size": arguments.full_size,
        "parameters": parameters,
        "image_size": arguments.size,
        "threads": arguments.threads,
        "images_per_second": {str(size): round(rate, 2) for size, rate in results.items()},
        "speedup_over_batch_1": {str(size): round(rate / baseline, 2) for size, rate in results.items()}
        if baseline
        else {},
    }
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
