"""What a table file holds: Parquet with ``datasets`` features, provenance in its key-value metadata (no Dagster here).

Every file carries ``datasets`` feature metadata, so it also loads with
``datasets.load_dataset("parquet", data_files=...)`` and images decode as images. Beside it, in the
Parquet file's key-value metadata, a file written by the asset graph says where it comes from
(:data:`FILE_METADATA_KEYS`). A table with no rows is written without row groups (Arrow and ``datasets``
reject a 0-row row group, "BatchSize must be greater than 0"), so a folder of partition files where some
are empty loads with ``datasets`` and with polars. (``datasets`` refuses any split with no rows at all,
whatever the format: a table that is empty as a whole loads with ``streaming=True``, polars or pyarrow.)
Where the files live and how they are written whole: :mod:`data_contracts.storage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, cast

import polars as pl
import pyarrow.parquet as pq

from data_contracts.images import to_huggingface_arrow

HUGGINGFACE_METADATA_KEY = "huggingface"
"""The key-value metadata entry holding the ``datasets`` features (written by every table file)."""
FILE_METADATA_KEYS = (
    "contract_version",
    "code_version",
    "source_fingerprint",
    "input_data_versions",
    "data_version",
)
"""Key-value metadata the asset graph writes into every table file (see :mod:`assets.provenance`):
the table's contract version, the code version of the asset that wrote it, its inputs' content
versions (JSON) and a fingerprint of them, and the file's own content version."""
DATA_VERSION_KEY = "data_version"
"""The key of a file's own content version, which the files built from it record as their input version."""


ROW_GROUP_ROWS = 2048
ROW_GROUP_BYTES = 32 << 20
"""A row group holds at most :data:`ROW_GROUP_ROWS` rows and about :data:`ROW_GROUP_BYTES` bytes in memory: a
reader holds one row group of a table (images included) at a time."""


class ParquetTableWriter:
    """Writes a table to an open binary handle batch by batch, as Parquet with ``datasets`` feature metadata.

    Every :meth:`write` appends its frame as row groups of at most :data:`ROW_GROUP_ROWS` rows and about
    :data:`ROW_GROUP_BYTES` bytes, cast to ``schema``, so a table of any size is written holding one batch at a time. ``key_value_metadata`` entries
    go into the file's key-value metadata beside the ``datasets`` features (which they may not replace). A
    table with no rows is written with no row group at all (a 0-row row group makes Arrow's batch reader,
    and so ``datasets``, fail with "BatchSize must be greater than 0"); its metadata is written all the same.

    >>> import io
    >>> buffer = io.BytesIO()
    >>> writer = ParquetTableWriter(buffer, pl.Schema({"a": pl.Int64}), {"contract_version": "1.0.0"})
    >>> writer.write(pl.DataFrame({"a": [1, 2]})); writer.write(pl.DataFrame({"a": [3]})); writer.close()
    3
    >>> pq.ParquetFile(io.BytesIO(buffer.getvalue())).metadata.num_row_groups
    2
    """

    def __init__(
        self, handle: BinaryIO, schema: pl.Schema, key_value_metadata: Mapping[str, str] | None = None
    ) -> None:
        arrow_schema = to_huggingface_arrow(pl.DataFrame(schema=schema)).schema
        if key_value_metadata:
            reserved = {HUGGINGFACE_METADATA_KEY, "ARROW:schema"} & set(key_value_metadata)
            if reserved:
                raise ValueError(f"key-value metadata may not replace {sorted(reserved)}")
            metadata = dict(arrow_schema.metadata or {})
            metadata.update({str(k).encode(): str(v).encode() for k, v in key_value_metadata.items()})
            arrow_schema = arrow_schema.with_metadata(metadata)
        self.schema = schema
        self.rows = 0
        self._writer = pq.ParquetWriter(handle, arrow_schema, compression="zstd")

    def write(self, frame: pl.DataFrame) -> None:
        """Append ``frame``'s rows (its columns are selected and cast to the schema)."""
        if frame.height == 0:
            return
        batch = frame.select([pl.col(name).cast(dtype) for name, dtype in self.schema.items()])
        table = to_huggingface_arrow(batch).cast(self._writer.schema)
        row_bytes = max(1, table.nbytes // table.num_rows)
        self._writer.write_table(
            table, row_group_size=max(1, min(ROW_GROUP_ROWS, ROW_GROUP_BYTES // row_bytes))
        )
        self.rows += frame.height

    def close(self) -> int:
        """Write the footer; the number of rows written."""
        self._writer.close()
        return self.rows


def write_parquet(
    frame: pl.DataFrame, handle: BinaryIO, key_value_metadata: Mapping[str, str] | None = None
) -> None:
    """Write ``frame`` as Parquet with Hugging Face feature metadata to an open binary handle (see
    :class:`ParquetTableWriter`)."""
    writer = ParquetTableWriter(handle, frame.schema, key_value_metadata)
    writer.write(frame)
    writer.close()


def read_file_metadata(path: str | Path) -> dict[str, str]:
    """The key-value metadata of one Parquet file, without Arrow's schema and the ``datasets`` features.

    Reads the footer only (through one handle, like :func:`read_parquet_file`).

    >>> import io, tempfile
    >>> buffer = io.BytesIO()
    >>> write_parquet(pl.DataFrame({"a": [1]}).head(0), buffer, {"contract_version": "1.0.0"})
    >>> with tempfile.NamedTemporaryFile(suffix=".parquet") as file:
    ...     _ = file.write(buffer.getvalue()); file.flush()
    ...     pq.ParquetFile(file.name).metadata.num_row_groups, read_file_metadata(file.name)
    (0, {'contract_version': '1.0.0'})
    """
    with open(path, "rb") as handle:
        metadata = pq.ParquetFile(handle).schema_arrow.metadata or {}
    skipped = {b"ARROW:schema", HUGGINGFACE_METADATA_KEY.encode()}
    return {key.decode(): value.decode() for key, value in metadata.items() if key not in skipped}


def arrow_frame(table: Any) -> pl.DataFrame:
    """A pyarrow table (or record batch) as a polars frame: ``pl.from_arrow`` of a table is always a frame, which
    its annotation (frame or series, pyarrow being untyped) does not say."""
    return cast(pl.DataFrame, pl.from_arrow(table))


def read_parquet_file(path: str | Path) -> pl.DataFrame:
    """Read one Parquet file through a single open handle.

    Polars and pyarrow, given a path, open it twice (footer, then data); a writer renaming a new
    version in between makes them read one file's footer with the other's pages. One handle always
    reads one whole version.
    """
    with open(path, "rb") as handle:
        return pl.read_parquet(handle)
