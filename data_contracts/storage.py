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
- **Sets of tables.** :class:`StagedTables` publishes several tables together (an asset's table and
  its quarantine): each is written and fsynced in a private staging folder under
  ``<root>/.staging/``, then, under the root's commit lock, a journal naming every move is written
  and the files are renamed into place. A commit killed half way is rolled forward (journal
  replayed) by the next :func:`recover_storage` on that root, which every writer through
  :class:`StagedTables` runs first; a reader racing with the renames (microseconds) or reading
  after such a kill and before any recovery may see part of a set. Staged files of a writer that
  died before committing are deleted by that same recovery: a set is visible entirely or not at all.
- **Empty tables load.** A table with no rows is written without row groups (Arrow and
  ``datasets`` reject a 0-row row group, "BatchSize must be greater than 0"), so a folder of
  partition files where some are empty loads with ``datasets.load_dataset("parquet",
  data_files=...)`` and with polars. (``datasets`` refuses any split with no rows at all, whatever
  the format: a table that is empty as a whole loads with ``streaming=True``, polars or pyarrow.)
- **Readers.** :func:`read_table` opens each file once. Polars and pyarrow given a *path* open it
  twice (footer, then data), so while a writer replaces the file they may fail ("Invalid thrift",
  "page header reported the wrong page size"); read through one handle, or read when no build runs.

Every file carries ``datasets`` feature metadata, so it also loads with
``datasets.load_dataset("parquet", data_files=...)`` and images decode as images. Beside it, in the
Parquet file's key-value metadata, a file written by the asset graph says where it comes from
(:data:`FILE_METADATA_KEYS`: its contract version, the asset's code version and a fingerprint of
its inputs); :func:`read_table_metadata` reads them back without reading the rows.

>>> table_path("/data", "dge_tasks", "scene0000_00").as_posix()
'/data/dge_tasks/scene0000_00.parquet'
>>> table_path("/data", "stvqa").as_posix()
'/data/stvqa.parquet'
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import socket
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import polars as pl
import pyarrow.parquet as pq

from data_contracts.images import to_huggingface_arrow

logger = logging.getLogger(__name__)

STORAGE_ROOT_ENV = "SPATIAL_DATA_ROOT"
LLM_CACHE_RELATIVE_PATH = Path("llm_cache") / "responses.sqlite"
STAGING_FOLDER = ".staging"
"""Under the storage root: one folder per writing process (``<host>-<pid>-<random>``, beside its
``.lock`` file), the commit lock ``commit.lock``."""
TEMPORARY_SUFFIX = ".tmp"
_STAGED_SUFFIX = ".staged"
_ENTRY_SUFFIX = ".entry.json"
_JOURNAL = "journal.json"
HUGGINGFACE_METADATA_KEY = "huggingface"
"""The key-value metadata entry holding the ``datasets`` features (written by every table file)."""
FILE_METADATA_KEYS = ("contract_version", "code_version", "source_fingerprint", "input_data_versions")
"""Key-value metadata the asset graph writes into every table file (see ``pipelines.io_manager``):
the table's contract version, the code version of the asset that wrote it, a fingerprint of the
data versions of its inputs as Dagster recorded them, and those data versions (JSON)."""


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

    The lock tells :func:`_claim_abandoned` that the file is in use. A sweeper may delete the file
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


