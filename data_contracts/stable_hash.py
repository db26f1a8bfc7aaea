"""Process-independent hashing for splits, shards and seeds.

Python's ``hash()`` is salted per process, so anything that must come out the same in every
process (a train/test split, a shard assignment, an option order) goes through SHA-256 here.

>>> stable_int("scene0000_00", "options") == stable_int("scene0000_00", "options")
True
>>> stable_split("scene0000_00", 0.0), stable_split("scene0000_00", 1.0)
('train', 'test')
"""

from __future__ import annotations

import hashlib

_DIGITS = 15


def stable_int(*parts: object) -> int:
    """A non-negative integer below ``16**15`` from ``parts`` (joined with a unit separator)."""
    digest = hashlib.sha256("\x1f".join(str(part) for part in parts).encode("utf-8")).hexdigest()
    return int(digest[:_DIGITS], 16)


def stable_fraction(*parts: object) -> float:
    """A number in [0, 1) from ``parts``, uniform over keys."""
    return stable_int(*parts) / 16**_DIGITS


def stable_split(key: str, test_fraction: float, test_name: str = "test") -> str:
    """``test_name`` for about ``test_fraction`` of keys, else ``"train"``."""
    return test_name if stable_fraction(key) < test_fraction else "train"


def stable_bucket(key: str, count: int) -> int:
    """The bucket (0 .. ``count`` - 1) of ``key``, for shard assignment."""
    return stable_int(key) % count
