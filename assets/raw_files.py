"""The raw input folders as observable source assets, versioned by their content.

Each source table (``mcq_questions``, ``scene_graphs``, ``rgbd_frames``/``rgbd_scenes``) depends on
an observable source asset standing for the raw files it reads:

| observable | what it fingerprints | read by |
|---|---|---|
| ``raw_mcq_files`` | the OmniSpatial folder, the SpatiaLab table's folder and images | ``mcq_questions`` |
| ``raw_scene_graph_files`` | the Visual Genome folder (and its images folder) | ``scene_graphs`` |
| ``raw_scan_files`` | one RGB-D scan per ``scenes`` partition (ScanNet, ARKitScenes, ScanNet++) | ``rgbd_frames``, the DGE assets |

An observation records a data version: a hash of every file's path *relative to its configured
root* and of its content. Moving or copying a data folder (``cp -a``, ``cp -r``, ``mv``) changes no
version; editing one file changes exactly the version of the observable that holds it (for scans,
of that scan's partition), so Dagster's automation rebuilds exactly what lies downstream of it. A scan's
version covers what its reader reads (:attr:`readers.scans.ScanFolder.inputs`: a ScanNet or ARKitScenes
scan's folder, a ScanNet++ scene's extracted iPhone frames, poses, mesh and annotation) and, for an
ARKitScenes video, its ``metadata.csv`` row.

Hashing a large folder is paid once: content hashes are kept in ``<storage root>/raw_file_hashes.sqlite``
keyed by absolute path, size and modification time, so a later observation reads a file again only
when it changed on disk. The same file keeps, per observable and partition, the files each observation
found added, edited and deleted (:class:`FileChanges`): what the automation's run tags name
(:mod:`pipelines.run_triggers`).

>>> import shutil, tempfile
>>> root = Path(tempfile.mkdtemp()); (root / "raw").mkdir(); (root / "raw" / "a.txt").write_text("one")
3
>>> with FileHashCache(root / "hashes.sqlite") as cache:
...     before = content_fingerprint([root / "raw"], cache)
...     moved = shutil.copytree(root / "raw", root / "elsewhere" / "raw", copy_function=shutil.copy)
...     after = content_fingerprint([moved], cache)
>>> before == after  # same files at the same paths relative to their root
True
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.resources import SourcesResource, StorageResource
from readers.scans import ScanFolder, list_scans

GROUP = "sources"
HASH_CACHE_NAME = "raw_file_hashes.sqlite"
REBUILD_CRON_ENV = "SPATIAL_REBUILD_CRON"
DEFAULT_REBUILD_CRON = "0 3 * * 0"
_CHUNK = 1 << 20


def _catalog_tags(method: str) -> dict[str, str]:
    """The kind (``file``), method and stage tags the catalog shows (``pipelines.catalog`` gives the other
    assets theirs; an observable source asset carries kinds as tags and has no owners)."""
    return {"dagster/kind/file": "", "spatial/method": method, "spatial/stage": "raw"}


def rebuild_cron() -> str:
    """The cron on which the raw folders are observed: ``$SPATIAL_REBUILD_CRON``, default Sundays 03:00 UTC."""
    return os.environ.get(REBUILD_CRON_ENV) or DEFAULT_REBUILD_CRON


@dataclass(frozen=True)
class FileChanges:
    """Files added, edited and deleted (paths relative to their root)."""

    added: tuple[str, ...] = ()
    edited: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.edited or self.deleted)

    def __add__(self, other: FileChanges) -> FileChanges:
        """Both lists of files side by side (changes under different roots)."""
        return FileChanges(self.added + other.added, self.edited + other.edited, self.deleted + other.deleted)

    def then(self, later: FileChanges) -> FileChanges:
        """The net change of ``self`` followed by ``later``: a file added then deleted is no change, deleted then
        added is edited, added then edited stays added.

        >>> FileChanges(added=("a",), edited=("b",)).then(FileChanges(edited=("a",), deleted=("b", "c")))
        FileChanges(added=('a',), edited=(), deleted=('b', 'c'))
        """
        state: dict[str, str | None] = {}
        for changes in (self, later):
            for kind, paths in zip(
                _CHANGE_KINDS, (changes.added, changes.edited, changes.deleted), strict=True
            ):
                for path in paths:
                    state[path] = _net_change(state.get(path), kind)
        return FileChanges(
            *(tuple(sorted(path for path, value in state.items() if value == kind)) for kind in _CHANGE_KINDS)
        )

    def describe(self, shown: int = 5) -> str:
        """``added a, b; edited c; deleted d``, at most ``shown`` files per kind then how many more."""
        parts = []
        for kind, paths in zip(_CHANGE_KINDS, (self.added, self.edited, self.deleted), strict=True):
            if paths:
                more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
                parts.append(f"{kind} {', '.join(paths[:shown])}{more}")
        return "; ".join(parts)


_CHANGE_KINDS = ("added", "edited", "deleted")


def _net_change(before: str | None, kind: str) -> str | None:
    """A file's net change when ``kind`` follows ``before`` (``None``: no change)."""
    if before == "added":
        return None if kind == "deleted" else "added"
    return "edited" if before == "deleted" and kind == "added" else kind


