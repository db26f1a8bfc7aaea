"""Event-driven observation of the raw folders: a file watcher that tells ``raw_files_sensor`` when to observe.

``raw_files_sensor`` ticks every :data:`SENSOR_TICK_SECONDS`. It requests an observation of the raw
folders when

- the file watcher saw a file created, written, deleted or moved under a configured root and the folders
  have since been quiet for :data:`QUIET_SECONDS` (a copy in progress finishes first): an edit on this
  machine is observed within seconds;
- ``$SPATIAL_OBSERVE_INTERVAL_SECONDS`` (default 300) passed since the sensor last requested one: the
  fallback where file events do not arrive. Network filesystems (NFS, SMB, FUSE mounts such as S3 or GCS
  buckets) do not report changes made on other machines: there the interval alone picks them up, so set
  it to what a rebuild may lag behind an edit.

The watcher (watchdog; inotify on Linux) runs in the process that evaluates the sensor (``dagster dev``'s
code server), one per set of roots, started at the first tick. Reading a file (an observation hashing
it, a build reading a scan) is not an event. ``SPATIAL_WATCH_RAW_FILES=0`` turns it off; where it cannot
start (for example Linux's ``fs.inotify.max_user_watches``, one watch per folder, is too low for a large
scan tree) the log says so once and the interval goes on alone.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

logger = logging.getLogger(__name__)

WATCH_ENV = "SPATIAL_WATCH_RAW_FILES"
OBSERVE_INTERVAL_ENV = "SPATIAL_OBSERVE_INTERVAL_SECONDS"
DEFAULT_OBSERVE_INTERVAL_SECONDS = 300.0
SENSOR_TICK_SECONDS = 15
QUIET_SECONDS = 5.0
_CHANGE_EVENTS = frozenset(
    {"created", "modified", "deleted", "moved", "closed"}
)  # not "opened", "closed_no_write"


def observe_interval_seconds() -> float:
    """Seconds between two observations when no file event asks for one (``$SPATIAL_OBSERVE_INTERVAL_SECONDS``)."""
    return float(os.environ.get(OBSERVE_INTERVAL_ENV) or DEFAULT_OBSERVE_INTERVAL_SECONDS)


def watching_enabled() -> bool:
    """Whether the raw folders are watched (``$SPATIAL_WATCH_RAW_FILES``, default on)."""
    return os.environ.get(WATCH_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


class _ChangeRecorder(FileSystemEventHandler):
    """Keeps the time of the latest change to a file under one of ``roots``."""

    def __init__(self, roots: tuple[Path, ...]) -> None:
        self._roots = tuple(str(root) for root in roots)
        self._lock = threading.Lock()
        self.last_change: float | None = None

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CHANGE_EVENTS:
            return
        paths = [os.fsdecode(event.src_path), os.fsdecode(getattr(event, "dest_path", "") or "")]
        if any(_under(path, root) for path in paths if path for root in self._roots):
            with self._lock:
                self.last_change = time.time()


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class RawFileWatcher:
    """Watches ``roots`` (folders recursively; a file through its folder) for changes to their files."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = tuple(sorted({Path(root).resolve() for root in roots}))
        self._recorder = _ChangeRecorder(self.roots)
        self._observer = Observer()
        for root in self.roots:
            if root.is_dir():
                self._observer.schedule(self._recorder, str(root), recursive=True)
            elif root.parent.is_dir():
                self._observer.schedule(self._recorder, str(root.parent), recursive=False)
        self._observer.start()

    @property
    def last_change(self) -> float | None:
        """When a file under the roots last changed (seconds since the epoch), ``None`` if not since the start."""
        return self._recorder.last_change

    def stop(self) -> None:
        self._observer.stop()
        self._observer.join(timeout=5)


_watchers: dict[tuple[Path, ...], RawFileWatcher] = {}
_failed: set[tuple[Path, ...]] = set()
_watchers_lock = threading.Lock()


def raw_file_watcher(roots: Iterable[Path]) -> RawFileWatcher | None:
    """This process's watcher of ``roots`` (started at the first call; one that watched other roots is
    stopped); ``None`` when watching is off or cannot start (logged once)."""
    if not watching_enabled():
        return None
    wanted = tuple(sorted({Path(root).resolve() for root in roots if Path(root).exists()}))
    with _watchers_lock:
        if wanted in _watchers:
            return _watchers[wanted]
        if wanted in _failed or not wanted:
            return None
        for key in list(_watchers):
            _watchers.pop(key).stop()
        try:
            _watchers[wanted] = RawFileWatcher(wanted)
        except OSError as error:  # e.g. the inotify watch limit (ENOSPC) or a folder removed meanwhile
            _failed.add(wanted)
            logger.warning(
                "the raw folders cannot be watched for changes (%s); they are observed every %.0f s instead "
                "(raise fs.inotify.max_user_watches, or set %s)",
                error,
                observe_interval_seconds(),
                OBSERVE_INTERVAL_ENV,
            )
            return None
        return _watchers[wanted]


def observation_due(last_request: float | None, watcher: RawFileWatcher | None, now: float) -> str | None:
    """Why an observation is due now, or ``None``: ``"file change"`` (the watcher saw one after
    ``last_request`` and the folders have been quiet since), ``"interval"`` (none requested for
    :func:`observe_interval_seconds`, or never)."""
    if last_request is None or now - last_request >= observe_interval_seconds():
        return "interval"
    changed = None if watcher is None else watcher.last_change
    if changed is not None and changed > last_request and now - changed >= QUIET_SECONDS:
        return "file change"
    return None
