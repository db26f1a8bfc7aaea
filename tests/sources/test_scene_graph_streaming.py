"""``scene_graphs`` read and written a batch at a time: the same rows as a whole read, rows grouped by STVQA
shard, a shard step reading only its own row groups, and a broken annotation file failing the source.

The shard of an image is recomputed here from its definition (the first 15 hex digits of ``sha256(image_id)``
as an integer, mod 32).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from PIL import Image

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import scene_graphs_asset
from assets.stvqa.shards import read_image_rows, read_shard_rows
from data_contracts.storage import table_path
from pipelines.io_manager import ParquetIOManager
from readers.scene_graphs import read_visual_genome

IMAGES = 300


def shard_by_definition(image_id: str) -> str:
    return f"{int(hashlib.sha256(image_id.encode()).hexdigest()[:15], 16) % 32:02d}"


def write_raw_visual_genome(folder: Path, shuffle_objects: bool = False) -> None:
    """A raw VG v1.4 folder of ``IMAGES`` small images, two objects and one relation each."""
    (folder / "VG_100K").mkdir(parents=True)
    image_data, objects, relationships = [], [], []
    for index in range(IMAGES):
        image_id = 1000 + index
        buffer = io.BytesIO()
        Image.new("RGB", (16, 12), (index % 255, 0, 0)).save(buffer, format="JPEG")
        (folder / "VG_100K" / f"{image_id}.jpg").write_bytes(buffer.getvalue())
        image_data.append({"image_id": image_id, "width": 16, "height": 12, "url": f"x/{image_id}.jpg"})
        cup = {"object_id": 2 * image_id, "x": 1, "y": 1, "w": 4, "h": 4, "names": ["cup"]}
        table = {"object_id": 2 * image_id + 1, "x": 0, "y": 6, "w": 15, "h": 5, "names": ["table"]}
        objects.append({"image_id": image_id, "objects": [cup, table]})
        relationships.append(
            {
                "image_id": image_id,
                "relationships": [
                    {
                        "relationship_id": image_id,
                        "predicate": "ON",
                        "subject": cup,
                        "object": {**table, "name": "table"},
                    }
                ],
            }
        )
    if shuffle_objects:
        random.Random(0).shuffle(objects)
    for name, items in (("image_data", image_data), ("objects", objects), ("relationships", relationships)):
        (folder / f"{name}.json").write_text(json.dumps(items))


def _build(root: Path, vg: Path) -> dg.ExecuteInProcessResult:
    resources = {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "sources": SourcesResource(visual_genome_root=str(vg), visual_genome_layout="raw"),
    }
    selection = [scene_graphs_asset, dg.AssetSpec("sample_world"), dg.AssetSpec("raw_scene_graph_files")]
    return dg.materialize(selection, resources=resources, raise_on_error=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("vg_stream")
    write_raw_visual_genome(work / "vg")
    assert _build(work / "data", work / "vg").success
    return work, table_path(work / "data", "scene_graphs")


def test_the_streamed_table_holds_the_rows_of_a_whole_read(built):
    work, path = built
    whole, _ = read_visual_genome(work / "vg")
    table = pl.read_parquet(path)
    assert table.height == whole.height == IMAGES
    key = ["image_id", "image_width", "image_height", "objects", "relationships", "split"]
    assert table.select(key).sort("image_id").equals(whole.select(key).sort("image_id"))
    assert set(table["origin"]) == {"real"}


def test_every_row_group_holds_one_shard_and_a_shard_reads_only_its_own(built):
    _, path = built
    parquet = pq.ParquetFile(path)
    shards_by_group = [
        {
            shard_by_definition(i)
            for i in parquet.read_row_group(g, columns=["image_id"]).column(0).to_pylist()
        }
        for g in range(parquet.num_row_groups)
    ]
    assert all(len(shards) == 1 for shards in shards_by_group)
    table = pl.read_parquet(path)
    for shard in ("00", "07", "31"):
        expected = table.filter(
            pl.col("image_id").map_elements(shard_by_definition, return_dtype=pl.String) == shard
        ).sort("image_id")
        assert read_shard_rows(path, shard).equals(expected)
    some = table["image_id"].to_list()[::50]
    assert sorted(read_image_rows(path, some)["image_id"].to_list()) == sorted(some)


def test_files_in_different_orders_give_the_same_table(built, tmp_path):
    _, path = built
    write_raw_visual_genome(tmp_path / "vg", shuffle_objects=True)
    assert _build(tmp_path / "data", tmp_path / "vg").success
    shuffled = pl.read_parquet(table_path(tmp_path / "data", "scene_graphs")).sort("image_id")
    assert shuffled.drop("image").equals(pl.read_parquet(path).sort("image_id").drop("image"))


def test_a_truncated_annotation_file_fails_the_source_and_keeps_the_table(built, tmp_path):
    work, path = built
    before = path.read_bytes()
    broken = tmp_path / "vg"
    write_raw_visual_genome(broken)
    text = (broken / "relationships.json").read_text()
    (broken / "relationships.json").write_text(text[: len(text) // 2])
    result = _build(work / "data", broken)
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    message = failure.step_failure_data.user_failure_data.description
    assert message.startswith(f"{broken / 'relationships.json'} is not a readable JSON array")
    assert path.read_bytes() == before
    assert not list((work / "data").glob(".scene_graphs.*"))  # no staging left behind