@dataclass(frozen=True)
class ObservedChange:
    """One recorded observation that changed an observable's version: from ``previous`` to ``version``."""

    previous: str | None
    version: str
    changes: FileChanges
    observed_at: float


class FileHashCache:
    """SHA-256 of file contents, remembered by (path, size, modification time, inode).

    :meth:`observe` fingerprints a folder: one ``stat`` per file, the folder's cached hashes read in one
    query, a file's content read only when its ``stat`` changed (and once per inode within an
    observation: hard links share their content), the new hashes written in one statement, so a whole
    observation costs time linear in its files.

    A recording observation (``record=True``, the raw-file observables') also compares each file with what
    the last recording observation saw (the ``observed`` column: reading a scan to build it does not move
    it) and returns the files added, edited and deleted since; :meth:`record_change` keeps them per
    observable, partition and version (the last :data:`KEPT_CHANGES`), and :meth:`changes_between` gives the
    net change between two versions: the files that started a rebuild.
    """

    KEPT_CHANGES = 50

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(path, timeout=60)
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
            "inode INTEGER, sha256 TEXT, observed TEXT) WITHOUT ROWID"
        )
        if (
            not self._has_observed_column()
        ):  # a cache from before recording observations: all seen as they are
            self._connection.execute("BEGIN IMMEDIATE")  # one process migrates, the others wait for it
            if not self._has_observed_column():
                self._connection.execute("ALTER TABLE file_hashes ADD COLUMN observed TEXT")
                self._connection.execute("UPDATE file_hashes SET observed = sha256")
            self._connection.commit()
        self._connection.execute("DROP TABLE IF EXISTS changes")  # one list per observable, before versions
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS observed_changes (observable TEXT, partition TEXT, observed_at REAL, "
            "previous TEXT, version TEXT, changes TEXT)"
        )
        self._connection.execute(
            "CREATE INDEX IF NOT EXISTS observed_changes_by_key ON observed_changes (observable, partition)"
        )
        self._hashed_inodes: dict[tuple[int, int, int, int], str] = {}

    def _has_observed_column(self) -> bool:
        return any(row[1] == "observed" for row in self._connection.execute("PRAGMA table_info(file_hashes)"))

    def __enter__(self) -> FileHashCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._connection.commit()
        self._connection.close()

    def _cached(self, prefix: str) -> dict[str, tuple[int, int, int, str, str | None]]:
        """``{path: (size, mtime_ns, inode, sha256, observed)}`` of every cached file whose path starts with
        ``prefix``."""
        rows = self._connection.execute(
            "SELECT path, size, mtime_ns, inode, sha256, observed FROM file_hashes WHERE path >= ? AND path < ?",
            (prefix, prefix + "\U0010ffff"),
        )
        return {path: tuple(values) for path, *values in rows}

    def _content_hash(self, path: str, stat: os.stat_result) -> str:
        identity = (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        value = self._hashed_inodes.get(identity)
        if value is None:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
            value = self._hashed_inodes[identity] = digest.hexdigest()
        return value

    def observe(self, root: Path, record: bool = False) -> tuple[list[tuple[str, str]], FileChanges]:
        """``(relative path, sha256)`` of every file under ``root`` (``root`` itself when it is a file), in
        path order, and, when ``record``, the files added, edited and deleted since the last recording
        observation of ``root`` (else no changes).

        A missing ``root`` has no files.
        """
        root = Path(root)
        resolved = str(root.resolve())
        is_file = root.is_file()
        files = list(_files_under(root))
        cached = {path: row for path, row in self._cached(resolved).items() if path == resolved}
        cached |= self._cached(resolved + os.sep)
        if is_file:
            keys = [resolved]
        else:
            keys = [resolved + os.sep + relative for relative, _, _ in files]
        hashes, updates = [], []
        added: list[str] = []
        edited: list[str] = []
        for key, (relative, path, stat) in zip(keys, files, strict=True):
            known = cached.pop(key, None)
            if known is not None and known[:3] == (stat.st_size, stat.st_mtime_ns, stat.st_ino):
                value = known[3]
            else:
                value = self._content_hash(path, stat)
            observed = known[4] if known is not None else None
            if record and observed != value:
                (added if observed is None else edited).append(relative)
                observed = value
            if (
                known is None
                or known[:3] != (stat.st_size, stat.st_mtime_ns, stat.st_ino)
                or known[4] != observed
            ):
                updates.append((key, stat.st_size, stat.st_mtime_ns, stat.st_ino, value, observed))
            hashes.append((relative, value))
        if updates:
            self._connection.executemany(
                "INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?, ?, ?)", updates
            )
        if not record:
            return hashes, FileChanges()
        gone = sorted(path for path, row in cached.items() if row[4] is not None)
        if cached:  # files gone since they were cached: forgotten, and reported when an observation saw them
            self._connection.executemany(
                "DELETE FROM file_hashes WHERE path = ?", [(path,) for path in cached]
            )
        deleted = tuple(Path(path).name if path == resolved else path[len(resolved) + 1 :] for path in gone)
        return hashes, FileChanges(tuple(added), tuple(edited), deleted)

    def record_change(
        self,
        observable: str,
        partition: str | None,
        version: str,
        changes: FileChanges,
        now: float | None = None,
    ) -> None:
        """Keep ``changes`` as what took ``observable`` (``partition``) to ``version``; no changes keep nothing."""
        if not changes:
            return
        key = (observable, partition or "")
        latest = self._connection.execute(
            "SELECT version FROM observed_changes WHERE observable = ? AND partition = ? "
            "ORDER BY observed_at DESC, rowid DESC LIMIT 1",
            key,
        ).fetchone()
        payload = json.dumps({"added": changes.added, "edited": changes.edited, "deleted": changes.deleted})
        self._connection.execute(
            "INSERT INTO observed_changes VALUES (?, ?, ?, ?, ?, ?)",
            (*key, time.time() if now is None else now, latest[0] if latest else None, version, payload),
        )
        self._connection.execute(
            "DELETE FROM observed_changes WHERE observable = ? AND partition = ? AND rowid NOT IN (SELECT rowid "
            "FROM observed_changes WHERE observable = ? AND partition = ? ORDER BY observed_at DESC, rowid DESC "
            "LIMIT ?)",
            (*key, *key, self.KEPT_CHANGES),
        )

    def recorded_changes(self, observable: str, partition: str | None) -> list[ObservedChange]:
        """What :meth:`record_change` kept for ``observable`` (``partition``), newest first."""
        rows = self._connection.execute(
            "SELECT previous, version, changes, observed_at FROM observed_changes WHERE observable = ? AND "
            "partition = ? ORDER BY observed_at DESC, rowid DESC",
            (observable, partition or ""),
        )
        return [
            ObservedChange(
                previous, version, FileChanges(**{k: tuple(v) for k, v in json.loads(payload).items()}), at
            )
            for previous, version, payload, at in rows
        ]


def changes_between(history: list[ObservedChange], since: str | None, until: str | None) -> FileChanges:
    """The net change that took an observable from version ``since`` to ``until``, from its recorded
    ``history`` (newest first): the chain of changes back from ``until``'s latest, stopping at ``since``
    (or where the kept history ends)."""
    chain: list[FileChanges] = []
    wanted = until
    for change in history:
        if wanted is None or wanted == since:
            break
        if change.version == wanted:
            chain.append(change.changes)
            wanted = change.previous
    net = FileChanges()
    for changes in reversed(chain):
        net = net.then(changes)
    return net


def recorded_history(
    storage_root: Path, observable: str, partition: str | None = None
) -> list[ObservedChange]:
    """The recorded changes of ``observable`` (``partition``), newest first (see :meth:`FileHashCache.record_change`)."""
    with FileHashCache(Path(storage_root) / HASH_CACHE_NAME) as cache:
        return cache.recorded_changes(observable, partition)


def _walk(folder: str, relative: str) -> Iterator[tuple[str, str, os.stat_result]]:
    """Files below ``folder`` in path order (names sorted per folder; symlinked folders not entered)."""
    with os.scandir(folder) as scan:
        entries = sorted(scan, key=lambda entry: entry.name)
    for entry in entries:
        name = relative + entry.name
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path, name + "/")
        elif entry.is_file():
            yield name, entry.path, entry.stat()