def _claim_abandoned(path: Path) -> int | None:
    """Lock ``path`` if no live process holds it (its owner died); the descriptor, or None.

    The caller deletes what the file stands for, then closes the descriptor.
    """
    try:
        descriptor = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def remove_abandoned_temporaries(folder: str | Path) -> list[Path]:
    """Delete the temporary files in ``folder`` that killed writers left (nobody holds their lock).

    Returns the paths removed.
    """
    removed = []
    folder = Path(folder)
    if not folder.is_dir():
        return removed
    for path in folder.glob(f".*{TEMPORARY_SUFFIX}"):
        descriptor = _claim_abandoned(path)
        if descriptor is None:
            continue
        try:
            path.unlink(missing_ok=True)
            removed.append(path)
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


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` with :func:`atomic_write`."""
    with atomic_write(path) as handle:
        handle.write(data)


def write_json_atomic(path: str | Path, data: object, indent: int | None = 2) -> None:
    """Write JSON (UTF-8, sorted keys, newline at the end) to ``path`` with :func:`atomic_write`.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     write_json_atomic(Path(folder) / "a.json", {"b": 1, "a": [2]}, indent=None)
    ...     (Path(folder) / "a.json").read_text()
    '{"a": [2], "b": 1}\\n'
    """
    write_bytes_atomic(path, (json.dumps(data, indent=indent, sort_keys=True) + "\n").encode("utf-8"))


# --- Parquet files -----------------------------------------------------------------------------


def write_parquet(
    frame: pl.DataFrame, handle: BinaryIO, key_value_metadata: Mapping[str, str] | None = None
) -> None:
    """Write ``frame`` as Parquet with Hugging Face feature metadata to an open binary handle.

    ``key_value_metadata`` entries are added to the file's key-value metadata beside the
    ``datasets`` features (which they may not replace). A frame with no rows is written with no row
    group at all (a 0-row row group makes Arrow's batch reader, and so ``datasets``, fail with
    "BatchSize must be greater than 0"); its metadata is written all the same.
    """
    table = to_huggingface_arrow(frame)
    if key_value_metadata:
        reserved = {HUGGINGFACE_METADATA_KEY, "ARROW:schema"} & set(key_value_metadata)
        if reserved:
            raise ValueError(f"key-value metadata may not replace {sorted(reserved)}")
        metadata = dict(table.schema.metadata or {})
        metadata.update({str(k).encode(): str(v).encode() for k, v in key_value_metadata.items()})
        table = table.replace_schema_metadata(metadata)
    if table.num_rows == 0:
        pq.ParquetWriter(handle, table.schema, compression="zstd").close()
    else:
        pq.write_table(table, handle, compression="zstd")


def write_table(frame: pl.DataFrame, path: Path, key_value_metadata: Mapping[str, str] | None = None) -> None:
    """Write ``frame`` to ``path`` atomically (see :func:`atomic_write` and :func:`write_parquet`).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "t.parquet"
    ...     write_table(pl.DataFrame({"a": [1]}).head(0), path, {"contract_version": "1.0.0"})
    ...     pq.ParquetFile(path).metadata.num_row_groups, pl.read_parquet(path).columns, read_file_metadata(path)
    (0, ['a'], {'contract_version': '1.0.0'})
    """
    with atomic_write(path) as handle:
        write_parquet(frame, handle, key_value_metadata)


def read_file_metadata(path: str | Path) -> dict[str, str]:
    """The key-value metadata of one Parquet file, without Arrow's schema and the ``datasets`` features.

    Reads the footer only (through one handle, like :func:`read_parquet_file`).
    """
    with open(path, "rb") as handle:
        metadata = pq.ParquetFile(handle).schema_arrow.metadata or {}
    skipped = {b"ARROW:schema", HUGGINGFACE_METADATA_KEY.encode()}
    return {key.decode(): value.decode() for key, value in metadata.items() if key not in skipped}


def read_table_metadata(root: str | Path, table: str, partition: str | None = None) -> dict[str, str]:
    """The key-value metadata (:data:`FILE_METADATA_KEYS` for files the asset graph wrote) of a table's file.

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


def read_parquet_file(path: str | Path) -> pl.DataFrame:
    """Read one Parquet file through a single open handle.

    Polars and pyarrow, given a path, open it twice (footer, then data); a writer renaming a new
    version in between makes them read one file's footer with the other's pages. One handle always
    reads one whole version.
    """
    with open(path, "rb") as handle:
        return pl.read_parquet(handle)


# --- sets of tables published together -------------------------------------------------------

_PROCESS_FOLDERS: dict[tuple[int, str], tuple[Path, int]] = {}
"""(pid, storage root) -> this process's staging folder and the descriptor holding its lock."""


def _commit_lock(root: Path) -> Path:
    return root / STAGING_FOLDER / "commit.lock"


def _apply_moves(root: Path, moves: list[tuple[str, str]]) -> None:
    """Rename each staged file (relative to ``root``) onto its target; already moved ones are skipped."""
    folders = set()
    for staged, target in moves:
        source, destination = root / staged, root / target
        if not source.exists():
            continue  # moved before an interruption
        destination.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, destination)
        folders.add(destination.parent)
    for folder in sorted(folders):
        fsync_directory(folder)


def _roll_forward(root: Path, folder: Path) -> int:
    """Finish the commits journaled in ``folder`` (a dead process's staging); returns how many."""
    finished = 0
    for journal in sorted(folder.glob(f"*/{_JOURNAL}")):
        _apply_moves(root, [tuple(move) for move in json.loads(journal.read_text())["moves"]])
        journal.unlink()
        finished += 1
    return finished


def _recover_locked(root: Path) -> None:
    base = root / STAGING_FOLDER
    own = {folder for (pid, _), (folder, _) in _PROCESS_FOLDERS.items() if pid == os.getpid()}
    for lock in sorted(base.glob("*.lock")):
        if lock.name == "commit.lock":
            continue
        folder = lock.with_suffix("")
        if folder in own:
            continue
        descriptor = _claim_abandoned(lock)
        if descriptor is None:
            continue  # its process is alive
        try:
            if folder.is_dir():
                finished = _roll_forward(root, folder)
                shutil.rmtree(folder)
                logger.info(
                    "storage %s: removed the staging of a stopped writer (%d interrupted commits completed)",
                    root,
                    finished,
                )
            lock.unlink(missing_ok=True)
        finally:
            os.close(descriptor)
    for folder in base.iterdir() if base.is_dir() else []:
        if folder.is_dir() and not folder.with_suffix(".lock").exists() and folder not in own:
            shutil.rmtree(folder)  # a sweeper was stopped between removing the folder and its lock


def recover_storage(root: str | Path) -> None:
    """Finish the commits of killed writers under ``root`` and delete what they left staged.

    Runs under the root's commit lock; cheap when there is nothing to do. Every writer that uses
    :class:`StagedTables` runs it before its first commit and before each commit.
    """
    root = Path(root)
    if not (root / STAGING_FOLDER).is_dir():
        return
    with file_lock(_commit_lock(root)):
        _recover_locked(root)


def _remove_process_folder(key: tuple[int, str]) -> None:
    folder, descriptor = _PROCESS_FOLDERS.pop(key, (None, None))
    if folder is None or key[0] != os.getpid():
        return
    try:
        pending = list(folder.glob(f"*/{_JOURNAL}"))
        if not pending:  # a failed commit keeps its journal for the next recovery
            shutil.rmtree(folder, ignore_errors=True)
            folder.with_suffix(".lock").unlink(missing_ok=True)
    finally:
        os.close(descriptor)


def _process_folder(root: Path) -> Path:
    """This process's staging folder under ``root`` (created, locked and recovered on first use)."""
    key = (os.getpid(), str(root.resolve()))
    if key in _PROCESS_FOLDERS:
        return _PROCESS_FOLDERS[key][0]
    base = root / STAGING_FOLDER
    base.mkdir(parents=True, exist_ok=True)
    prefix = f"{safe_partition_name(socket.gethostname())}-{os.getpid()}-"
    descriptor, lock = _locked_unique_file(base, prefix, ".lock")
    folder = lock.with_suffix("")
    folder.mkdir()
    _PROCESS_FOLDERS[key] = (folder, descriptor)
    atexit.register(_remove_process_folder, key)
    recover_storage(root)
    return folder


class StagedTables:
    """Tables written privately, then published together with :meth:`commit`.

    Args:
        root: the storage root (staging lives in ``<root>/.staging/``, on the same file system).
        set_id: names the set within this process (e.g. run id + step key + attempt); adding to an
            existing set id continues it, so the set may be filled one table at a time.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     root = Path(folder)
    ...     tables = StagedTables(root, "run1.step")
    ...     tables.add("t", pl.DataFrame({"a": [1]}), table_path(root, "t"))
    ...     tables.add("t_quarantine", pl.DataFrame({"r": ["x"]}).head(0), table_path(root, "t_quarantine"))
    ...     before = table_path(root, "t").exists()
    ...     tables.commit()
    ...     before, pl.read_parquet(table_path(root, "t")).height, sorted(tables.names())
    (False, 1, [])
    """

    def __init__(self, root: str | Path, set_id: str) -> None:
        self.root = Path(root)
        self.folder = _process_folder(self.root) / safe_partition_name(set_id)

    def add(
        self,
        name: str,
        frame: pl.DataFrame | None,
        target: Path | None,
        key_value_metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Stage ``frame`` for ``target`` under ``name`` (``None`` records an output with no file).

        ``key_value_metadata`` goes into the file's key-value metadata (see :func:`write_parquet`).
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        entry: dict[str, str | None] = {"staged": None, "target": None}
        if frame is not None and target is not None:
            staged = self.folder / f"{safe_partition_name(name)}{_STAGED_SUFFIX}"
            with staged.open("wb") as handle:
                write_parquet(frame, handle, key_value_metadata)
                handle.flush()
                os.fsync(handle.fileno())
            entry = {
                "staged": staged.relative_to(self.root).as_posix(),
                "target": Path(os.path.relpath(Path(target).absolute(), self.root.absolute())).as_posix(),
            }
        write_json_atomic(self.folder / f"{safe_partition_name(name)}{_ENTRY_SUFFIX}", entry)

    def names(self) -> set[str]:
        """The names staged so far."""
        if not self.folder.is_dir():
            return set()
        return {path.name.removesuffix(_ENTRY_SUFFIX) for path in self.folder.glob(f"*{_ENTRY_SUFFIX}")}

    def commit(self) -> None:
        """Publish every staged table (see the module docstring for the guarantee) and forget the set."""
        entries = [json.loads(path.read_text()) for path in sorted(self.folder.glob(f"*{_ENTRY_SUFFIX}"))]
        moves = [(entry["staged"], entry["target"]) for entry in entries if entry["staged"] is not None]
        with file_lock(_commit_lock(self.root)):
            _recover_locked(self.root)
            if len(moves) > 1:
                write_json_atomic(self.folder / _JOURNAL, {"moves": moves})
            _apply_moves(self.root, moves)
            shutil.rmtree(self.folder)
