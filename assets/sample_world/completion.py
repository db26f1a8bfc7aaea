"""How a sample world is put in place whole, and how a finished one is recognised.

- **Lock.** Every build of a world folder holds ``fcntl.flock`` on ``.<name>.lock`` beside it, so
  two builds of the same folder (two ``spatial-build`` processes, a build and the CLI) run one
  after the other; a killed holder releases the lock.
- **Private staging.** A build writes into its own folder ``.<name>.partial-<random>`` beside the
  world, fsyncs every file and folder, writes the completion stamp into it, and swaps it with the
  world in one step (``renameat2(RENAME_EXCHANGE)`` where the platform has it, else two renames:
  world aside, staging in). Readers see the old world or the new one; leftovers of killed builds are
  deleted by the next build, under the lock.
- **Completion stamp.** ``sample_world_manifest.json`` in the world lists every file the generator
  wrote with its size and SHA-256, the generator version and the configuration. A world is complete
  only when its stamp parses, names the configuration asked for, and every listed file is there
  with that size and hash, with no unlisted file below the top level (top-level files other tools
  add, such as their own stamps, are allowed). Anything else is incomplete and gets rebuilt.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     world = Path(folder) / "w"
...     (world / "a").mkdir(parents=True)
...     _ = (world / "a" / "x.txt").write_text("x")
...     files = file_manifest(world)
...     write_stamp(world, {"seed": 1}, {"root": str(world)}, files)
...     complete = verify_world(world, {"seed": 1}) is not None
...     _ = (world / "a" / "x.txt").write_text("y")
...     complete, verify_world(world, {"seed": 1})
(True, None)
"""

from __future__ import annotations

import ctypes
import errno
import hashlib
import json
import logging
import os
import shutil
import uuid
from pathlib import Path

from data_contracts.storage import fsync_directory, write_json_atomic

logger = logging.getLogger(__name__)

MANIFEST_FILE = "sample_world_manifest.json"
_CHUNK = 1 << 20
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def lock_path(root: Path) -> Path:
    """The lock file of the world folder ``root`` (beside it, so it survives the swap).

    >>> lock_path(Path("data/sample_world")).as_posix()
    'data/.sample_world.lock'
    """
    return root.parent / f".{root.name}.lock"


def new_staging_folder(root: Path) -> Path:
    """A new, empty private build folder beside ``root`` (call under the lock)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    staging = root.parent / f".{root.name}.partial-{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    return staging


def remove_leftovers(root: Path) -> list[Path]:
    """Delete the build folders of killed builds of ``root`` (call under the lock); returns them."""
    if not root.parent.is_dir():
        return []
    leftovers = sorted(
        path
        for pattern in (f".{root.name}.partial*", f".{root.name}.old-*")
        for path in root.parent.glob(pattern)
        if path.is_dir()
    )
    for path in leftovers:
        shutil.rmtree(path)
    if leftovers:
        logger.info("removed %d folders of interrupted sample world builds beside %s", len(leftovers), root)
    return leftovers


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
        os.fsync(handle.fileno())  # the staging folder is made durable before it is swapped in
    return digest.hexdigest()


def file_manifest(folder: Path) -> dict[str, dict]:
    """``{relative path: {"size", "sha256"}}`` of every file under ``folder`` except the stamp.

    Also fsyncs every file and folder, so the manifest describes what is on disk.
    """
    files = {}
    folders = [folder]
    for path in sorted(folder.rglob("*")):
        if path.is_dir():
            folders.append(path)
        elif path.is_file() and path.relative_to(folder).as_posix() != MANIFEST_FILE:
            files[path.relative_to(folder).as_posix()] = {
                "size": path.stat().st_size,
                "sha256": _sha256(path),
            }
    for path in folders:
        fsync_directory(path)
    return files


def write_stamp(folder: Path, config: dict, summary: dict, files: dict[str, dict]) -> None:
    """Write the completion stamp of the world in ``folder`` (atomically)."""
    write_json_atomic(folder / MANIFEST_FILE, {"config": config, "summary": summary, "files": files})


def read_stamp(root: Path) -> dict | None:
    """The stamp of the world ``root``, or None when it is missing or unreadable."""
    try:
        stamp = json.loads((root / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return stamp if isinstance(stamp, dict) and isinstance(stamp.get("files"), dict) else None


def stamp_identity(root: Path) -> tuple[int, int] | None:
    """Which stamp file ``root`` holds now (inode, modification time): tells a swapped world apart."""
    try:
        stat = (root / MANIFEST_FILE).stat()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return stat.st_ino, stat.st_mtime_ns


def world_problems(root: Path, stamp: dict) -> list[str]:
    """What differs between the stamp's manifest and the files under ``root`` (empty when complete)."""
    problems = []
    listed = stamp["files"]
    for relative, expected in sorted(listed.items()):
        path = root / relative
        if not path.is_file():
            problems.append(f"missing {relative}")
        elif path.stat().st_size != expected.get("size"):
            problems.append(f"size of {relative}: {path.stat().st_size} != {expected.get('size')}")
        elif _sha256(path) != expected.get("sha256"):
            problems.append(f"content of {relative} changed")
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_file() and len(path.relative_to(root).parts) > 1 and relative not in listed:
            problems.append(f"unlisted {relative}")
    return problems


def verify_world(root: Path, config: dict) -> dict | None:
    """The stamp of ``root`` when it holds a complete world built from ``config``, else None."""
    stamp = read_stamp(root)
    if stamp is None:
        return None
    if stamp.get("config") != config:
        logger.info("sample world %s was built from another configuration", root)
        return None
    problems = world_problems(root, stamp)
    if problems:
        logger.warning(
            "sample world %s does not match its manifest (%d problems, first: %s); it is incomplete",
            root,
            len(problems),
            problems[0],
        )
        return None
    return stamp


def _exchange(first: Path, second: Path) -> bool:
    """Swap two existing paths atomically (Linux ``renameat2``); False where that is not available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    result = renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE)
    if result == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def swap_into_place(staging: Path, root: Path) -> None:
    """Make the finished ``staging`` folder the world ``root`` (call under the lock).

    Afterwards ``staging`` holds the previous world (when there was one) for the caller to delete.
    """
    if not root.exists():
        os.rename(staging, root)
    elif not _exchange(staging, root):
        aside = root.parent / f".{root.name}.old-{uuid.uuid4().hex[:12]}"
        os.rename(root, aside)  # a kill between the two renames leaves no world, never half of one
        os.rename(staging, root)
        os.rename(aside, staging)
    fsync_directory(root.parent)