def _files_under(root: Path) -> Iterator[tuple[str, str, os.stat_result]]:
    """``(path relative to root, path, stat)`` of every file under ``root`` (``root`` itself when it is a file)."""
    if root.is_file():
        yield root.name, str(root), root.stat()
    elif root.is_dir():
        yield from _walk(str(root), "")


def observe_roots(
    roots: Iterable[Path | None], cache: FileHashCache, record: bool = False
) -> tuple[str, FileChanges]:
    """The content fingerprint of ``roots`` (see :func:`content_fingerprint`) and, when ``record``, the files
    added, edited and deleted since the last recording observation, relative to their root."""
    digest = hashlib.sha256()
    changes = FileChanges()
    for index, root in enumerate(roots):
        digest.update(f"root {index}\n".encode())
        if root is None:
            continue
        hashes, root_changes = cache.observe(Path(root), record=record)
        digest.update("".join(f"{relative}\0{value}\n" for relative, value in hashes).encode())
        changes += root_changes
    return digest.hexdigest()[:16], changes


def content_fingerprint(roots: Iterable[Path | None], cache: FileHashCache) -> str:
    """A hash of every file under ``roots``: its path relative to its root, and its content.

    A missing root counts as empty, so a folder that appears later changes the fingerprint.
    """
    return observe_roots(roots, cache)[0]


