"""Tell a ``DAGSTER_HOME`` that cannot be written (disk full, read-only, no permission), or a full storage root,
from other failures.

:func:`check_dagster_home` takes an error (an exception, or the error of a failed step) that looks like a
refused storage write (:data:`STORAGE_ERROR_SIGNS`) and writes a probe file under ``$DAGSTER_HOME``, so that
an error about another disk is not blamed on it; ``spatial-build`` then stops with
:class:`DagsterHomeUnwritable`'s one sentence. :func:`check_storage_root` does the same for a full disk
(ENOSPC, EDQUOT) under the storage root, where the tables are written: :class:`StorageRootFull`.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagster_shared.error import SerializableErrorInfo

STORAGE_ERROR_SIGNS = (
    "database or disk is full",  # SQLITE_FULL
    "disk i/o error",  # SQLITE_IOERR, what a full disk gives when SQLite writes its journal or WAL
    "attempt to write a readonly database",
    "unable to open database file",
    "no space left on device",  # ENOSPC
    "disk quota exceeded",  # EDQUOT
    "read-only file system",  # EROFS
    "permission denied",  # EACCES
)
"""Lower-case fragments of the messages that storage writes fail with when their disk cannot be written."""

PROBE_BYTES = 1 << 20
"""Size of the probe file: a disk with less free space than this is full for a build."""


def storage_error_text(error: BaseException | SerializableErrorInfo | None) -> str | None:
    """The message of the first error in ``error``'s chain (causes and contexts) that looks like a storage write
    that its disk refused (:data:`STORAGE_ERROR_SIGNS`), else None."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, BaseException):
            message = str(current)
            pending += [current.__cause__, current.__context__]
        else:  # the error of a failed step, as Dagster records it
            message = current.message
            pending += [current.cause, current.context]
        if any(sign in message.lower() for sign in STORAGE_ERROR_SIGNS):
            return message.strip()
    return None


FULL_DISK_SIGNS = ("no space left on device", "disk quota exceeded")
"""Lower-case fragments of the messages of a write refused because its disk is full (ENOSPC, EDQUOT)."""


def dagster_home_problem(home: Path) -> str | None:
    """``"is full"`` or ``"is not writable (...)"`` when a probe file of :data:`PROBE_BYTES` cannot be written
    and synced under ``home``; None when it can."""
    probe = home / f".spatial-build-probe-{os.getpid()}"
    try:
        with probe.open("wb") as handle:
            handle.write(b"\0" * PROBE_BYTES)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return "is full"
        return f"is not writable ({error.strerror or error})"
    finally:
        if probe.exists():  # none on a read-only file system
            probe.unlink()
    return None


class DagsterHomeUnwritable(Exception):
    """``DAGSTER_HOME`` cannot be written, so the build cannot record its runs; ``sentence`` says so to the user."""

    def __init__(self, home: Path, problem: str, detail: str):
        self.home, self.problem, self.detail = home, problem, detail
        super().__init__(self.sentence)

    @property
    def sentence(self) -> str:
        what = "the disk of DAGSTER_HOME" if self.problem == "is full" else "DAGSTER_HOME"
        remedy = "free space on it" if self.problem == "is full" else "make it writable"
        return (
            f"spatial-build stopped because {what} ({self.home}) {self.problem}, so Dagster cannot record runs "
            f"there; {remedy} or point DAGSTER_HOME at another disk, then build again (error: {self.detail})."
        )


def check_dagster_home(error: BaseException | SerializableErrorInfo | None) -> DagsterHomeUnwritable | None:
    """The :class:`DagsterHomeUnwritable` that explains ``error``, when it is a refused storage write and
    ``$DAGSTER_HOME`` is full or not writable; else None (the error is about something else)."""
    detail = storage_error_text(error)
    home = os.environ.get("DAGSTER_HOME")
    if detail is None or not home:
        return None
    problem = dagster_home_problem(Path(home))
    if problem is None:
        return None
    return DagsterHomeUnwritable(Path(home), problem, detail.splitlines()[0])


class StorageRootFull(Exception):
    """The disk of the storage root is full, so the build cannot write its tables; ``sentence`` says so."""

    def __init__(self, root: Path, detail: str):
        self.root, self.detail = root, detail
        super().__init__(self.sentence)

    @property
    def sentence(self) -> str:
        return (
            f"spatial-build stopped because the disk of the storage root ({self.root}) is full, so the tables "
            f"cannot be written; free space on it or point --storage-root at another disk, then build again "
            f"(error: {self.detail})."
        )


def check_storage_root(
    error: BaseException | SerializableErrorInfo | None, root: Path
) -> StorageRootFull | None:
    """The :class:`StorageRootFull` that explains ``error``, when it is a write refused for a full disk
    (:data:`FULL_DISK_SIGNS`) that names a file under ``root`` or, naming none, when ``root`` is full (a probe
    file cannot be written); else None."""
    detail = storage_error_text(error)
    if detail is None or not any(sign in detail.lower() for sign in FULL_DISK_SIGNS):
        return None
    names_root = str(root) in detail
    if not names_root and "/" in detail:  # it names another file
        return None
    if not names_root and dagster_home_problem(root) != "is full":
        return None
    return StorageRootFull(root, detail.splitlines()[0])
