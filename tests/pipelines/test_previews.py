"""Previews of a dev.sh-style build: one preview file per pseudo-GT shard; DGE task tiles that differ and
show the objects asked about in boxes."""

from __future__ import annotations

import hashlib

import dagster as dg
import numpy as np
import polars as pl
from PIL import Image

from assets.dge.assets import _preview_tasks, _tasks_preview, asked_object_ids
from assets.grounding.shards import SHARD_KEYS
from data_contracts.images import decode_image
from data_contracts.storage import read_table

BOX_COLOUR = (0xE6, 0x19, 0x4B)  # the first colour of the preview palette: the first box of each tile


def test_every_pseudo_gt_shard_writes_its_own_preview(dev_build):
    folder = dev_build.storage / "previews"
    files = sorted(folder.glob("pseudo_gt_boxes*.png"))
    assert not (folder / "pseudo_gt_boxes.png").exists()
    assert {path.name for path in files} <= {f"pseudo_gt_boxes__{key}.png" for key in SHARD_KEYS}
    shards_with_rows = [
        key for key in SHARD_KEYS if read_table(dev_build.storage, "pseudo_gt_boxes", [key]).height > 0
    ]
    assert len(shards_with_rows) >= 2
    assert [path.name for path in files] == [f"pseudo_gt_boxes__{key}.png" for key in shards_with_rows]
    assert len({hashlib.sha256(path.read_bytes()).hexdigest() for path in files}) == len(files)
    for key in shards_with_rows:  # each partition's materialization points at its own file
        (record,) = dev_build.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("pseudo_gt_boxes"), asset_partitions=[key]), limit=1
        ).records
        path = record.asset_materialization.metadata["preview_image_path"].value
        assert path.endswith(f"pseudo_gt_boxes__{key}.png")


def _tiles(image: Image.Image, count: int) -> list[np.ndarray]:
    pixels = np.asarray(image.convert("RGB"))
    width = pixels.shape[1] // count
    return [pixels[:, index * width : (index + 1) * width] for index in range(count)]


def test_dge_tasks_preview_shows_distinct_tasks_with_boxes(dev_build):
    scene = sorted(path.stem for path in (dev_build.storage / "dge_tasks").glob("*.parquet"))[0]
    tasks = read_table(dev_build.storage, "dge_tasks", [scene])
    visibility = read_table(dev_build.storage, "frame_visibility", [scene])
    assert tasks["frame_indices"].list.first().n_unique() >= 3  # the scan has three frames to show

    boxed = {
        (row["frame_index"], row["object_id"])
        for row in visibility.filter(pl.col("bbox").is_not_null()).iter_rows(named=True)
    }
    chosen = _preview_tasks(tasks, boxed, 3)
    assert len({row["frame_indices"][0] for row in chosen}) == 3  # three different frames
    assert len({row["task_id"] for row in chosen}) == 3
    for row in chosen:  # each shows at least one object it asks about
        assert any(
            (row["frame_indices"][0], object_id) in boxed for object_id in asked_object_ids(row["facts"])
        )

    image = _tasks_preview(visibility)(tasks)
    tiles = _tiles(image, 3)
    for first in range(3):
        for second in range(first + 1, 3):
            assert not np.array_equal(tiles[first], tiles[second])
    for row, tile in zip(chosen, tiles, strict=True):
        original = np.asarray(decode_image(row["images"][0]).convert("RGB"))
        assert not np.all(original == BOX_COLOUR, axis=-1).any()  # the colour is not in the photo itself
        assert np.all(tile == BOX_COLOUR, axis=-1).sum() >= 20, row["task_type"]  # a box was drawn