def scan_folders(sources: SourcesResource, storage: StorageResource) -> dict[str, ScanFolder]:
    """Every scan of the configured scan roots (ScanNet, ARKitScenes, ScanNet++), by partition key.

    Raises:
        ValueError: when two scans have the same key (a ScanNet folder named like another data set's key, an
            ARKitScenes video in two folds).
    """
    scans: dict[str, ScanFolder] = {}
    for dataset, root in sources.scan_roots(storage).items():
        for scan in list_scans(dataset, root):
            if scan.key in scans:
                raise ValueError(
                    f"two scans have the partition key {scan.key}: {scans[scan.key].folder} and {scan.folder}"
                )
            scans[scan.key] = scan
    return dict(sorted(scans.items()))


def observe_scan(
    scan: ScanFolder | None, cache: FileHashCache, record: bool = False
) -> tuple[str, FileChanges]:
    """The content version of a scan (what its reader reads, and an ARKitScenes video's metadata row; a scan
    that is gone versions as empty) and, when ``record``, its files changed since the last recording
    observation (see :func:`observe_roots`)."""
    version, changes = observe_roots(list(scan.inputs) if scan is not None else [None], cache, record=record)
    if scan is not None and scan.metadata:
        row = json.dumps(scan.metadata, sort_keys=True)
        version = hashlib.sha256(f"{version}\0{row}".encode()).hexdigest()[:16]
    return version, changes


