"""A Hugging Face Hub cache written by the tests, laid out as ``huggingface_hub`` writes it, so Hub locations resolve offline.

``<cache>/datasets--OWNER--NAME/blobs/<sha256>`` holds the file contents, ``snapshots/<commit>/<path>``
links to them (relative symlinks, as ``snapshot_download`` makes), and ``refs/<revision>`` names the
commit. With ``HF_HUB_OFFLINE=1`` (set by the root conftest) ``snapshot_download`` finds the snapshot
through ``refs/`` without any network call.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def add_to_hub_cache(
    cache: Path, repo_id: str, files: Path, *, revision: str = "main", commit: str = COMMIT
) -> Path:
    """Put every file under the folder ``files`` into ``cache`` as dataset ``repo_id`` at ``commit``; return the snapshot folder."""
    storage = cache / f"datasets--{repo_id.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for source in sorted(path for path in files.rglob("*") if path.is_file()):
        data = source.read_bytes()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.exists():
            shutil.copyfile(source, blob)
        link = snapshot / source.relative_to(files)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / revision).write_text(commit)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hub cache that ``huggingface_hub`` uses for this test (its default cache folder is patched)."""
    import huggingface_hub.constants

    cache = tmp_path / "hf_home" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache
