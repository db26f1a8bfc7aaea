"""Images stored once per distinct image, and embedding them back where a table is loaded alone (no Dagster here).

An intermediate table whose rows share images (``mcq_questions``: several questions about one image) names each
row's image by ``image_sha256``, the SHA-256 of the file's bytes; its companion table (``mcq_images``) holds one
row per image: ``image_sha256``, the ``image`` cell and the size. :func:`read_image_cells` reads the cells of
given images from that table a row group at a time (memory holds one row group and the images asked for), and
:func:`embed_images` puts them back into rows as their ``image`` column, for a table meant to be loaded alone
(``spatialcore_train``, ``eval_items``) or a step that needs the pixels (a detector, a model shown the image).

>>> import tempfile
>>> from data_contracts.images import encode_image, image_sha256
>>> from data_contracts.storage import write_table
>>> cell = {"bytes": b"\\x89PNG fake", "path": "1.png"}
>>> with tempfile.TemporaryDirectory() as folder:
...     store = Path(folder) / "mcq_images.parquet"
...     _ = write_table(pl.DataFrame({"image_sha256": [image_sha256(cell)], "image": [cell]}), store)
...     rows = pl.DataFrame({"question_id": ["q1", "q2"], "image_sha256": [image_sha256(cell)] * 2})
...     embed_images(rows, store)["image"].struct.field("path").to_list()
['1.png', '1.png']
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from data_contracts.images import IMAGE_DTYPE

IMAGE_KEY = "image_sha256"


class MissingImageError(KeyError):
    """Rows name an image that the image table does not hold."""


def read_image_cells(path: str | Path, shas: Iterable[str]) -> dict[str, dict]:
    """``{image_sha256: image cell}`` of the given images, read from the image table at ``path`` through one
    handle, only the row groups that hold one of them being decoded."""
    wanted = set(shas)
    cells: dict[str, dict] = {}
    if not wanted:
        return cells
    with open(path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        for index in range(parquet.num_row_groups):
            keys = parquet.read_row_group(index, columns=[IMAGE_KEY]).column(0).to_pylist()
            if wanted.isdisjoint(keys):
                continue
            group = parquet.read_row_group(index, columns=[IMAGE_KEY, "image"])
            for key, cell in zip(keys, group.column("image").to_pylist(), strict=True):
                if key in wanted:
                    cells[key] = cell
            if len(cells) == len(wanted):
                break
    return cells


def embed_images(rows: pl.DataFrame, path: str | Path, column: str = "image") -> pl.DataFrame:
    """``rows`` with each row's image (named by its ``image_sha256``) as the ``column`` cell.

    Raises:
        MissingImageError: naming an image the table at ``path`` does not hold.
    """
    cells = read_image_cells(path, rows[IMAGE_KEY].unique().to_list()) if rows.height else {}
    missing = sorted(set(rows[IMAGE_KEY].to_list()) - set(cells))
    if missing:
        raise MissingImageError(f"{len(missing)} images are not in {path} (first: {missing[0]}); rebuild it")
    return rows.with_columns(pl.Series(column, [cells[key] for key in rows[IMAGE_KEY]], dtype=IMAGE_DTYPE))
