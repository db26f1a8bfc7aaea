"""The raw input folders as observable source assets, versioned by their content.

Each source table (``mcq_questions``, ``scene_graphs``, ``rgbd_frames``/``rgbd_scenes``) depends on
an observable source asset standing for the raw files it reads:

| observable | what it fingerprints | read by |
|---|---|---|
| ``raw_mcq_files`` | the OmniSpatial folder, the SpatiaLab table's folder and images | ``mcq_questions`` |
| ``raw_scene_graph_files`` | the Visual Genome folder (and its images folder) | ``scene_graphs`` |
| ``raw_scan_files`` | one RGB-D scan folder per ``scenes`` partition | ``rgbd_frames``, the DGE assets |

An observation records a data version: a hash of every file's path *relative to its configured
root* and of its content. Moving or copying a data folder (``cp -a``, ``cp -r``, ``mv``) changes no
version; editing one file changes exactly the version of the observable that holds it (for scans,
of that scan's partition), so Dagster's automation rebuilds exactly what lies downstream of it.

Hashing a large folder is paid once: content hashes are kept in ``<storage root>/raw_file_hashes.sqlite``
keyed by absolute path, size and modification time, so a later observation reads a file again only
when it changed on disk.

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
from collections.abc import Iterable, Iterator
from pathlib import Path

import dagster as dg

from assets.partitions import SCENES_PARTITIONS_NAME, scenes_partitions
from assets.resources import SourcesResource, StorageResource

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


class FileHashCache:
    """SHA-256 of file contents, remembered by (path, size, modification time, inode).

    :meth:`observe` fingerprints a folder: one ``stat`` per file, the folder's cached hashes read in one
    query, a file's content read only when its ``stat`` changed (and once per inode within an
    observation: hard links share their content), the new hashes written in one statement. A folder's
    files that are new or changed are returned with its fingerprint, so a whole observation costs time
    linear in its files. Per observable and partition the last such list is kept
    (:meth:`record_changes`, :func:`last_changed_files`): the files that started a rebuild.
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._connection = sqlite3.connect(path, timeout=60)
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS file_hashes (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
            "inode INTEGER, sha256 TEXT) WITHOUT ROWID"
        )
        self._connection.execute(
            "CREATE TABLE IF NOT EXISTS changes (observable TEXT, partition TEXT, files TEXT, "
            "PRIMARY KEY (observable, partition))"
        )
        self._hashed_inodes: dict[tuple[int, int, int, int], str] = {}

    def __enter__(self) -> FileHashCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._connection.commit()
        self._connection.close()

    def _cached(self, prefix: str) -> dict[str, tuple[int, int, int, str]]:
        """``{path: (size, mtime_ns, inode, sha256)}`` of every cached file whose path starts with ``prefix``."""
        rows = self._connection.execute(
            "SELECT path, size, mtime_ns, inode, sha256 FROM file_hashes WHERE path >= ? AND path < ?",
            (prefix, prefix + "\U0010ffff"),
        )
        return {path: (size, mtime_ns, inode, sha256) for path, size, mtime_ns, inode, sha256 in rows}

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

    def observe(self, root: Path) -> tuple[list[tuple[str, str]], list[str]]:
        """``(relative path, sha256)`` of every file under ``root`` (``root`` itself when it is a file), in
        path order, and the relative paths whose content is new or changed since the cache last saw them.

        A missing ``root`` has no files.
        """
        root = Path(root)
        files = list(_files_under(root))
        if not files:
            return [], []
        resolved = str(root.resolve())
        if root.is_file():
            cached = self._cached(resolved)
            keys = [resolved]
        else:
            cached = self._cached(resolved + os.sep)
            keys = [resolved + os.sep + relative for relative, _, _ in files]
        hashes, changed, updates = [], [], []
        for key, (relative, path, stat) in zip(keys, files, strict=True):
            known = cached.get(key)
            if known is not None and known[:3] == (stat.st_size, stat.st_mtime_ns, stat.st_ino):
                hashes.append((relative, known[3]))
                continue
            value = self._content_hash(path, stat)
            if known is None or known[3] != value:
                changed.append(relative)
            updates.append((key, stat.st_size, stat.st_mtime_ns, stat.st_ino, value))
            hashes.append((relative, value))
        if updates:
            self._connection.executemany("INSERT OR REPLACE INTO file_hashes VALUES (?, ?, ?, ?, ?)", updates)
        return hashes, changed

    def record_changes(self, observable: str, partition: str | None, files: list[str]) -> None:
        """Keep ``files`` as the last change of ``observable`` (and ``partition``); an empty list keeps the previous."""
        if files:
            self._connection.execute(
                "INSERT OR REPLACE INTO changes VALUES (?, ?, ?)",
                (observable, partition or "", json.dumps(files)),
            )

    def last_changes(self, observable: str, partition: str | None) -> list[str]:
        """What :meth:`record_changes` kept for ``observable`` (and ``partition``)."""
        row = self._connection.execute(
            "SELECT files FROM changes WHERE observable = ? AND partition = ?", (observable, partition or "")
        ).fetchone()
        return json.loads(row[0]) if row else []


def last_changed_files(storage_root: Path, observable: str, partition: str | None = None) -> list[str]:
    """The files of the last observed change of ``observable`` (of ``partition``), relative to their root."""
    with FileHashCache(Path(storage_root) / HASH_CACHE_NAME) as cache:
        return cache.last_changes(observable, partition)


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


def observe_roots(roots: Iterable[Path | None], cache: FileHashCache) -> tuple[str, list[str]]:
    """The content fingerprint of ``roots`` (see :func:`content_fingerprint`) and the files whose content is
    new or changed, relative to their root."""
    digest = hashlib.sha256()
    changed: list[str] = []
    for index, root in enumerate(roots):
        digest.update(f"root {index}\n".encode())
        if root is None:
            continue
        hashes, root_changed = cache.observe(Path(root))
        digest.update("".join(f"{relative}\0{value}\n" for relative, value in hashes).encode())
        changed.extend(root_changed)
    return digest.hexdigest()[:16], changed


def content_fingerprint(roots: Iterable[Path | None], cache: FileHashCache) -> str:
    """A hash of every file under ``roots``: its path relative to its root, and its content.

    A missing root counts as empty, so a folder that appears later changes the fingerprint.
    """
    return observe_roots(roots, cache)[0]


def scan_folders(sources: SourcesResource, storage: StorageResource) -> dict[str, Path]:
    """Every scan folder of the configured ScanNet root, by scene id (its folder name)."""
    root = sources.scannet(storage)
    return {path.name: path for path in sorted(root.iterdir()) if path.is_dir()} if root.is_dir() else {}


def _observe_on_cron() -> dg.AutomationCondition:
    return (
        dg.AutomationCondition.cron_tick_passed(rebuild_cron())
        .since_last_handled()
        .with_label(f"observe on cron ({rebuild_cron()})")
    )


def _observe(cache: FileHashCache, observable: str, partition: str | None, roots: list[Path | None]) -> str:
    """The content version of ``roots``; the files whose content changed are kept as the observable's last change."""
    version, changed = observe_roots(roots, cache)
    cache.record_changes(observable, partition, changed)
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
    folders = scan_folders(sources, storage)
    registered = context.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME)
    with _hash_cache(storage) as cache:
        return dg.DataVersionsByPartition(
            {scene: _observe(cache, "raw_scan_files", scene, [folders.get(scene)]) for scene in registered}
        )


RAW_FILE_ASSETS = [raw_mcq_files, raw_scene_graph_files, raw_scan_files]
RAW_FILE_KEYS = [asset.key for asset in RAW_FILE_ASSETS]
