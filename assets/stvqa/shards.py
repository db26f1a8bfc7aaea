"""Static shard partitions for STVQA, and picking one shard's rows out of the ``scene_graphs`` table.

Why static hash shards: the full Visual Genome has about 108K images, and generation plus pass@2
answering costs model calls per image. The work is split into :data:`STVQA_SHARD_COUNT` fixed
partitions, an image belonging to shard ``stable_bucket(image_id, 32)`` (a SHA-256 of the id, identical in
every process and Python version, unlike the salted built-in `hash()`). So:

- shards run in parallel (one Dagster run per shard, on as many workers as there are);
- an image always lands in the same shard, so adding scene graphs only changes the shards that
  receive new images; a rebuilt shard whose input rows did not change reports the same data version,
  and everything it answered before is served from the response cache at no cost;
- the partition set never changes, unlike one dynamic partition per image (108K partitions would
  swamp the UI and the run queue) or per upload batch (an image's partition would depend on when it
  arrived).

>>> shard_of("2417711")
'19'
>>> len(STVQA_SHARD_KEYS)
32

The ``scene_graphs`` table's rows are grouped by shard (each row group holds one shard's images), so a shard
step reads its rows from the file with :func:`read_shard_rows`: the ``image_id`` column of every row group,
then only the row groups that hold its images (about 1/32 of the file). :func:`read_image_rows` reads given
images the same way; :func:`shard_rows` and :func:`image_rows` select from a frame already in memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from data_contracts.images import image_sha256
from data_contracts.parquet_files import arrow_frame
from data_contracts.stable_hash import stable_bucket

STVQA_SHARD_COUNT = 32
STVQA_SHARD_KEYS = [f"{index:02d}" for index in range(STVQA_SHARD_COUNT)]


def shard_of(image_id: str, shard_count: int = STVQA_SHARD_COUNT) -> str:
    """The shard key of an image id (two digits)."""
    return f"{stable_bucket(str(image_id), shard_count):02d}"


def shard_rows(scene_graphs: pl.DataFrame | pl.LazyFrame, shard: str) -> pl.DataFrame:
    """The ``scene_graphs`` rows of one shard, sorted by image id.

    >>> graphs = pl.DataFrame({"image_id": ["2417711", "1", "2"], "objects": [[], [], []]})
    >>> shard_rows(graphs, "19")["image_id"].to_list()
    ['2417711']
    """
    table = scene_graphs.lazy()
    ids = table.select("image_id").collect()["image_id"].to_list()
    wanted = sorted(image_id for image_id in ids if shard_of(image_id) == shard)
    if not wanted:
        return table.head(0).collect()
    return table.filter(pl.col("image_id").is_in(wanted)).collect().sort("image_id")


def image_rows(scene_graphs: pl.DataFrame | pl.LazyFrame, image_ids: Iterable[str]) -> pl.DataFrame:
    """The ``scene_graphs`` rows of the given images (any shards), in table order.

    >>> graphs = pl.DataFrame({"image_id": ["b", "a", "c"]})
    >>> image_rows(graphs, ["a", "b"])["image_id"].to_list(), image_rows(graphs, []).height
    (['b', 'a'], 0)
    """
    table = scene_graphs.lazy()
    wanted = sorted(set(image_ids))
    if not wanted:
        return table.head(0).collect()
    return table.filter(pl.col("image_id").is_in(wanted)).collect()


def _read_matching(path: str | Path, wanted: Callable[[str], bool]) -> pl.DataFrame:
    """The rows of a ``scene_graphs`` file whose ``image_id`` is ``wanted``, reading only the row groups that
    hold one (through one handle, see :func:`data_contracts.parquet_files.read_parquet_file`)."""
    with open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        groups: list[int] = []
        ids: list[str] = []
        for index in range(parquet.num_row_groups):
            group_ids = parquet.read_row_group(index, columns=["image_id"]).column(0).to_pylist()
            matching = {image_id for image_id in group_ids if wanted(image_id)}
            if matching:
                groups.append(index)
                ids.extend(matching)
        # pl.from_arrow of a table is a frame (its annotation, pyarrow being untyped, also allows a series)
        if not groups:
            return arrow_frame(parquet.schema_arrow.empty_table())
        table = arrow_frame(parquet.read_row_groups(groups))
    return table.filter(pl.col("image_id").is_in(ids))


def read_shard_rows(path: str | Path, shard: str) -> pl.DataFrame:
    """The ``scene_graphs`` rows of one shard, read from the table's file, sorted by image id."""
    return _read_matching(path, lambda image_id: shard_of(image_id) == shard).sort("image_id")


def read_image_rows(path: str | Path, image_ids: Iterable[str]) -> pl.DataFrame:
    """The ``scene_graphs`` rows of the given images, read from the table's file, in file order."""
    wanted = set(image_ids)
    return _read_matching(path, wanted.__contains__)


def shard_fingerprint(rows: pl.DataFrame, *extra: object) -> str:
    """A content hash of a shard's input rows (graphs and image bytes) plus settings, for its data version.

    Example:
        >>> shard_fingerprint(pl.DataFrame({"image_id": []}, schema={"image_id": pl.String}), "template")[:8]
        'dae1a374'
    """
    digest = hashlib.sha256()
    for part in extra:
        digest.update(json.dumps(part, sort_keys=True, default=str).encode("utf-8"))
    for row in rows.iter_rows(named=True):
        image = row.get("image")
        summary = {
            "image_id": row["image_id"],
            "objects": row.get("objects"),
            "relationships": row.get("relationships"),
            "image": image_sha256(image) if isinstance(image, dict) else None,
        }
        digest.update(json.dumps(summary, sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()[:20]
