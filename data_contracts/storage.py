"""Where the Parquet caches live, and how files get there whole (no Dagster here).

The one place that decides the layout, shared by the asset graph (its IO manager), the trainer, the
evaluator and the LLM response cache, so that what ``spatial-build`` writes is what
``spatial-train`` reads with no path flags.

Layout under the storage root: ``<root>/<table>.parquet`` for an unpartitioned table and
``<root>/<table>/<partition>.parquet`` for a partitioned one. The root is ``$SPATIAL_DATA_ROOT``
when set, else ``$DAGSTER_HOME/spatial_data`` when ``DAGSTER_HOME`` is set, else ``./data``.

What a reader can rely on, even with concurrent writers and writers killed at any instant:

- **Whole files.** :func:`atomic_write` (and :func:`write_table` on top of it) writes a uniquely
  named hidden temporary file beside the target (``.<name>.<random>.tmp``), flushes and fsyncs it,
  renames it over the target and fsyncs the folder, so a reader (or a second writer of the same
  file) sees the old file or the new one, never half of one; the last rename wins. A writer holds
  an advisory lock (``fcntl.flock``) on its temporary file while it writes; temporaries nobody holds
  are leftovers of killed writers and the next write into that folder deletes them.
- **Readers.** :func:`read_table` opens each file once (:func:`~data_contracts.parquet_files.read_parquet_file`).
  Polars and pyarrow given a *path* open it twice (footer, then data), so while a writer replaces the file
  they may fail ("Invalid thrift", "page header reported the wrong page size").

What a file holds (``datasets`` features, provenance in its key-value metadata, empty tables that load):
:mod:`data_contracts.parquet_files`.

>>> table_path("/data", "dge_tasks", "scene0000_00").as_posix()
'/data/dge_tasks/scene0000_00.parquet'
>>> table_path("/data", "stvqa").as_posix()
'/data/stvqa.parquet'
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl

from data_contracts.parquet_files import (
    DATA_VERSION_KEY,
    ParquetTableWriter,
    read_file_metadata,
    read_parquet_file,
)

logger = logging.getLogger(__name__)

STORAGE_ROOT_ENV = "SPATIAL_DATA_ROOT"
LLM_CACHE_RELATIVE_PATH = Path("llm_cache") / "responses.sqlite"
TEMPORARY_SUFFIX = ".tmp"


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
            {path.stem for path in base.glob("*.parquet")}
            | {p.name for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")}
        )
        if base.is_dir()
        else []
    )
    raise MissingTableError(
        f"table {table!r} not found: looked for {single} and {folder}/*.parquet; "
        f"tables in {base}: {', '.join(found) if found else '(none)'}. Build it with the pipeline first."
    )


# --- locks and durable renames ---------------------------------------------------------------


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[bool]:
    """Hold an exclusive ``fcntl.flock`` on ``path`` (created when missing) for the ``with`` block.

    Yields whether the lock was busy (another process held it and this one waited). The lock goes
    with the process: a holder that is killed releases it. The lock file itself stays.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     with file_lock(Path(folder) / "a.lock") as waited:
    ...         waited
    False
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            waited = True
        yield waited
    finally:
        os.close(descriptor)  # releases the lock


def fsync_directory(folder: str | Path) -> None:
    """Make the entries of ``folder`` (new, renamed or removed files) durable.

    A no-op where the platform cannot sync a folder.
    """
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    except OSError as error:  # some file systems cannot fsync a directory
        if error.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(descriptor)


def _locked_unique_file(folder: Path, prefix: str, suffix: str) -> tuple[int, Path]:
    """A new uniquely named file in ``folder``, opened and exclusively flocked by this process.

    The lock tells :func:`remove_abandoned_temporaries` that the file is in use. A sweeper may delete the file
    between its creation and the lock; then the name no longer refers to our file and we try again.
    """
    while True:
        descriptor, name = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=folder)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        try:
            still_ours = os.stat(name).st_ino == os.fstat(descriptor).st_ino
        except FileNotFoundError:
            still_ours = False
        if still_ours:
            return descriptor, Path(name)
        os.close(descriptor)


