"""Where the Parquet caches live: the storage root, table paths and table files (no Dagster here).

The one place that decides the layout, shared by the asset graph (its IO manager), the trainer, the
evaluator and the LLM response cache, so that what ``spatial-build`` writes is what
``spatial-train`` reads with no path flags.

Layout under the storage root: ``<root>/<table>.parquet`` for an unpartitioned table and
``<root>/<table>/<partition>.parquet`` for a partitioned one. The root is ``$SPATIAL_DATA_ROOT``
when set, else ``$DAGSTER_HOME/spatial_data`` when ``DAGSTER_HOME`` is set, else ``./data``.

Files are written atomically: a uniquely named temporary file beside the target, flushed to disk,
then renamed over it, so a reader (or a second writer of the same file) never sees half a file.
Every file carries ``datasets`` feature metadata, so it also loads with
``datasets.load_dataset("parquet", data_files=...)`` and images decode as images.

>>> table_path("/data", "dge_tasks", "scene0000_00").as_posix()
'/data/dge_tasks/scene0000_00.parquet'
>>> table_path("/data", "stvqa").as_posix()
'/data/stvqa.parquet'
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq

from data_contracts.images import to_huggingface_arrow

STORAGE_ROOT_ENV = "SPATIAL_DATA_ROOT"
LLM_CACHE_RELATIVE_PATH = Path("llm_cache") / "responses.sqlite"


class MissingTableError(FileNotFoundError):
    """A table was asked for that the storage root does not hold."""


def default_storage_root() -> Path:
    """The storage root used when none is configured (see the module docstring)."""
    if os.environ.get(STORAGE_ROOT_ENV):
        return Path(os.environ[STORAGE_ROOT_ENV])
    if os.environ.get("DAGSTER_HOME"):
        return Path(os.environ["DAGSTER_HOME"]) / "spatial_data"
    return Path("data").resolve()


def resolve_storage_root(root: str | Path | None) -> Path:
    """``root`` when given, else :func:`default_storage_root`."""
    return Path(root) if root else default_storage_root()


def llm_cache_path(root: str | Path | None = None) -> Path:
    """The LLM response cache under the storage root."""
    return resolve_storage_root(root) / LLM_CACHE_RELATIVE_PATH


def safe_partition_name(partition: str) -> str:
    """A partition key as a file name (characters other than letters, digits, ``-_.=`` become ``_``)."""
    return "".join(ch if ch.isalnum() or ch in "-_.=" else "_" for ch in partition)


def table_path(root: str | Path, table: str, partition: str | None = None) -> Path:
    """Path of a table's Parquet file (one file per partition for partitioned tables)."""
    base = Path(root)
    if partition is None:
        return base / f"{table}.parquet"
    return base / table / f"{safe_partition_name(partition)}.parquet"


def table_files(root: str | Path, table: str) -> list[Path]:
    """The Parquet files of ``table`` under ``root``: the single file, or every partition file.

    Raises:
        MissingTableError: naming the paths looked for and the tables the root holds.
    """
    base = Path(root)
    single = table_path(base, table)
    if single.is_file():
        return [single]
    folder = base / table
    files = sorted(folder.glob("*.parquet")) if folder.is_dir() else []
    if files:
        return files
    found = (
        sorted(
            {path.stem for path in base.glob("*.parquet")} | {p.name for p in base.iterdir() if p.is_dir()}
        )
        if base.is_dir()
        else []
    )
    raise MissingTableError(
        f"table {table!r} not found: looked for {single} and {folder}/*.parquet; "
        f"tables in {base}: {', '.join(found) if found else '(none)'}. Build it with the pipeline first."
    )


def write_table(frame: pl.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` atomically, with Hugging Face image feature metadata."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            pq.write_table(to_huggingface_arrow(frame), handle, compression="zstd")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)  # only still there when the write failed


def read_table(root: str | Path, table: str, partitions: list[str] | None = None) -> pl.DataFrame:
    """Read a table; for a partitioned table, the given partitions (all when None), concatenated."""
    if partitions is None:
        files = table_files(root, table)
    else:
        files = [table_path(root, table, key) for key in partitions]
        missing = [str(path) for path in files if not path.exists()]
        if missing:
            raise MissingTableError(
                f"no Parquet cache for table {table!r} under {root} (missing: {missing}); "
                "materialise the asset first"
            )
    return pl.concat([pl.read_parquet(path) for path in files], how="diagonal_relaxed")
