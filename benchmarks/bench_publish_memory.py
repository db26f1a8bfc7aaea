"""Peak memory of publishing a table with images: ``mcq_questions`` with its images embedded from ``mcq_images``.

Writes a synthetic storage root per size: ``mcq_images`` with ``--images`` PNG images (each ``--side`` x
``--side`` pixels of its own noise, so each file is about ``3 * side**2`` bytes and neither it nor the table
compresses) and ``mcq_questions`` with ``--questions-per-image`` questions about each image (named by ``image_sha256``); then,
in a process of its own, writes the repo's shards of ``mcq_questions`` as ``spatial-publish`` does
(:func:`publishing.tables.write_shards`: every row group checked against the contract, the images put back a
few questions at a time) and reports that process's peak resident memory. The same is done for each of
``--sizes`` (multiples of ``--images``): a bounded publisher's peak stays flat while the table grows.

Per size it prints the images, the questions, the bytes of the image table and of the published shards
(each question carries its image, so several times the image table), the shards, the seconds and the peak
resident memory (MiB), then one JSON line with every figure.

    python benchmarks/bench_publish_memory.py                        # 300, 600 and 1200 images of 256 x 256 (about 200 KB each)
    python benchmarks/bench_publish_memory.py --images 500 --sizes 1,4
    python benchmarks/bench_publish_memory.py --tiny                 # smoke run: 20 and 40 images of 64 x 64
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
TINY = {"images": 20, "side": 64, "questions_per_image": 3, "sizes": "1,2"}
"""Defaults under ``--tiny``: a smoke run of seconds."""

WRITE_ROOT = """
import io, sys
from pathlib import Path
import numpy as np
import polars as pl
from PIL import Image
from data_contracts.images import IMAGE_DTYPE, image_sha256
from data_contracts.mcq_questions import McqImages, McqQuestions
from data_contracts.parquet_files import ParquetTableWriter
from data_contracts.validation import polars_schema

root, images, side, per_image = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
root.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
metadata = {"data_version": f"bench-{images}", "contract_version": "2.0.0"}
with (root / "mcq_images.parquet").open("wb") as image_file, (root / "mcq_questions.parquet").open("wb") as questions_file:
    image_writer = ParquetTableWriter(image_file, polars_schema(McqImages), {**metadata, "contract_version": "1.0.0"})
    question_writer = ParquetTableWriter(questions_file, polars_schema(McqQuestions), metadata)
    for start in range(0, images, 64):
        cells, questions = [], []
        for number in range(start, min(images, start + 64)):
            pixels = rng.integers(0, 256, (side, side, 3), dtype=np.uint8)  # no two images share bytes
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, format="PNG", compress_level=1)
            cell = {"bytes": buffer.getvalue(), "path": f"{number}.png"}
            cells.append(cell)
            sha = image_sha256(cell)
            for index in range(per_image):
                questions.append({
                    "question_id": f"omnispatial/Bench/{number}_{index}", "image_sha256": sha,
                    "image_width": side, "image_height": side, "question": f"Question {index} about image {number}?",
                    "options": ["left", "right"], "answer_index": index % 2, "answer": "AB"[index % 2],
                    "task_type": "Bench", "sub_task_type": "", "split": "train" if number % 5 else "test",
                    "source": "omnispatial", "origin": "real",
                })
        image_writer.write(pl.DataFrame({
            "image_sha256": [image_sha256(cell) for cell in cells],
            "image": pl.Series(cells, dtype=IMAGE_DTYPE),
            "image_width": [side] * len(cells), "image_height": [side] * len(cells),
        }))
        question_writer.write(pl.DataFrame(questions, schema=polars_schema(McqQuestions)))
    image_writer.close()
    question_writer.close()
"""

PUBLISH = """
import json, resource, sys, time
from pathlib import Path
from publishing.tables import inspect_table, write_shards

root, out = Path(sys.argv[1]), Path(sys.argv[2])
started = time.perf_counter()
shards = write_shards(inspect_table(root, "mcq_questions"), out, max_shard_bytes=int(sys.argv[3]))
seconds = time.perf_counter() - started
print(json.dumps({
    "shards": len(shards), "shard_bytes": sum(shard.size for shard in shards), "rows": sum(shard.rows for shard in shards),
    "seconds": round(seconds, 2), "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
}))
"""


def _run(script: str, *arguments: object) -> str:
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)],
        cwd=REPOSITORY_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return done.stdout


def measure(images: int, side: int, per_image: int, max_shard_bytes: int, folder: Path) -> dict:
    """Write a synthetic root of ``images`` images and publish its ``mcq_questions``; the figures."""
    root = folder / f"root_{images}"
    _run(WRITE_ROOT, root, images, side, per_image)
    published = json.loads(_run(PUBLISH, root, folder / f"repo_{images}", max_shard_bytes).splitlines()[-1])
    return {
        "images": images,
        "questions": images * per_image,
        "image_table_mib": round((root / "mcq_images.parquet").stat().st_size / (1 << 20), 1),
        "shards_mib": round(published.pop("shard_bytes") / (1 << 20), 1),
        **published,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--side", type=int, default=256)
    parser.add_argument("--questions-per-image", type=int, default=3)
    parser.add_argument("--sizes", default="1,2,4", help="multiples of --images to publish, comma-separated")
    parser.add_argument("--max-shard-mb", type=float, default=64.0)
    parser.add_argument("--tiny", action="store_true", help="a smoke run of seconds")
    args = parser.parse_args(argv)
    if args.tiny:
        args.images, args.side = TINY["images"], TINY["side"]
        args.questions_per_image, args.sizes = TINY["questions_per_image"], TINY["sizes"]
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for multiple in [int(value) for value in args.sizes.split(",")]:
            figures = measure(
                args.images * multiple,
                args.side,
                args.questions_per_image,
                int(args.max_shard_mb * (1 << 20)),
                Path(folder),
            )
            results.append(figures)
            sys.stdout.write(
                f"{figures['images']:>7} images {figures['questions']:>7} questions "
                f"{figures['image_table_mib']:>8} MiB images {figures['shards_mib']:>8} MiB shards "
                f"{figures['shards']:>4} shards {figures['seconds']:>7} s {figures['peak_rss_mib']:>8} MiB peak RSS\n"
            )
            sys.stdout.flush()
    summary = {"side": args.side, "questions_per_image": args.questions_per_image, "runs": results}
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