def remove_abandoned_temporaries(folder: str | Path) -> list[Path]:
    """Delete the temporary files in ``folder`` that killed writers left (nobody holds their lock); returns them."""
    removed = []
    for path in Path(folder).glob(f".*{TEMPORARY_SUFFIX}"):
        try:
            descriptor = os.open(path, os.O_RDWR)
        except FileNotFoundError:  # its writer renamed it meanwhile
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # fails while its writer is alive
            path.unlink(missing_ok=True)
            removed.append(path)
        except BlockingIOError:
            continue
        finally:
            os.close(descriptor)
    if removed:
        logger.info("removed %d temporary files of interrupted writes in %s", len(removed), folder)
    return removed


@contextlib.contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Open a binary handle whose content replaces ``path`` atomically when the block ends.

    The data goes to a uniquely named temporary file beside ``path`` (locked while written), is
    fsynced, renamed over ``path``, and the folder is fsynced. If the block raises, ``path`` is left
    as it was and the temporary file is removed; if the process is killed, the temporary file is
    removed by the next write into the same folder.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     target = Path(folder) / "a.txt"
    ...     with atomic_write(target) as handle:
    ...         _ = handle.write(b"whole")
    ...     target.read_bytes(), sorted(p.name for p in Path(folder).iterdir())
    (b'whole', ['a.txt'])
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_temporaries(path.parent)
    descriptor, temporary = _locked_unique_file(path.parent, f".{path.name}.", TEMPORARY_SUFFIX)
    renamed = False
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
            os.replace(temporary, path)
            renamed = True
        fsync_directory(path.parent)
    finally:
        if not renamed:
            temporary.unlink(missing_ok=True)


def write_json_atomic(path: str | Path, data: object, indent: int | None = 2) -> None:
    """Write JSON (UTF-8, sorted keys, newline at the end) to ``path`` with :func:`atomic_write`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_json_atomic(Path(folder) / "a.json", {"b": 1, "a": [2]}, indent=None)
    ...     (Path(folder) / "a.json").read_text()
    '{"a": [2], "b": 1}\\n'
    """
    with atomic_write(path) as handle:
        handle.write((json.dumps(data, indent=indent, sort_keys=True) + "\n").encode("utf-8"))


@dataclass(frozen=True)
class WrittenTable:
    """A table file already written whole under the storage root: what a step hands on instead of the rows
    when it wrote the file itself (a worker writing its partition, an asset streaming a large table), so the
    rows never pass through the run's process. ``data_version`` is the file's own (its key-value metadata)."""

    path: str
    rows: int
    data_version: str | None = None


@contextlib.contextmanager
def table_writer(
    path: str | Path, schema: pl.Schema, key_value_metadata: Mapping[str, str] | None = None
) -> Iterator[ParquetTableWriter]:
    """A :class:`~data_contracts.parquet_files.ParquetTableWriter` whose file replaces ``path`` atomically when
    the block ends (see :func:`atomic_write`); if the block raises, ``path`` is left as it was."""
    with atomic_write(path) as handle:
        writer = ParquetTableWriter(handle, schema, key_value_metadata)
        yield writer
        writer.close()


def write_table(
    frame: pl.DataFrame, path: str | Path, key_value_metadata: Mapping[str, str] | None = None
) -> WrittenTable:
    """Write ``frame`` to ``path`` atomically (see :func:`atomic_write` and :func:`table_writer`).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "t.parquet"
    ...     written = write_table(pl.DataFrame({"a": [1]}).head(0), path, {"contract_version": "1.0.0"})
    ...     pl.read_parquet(path).columns, read_file_metadata(path), written.rows
    (['a'], {'contract_version': '1.0.0'}, 0)
    """
    with table_writer(path, frame.schema, key_value_metadata) as writer:
        writer.write(frame)
    return WrittenTable(str(path), frame.height, (key_value_metadata or {}).get(DATA_VERSION_KEY))


def read_table_metadata(root: str | Path, table: str, partition: str | None = None) -> dict[str, str]:
    """The key-value metadata (:data:`~data_contracts.parquet_files.FILE_METADATA_KEYS` for files the asset graph wrote) of a table's file.

    ``partition`` names the file of a partitioned table.

    Raises:
        MissingTableError: when the file does not exist.
    """
    path = table_path(root, table, partition)
    if not path.is_file():
        raise MissingTableError(f"no Parquet file for table {table!r} (partition {partition!r}) at {path}")
    return read_file_metadata(path)


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
    return pl.concat([read_parquet_file(path) for path in files], how="diagonal_relaxed")