def _observe_on_cron() -> dg.AutomationCondition:
    # typed for any key: left to infer, the tick's key type is AssetKey, which `since_last_handled` refuses
    tick: dg.AutomationCondition = dg.AutomationCondition.cron_tick_passed(rebuild_cron())
    return tick.since_last_handled().with_label(f"observe on cron ({rebuild_cron()})")


def _observe(
    cache: FileHashCache, observable: str, partition: str | None, roots: Iterable[Path | None]
) -> str:
    """The content version of ``roots``; the files changed since the last observation are recorded."""
    version, changes = observe_roots(roots, cache, record=True)
    cache.record_change(observable, partition, version, changes)
    return version


def _hash_cache(storage: StorageResource) -> FileHashCache:
    return FileHashCache(storage.path / HASH_CACHE_NAME)


@dg.observable_source_asset(
    group_name=GROUP,
    automation_condition=_observe_on_cron(),
    description="The raw OmniSpatial and SpatiaLab files (versioned by content, paths relative to their roots).",
    tags=_catalog_tags("spatialcore"),
)
def raw_mcq_files(sources: SourcesResource, storage: StorageResource) -> dg.DataVersion:
    """Fingerprint the multiple-choice sources' files."""
    with _hash_cache(storage) as cache:
        return dg.DataVersion(
            _observe(cache, "raw_mcq_files", None, sources.raw_inputs(storage)["mcq_questions"])
        )


@dg.observable_source_asset(
    group_name=GROUP,
    automation_condition=_observe_on_cron(),
    description="The raw Visual Genome files (versioned by content, paths relative to their roots).",
    tags=_catalog_tags("spatialthinker"),
)
def raw_scene_graph_files(sources: SourcesResource, storage: StorageResource) -> dg.DataVersion:
    """Fingerprint the scene-graph source's files."""
    roots = sources.raw_inputs(storage)["scene_graphs"]
    with _hash_cache(storage) as cache:
        return dg.DataVersion(_observe(cache, "raw_scene_graph_files", None, roots))


@dg.observable_source_asset(
    group_name=GROUP,
    partitions_def=scenes_partitions,
    automation_condition=_observe_on_cron(),
    description="One RGB-D scan folder per scenes partition (versioned by content, paths relative to the scan).",
    tags=_catalog_tags("dge"),
)
def raw_scan_files(
    context: dg.OpExecutionContext, sources: SourcesResource, storage: StorageResource
) -> dg.DataVersionsByPartition:
    """Fingerprint every registered scan; a registered scan whose folder is gone versions as empty."""
    scans = scan_folders(sources, storage)
    registered = context.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME)
    versions = {}
    with _hash_cache(storage) as cache:
        for scene in registered:
            versions[scene], changes = observe_scan(scans.get(scene), cache, record=True)
            cache.record_change("raw_scan_files", scene, versions[scene], changes)
    return dg.DataVersionsByPartition(versions)


RAW_FILE_ASSETS = [raw_mcq_files, raw_scene_graph_files, raw_scan_files]
RAW_FILE_KEYS = [asset.key for asset in RAW_FILE_ASSETS]
