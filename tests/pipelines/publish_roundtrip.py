"""Load a published repo with ``datasets.load_dataset`` and compare every row with the local table.

Run in its own process, since ``datasets`` and ``huggingface_hub`` read ``HF_ENDPOINT`` when imported:

    python -m tests.pipelines.publish_roundtrip OWNER/NAME STORAGE_ROOT CONFIG[,CONFIG...]

prints one JSON object: per ``config/split``, the rows loaded and held locally, the images decoded (as
``PIL.Image``, pixel-equal to the local image cells) and the first mismatches (none when the rows are equal).
A local table that names its images by ``image_sha256`` (``mcq_questions``) is compared with its images
embedded from ``mcq_images``, as it is published.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import polars as pl
from datasets import load_dataset
from PIL import Image

from data_contracts.image_store import IMAGE_KEY, embed_images
from data_contracts.images import decode_image
from data_contracts.storage import read_table, table_path


def _same(loaded: object, local: object, counts: dict) -> bool:
    if isinstance(loaded, Image.Image):
        counts["images_decoded"] += 1
        return np.array_equal(np.asarray(loaded), np.asarray(decode_image(local, mode=None)))
    if isinstance(loaded, list) and isinstance(local, list):
        return len(loaded) == len(local) and all(
            _same(a, b, counts) for a, b in zip(loaded, local, strict=True)
        )
    if isinstance(loaded, dict) and isinstance(local, dict):
        return loaded.keys() == local.keys() and all(_same(loaded[k], local[k], counts) for k in loaded)
    return loaded == local


def compare(repo_id: str, root: str, configs: list[str]) -> dict:
    report = {}
    for config in configs:
        local = read_table(root, config)
        if IMAGE_KEY in local.columns and "image" not in local.columns:  # mcq_questions: images in mcq_images
            local = embed_images(local, table_path(root, "mcq_images"))
        splits = local["split"].unique().sort().to_list() if "split" in local.columns else ["train"]
        for split in splits:
            expected = local.filter(pl.col("split") == split) if "split" in local.columns else local
            loaded = load_dataset(repo_id, config, split=split)
            counts = {"images_decoded": 0}
            mismatches = []
            for index, (row, want) in enumerate(zip(loaded, expected.to_dicts(), strict=False)):
                for column, value in want.items():
                    if not _same(row.get(column), value, counts):
                        mismatches.append(f"row {index} column {column}")
            report[f"{config}/{split}"] = {
                "rows": len(loaded),
                "local_rows": expected.height,
                "columns_equal": list(loaded.column_names) == list(expected.columns),
                "images_decoded": counts["images_decoded"],
                "mismatches": mismatches[:3],
            }
    return report


if __name__ == "__main__":
    sys.stdout.write(json.dumps(compare(sys.argv[1], sys.argv[2], sys.argv[3].split(","))) + "\n")
