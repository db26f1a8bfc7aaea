"""A persistent response cache in SQLite, keyed by a content hash of the request.

The key is the SHA-256 of a canonical JSON array of everything that shapes an answer: the
provider, the model, the prompt template's name and version, the rendered system prompt and prompt,
the effective sampling parameters, the JSON schema and output mode, the hashes of the images and the
sample index. API keys, base URLs and request ids are not part of it, and nothing secret is stored.

Each answer is committed on its own as it arrives (WAL journal, so a run killed mid-batch keeps every
answer it already paid for and readers never block the writer). Lookups are batched (`get_many`) so a
fully cached rebuild of many rows is a few indexed queries.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Self

from model_clients.records import LLMRequest, TokenUsage

__all__ = ["CACHE_KEY_VERSION", "CachedResponse", "ResponseCache", "canonical_json", "compute_cache_key"]

logger = logging.getLogger(__name__)

CACHE_KEY_VERSION = 1
"""Bump when the key's recipe changes, so old entries are no longer matched."""

_LOOKUP_CHUNK = 500
_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS responses (
    cache_key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    template_name TEXT NOT NULL,
    template_version TEXT NOT NULL,
    status TEXT NOT NULL,
    raw_text TEXT,
    data_json TEXT,
    error TEXT,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    attempts INTEGER NOT NULL,
    created_at REAL NOT NULL
)
"""


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys (non-JSON values as `str`), the form hashed into cache keys.

    Example:
        >>> canonical_json({"b": 1, "a": [0.5, "x"]})
        '{"a":[0.5,"x"],"b":1}'
    """
    return _KEY_ENCODER.encode(value)


def compute_cache_key(
    provider: str,
    model: str,
    request: LLMRequest,
    parameters: Mapping[str, Any],
    json_mode: str,
    *,
    parameters_json: str | None = None,
    schema_json: str | None = None,
) -> str:
    """The content hash identifying `request` sent to `model` with the effective `parameters`.

    The components are written as one JSON array (the parameters as canonical JSON), which is
    unambiguous, and hashed with SHA-256.

    Args:
        provider (`str`): `"openai"` or `"anthropic"`.
        model (`str`): the model name sent to the API.
        request (`LLMRequest`): the request.
        parameters (`Mapping[str, Any]`): the effective sampling parameters (client defaults merged with
            the request's own), JSON-serialisable.
        json_mode (`str`): the structured-output mode, which changes what is sent.
        parameters_json (`str`, *optional*): `canonical_json(parameters)` when the caller already has it.
        schema_json (`str`, *optional*): `request.schema_json` when the caller already has it (a batch
            sharing one schema object serialises it once).

    Returns:
        `str`: 64 hex characters.

    Example:
        >>> request = LLMRequest("t", "v1", "Name the objects.")
        >>> key = compute_cache_key("openai", "gpt-4o-mini", request, {"temperature": 0.0}, "native")
        >>> key == compute_cache_key("openai", "gpt-4o-mini", request, {"temperature": 0.0}, "native")
        True
        >>> key == compute_cache_key("openai", "gpt-4o-mini", request, {"temperature": 1.0}, "native")
        False
    """
    if parameters_json is None:
        parameters_json = canonical_json(dict(parameters))
    if schema_json is None:
        schema_json = request.schema_json
    document = [
        CACHE_KEY_VERSION,
        provider,
        model,
        request.template_name,
        request.template_version,
        request.system,
        request.prompt,
        parameters_json,
        schema_json,
        request.schema_name,
        json_mode,
        request.image_hashes,
        request.sample_index,
    ]
    return hashlib.sha256(_KEY_ENCODER.encode(document).encode("utf-8")).hexdigest()


class CachedResponse(NamedTuple):
    """One stored answer (a valid one, or one quarantined as invalid after the allowed re-asks)."""

    cache_key: str
    provider: str
    model: str
    template_name: str
    template_version: str
    status: str
    raw_text: str | None
    data: Any
    error: str | None
    usage: TokenUsage
    cost_usd: float
    attempts: int
    created_at: float


class ResponseCache:
    """SQLite store of answers keyed by :func:`compute_cache_key`; safe to share between threads.

    Args:
        path (`str` or `Path`): the database file (parent folders are created), or `":memory:"`.
        busy_timeout_s (`float`, *optional*, defaults to `30.0`): how long a write waits for another
            process holding the write lock.

    Example:
        >>> cache = ResponseCache(":memory:")
        >>> cache.put(CachedResponse("k1", "openai", "gpt-4o-mini", "t", "v1", "ok", '{"a": 1}', {"a": 1},
        ...                          None, TokenUsage(5, 3), 0.0, 1, 0.0))
        >>> cache.get_many(["k1", "k2"])["k1"].data
        {'a': 1}
        >>> cache.close()
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            self.path, timeout=busy_timeout_s, check_same_thread=False, isolation_level=None
        )
        self._connection.execute("PRAGMA journal_mode=WAL")
        self._connection.execute("PRAGMA synchronous=NORMAL")
        self._connection.execute(_SCHEMA_SQL)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._connection.close()

    def __len__(self) -> int:
        with self._lock:
            return self._connection.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    def get_many(self, keys: Iterable[str]) -> dict[str, CachedResponse]:
        """Look up many keys at once; returns the entries found, by key."""
        unique_keys = list(dict.fromkeys(keys))
        found: dict[str, CachedResponse] = {}
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                placeholders = ",".join("?" * len(chunk))
                rows = self._connection.execute(
                    "SELECT cache_key, provider, model, template_name, template_version, status, raw_text,"
                    " data_json, error, prompt_tokens, completion_tokens, cost_usd, attempts, created_at"
                    f" FROM responses WHERE cache_key IN ({placeholders})",
                    chunk,
                ).fetchall()
                for row in rows:
                    found[row[0]] = CachedResponse(
                        cache_key=row[0],
                        provider=row[1],
                        model=row[2],
                        template_name=row[3],
                        template_version=row[4],
                        status=row[5],
                        raw_text=row[6],
                        data=None if row[7] is None else json.loads(row[7]),
                        error=row[8],
                        usage=TokenUsage(row[9], row[10]),
                        cost_usd=row[11],
                        attempts=row[12],
                        created_at=row[13],
                    )
        return found

    def put(self, entry: CachedResponse) -> None:
        """Store (or replace) one answer and commit it at once."""
        data_json = None if entry.data is None else json.dumps(entry.data, ensure_ascii=False)
        with self._lock:
            self._connection.execute(
                "INSERT OR REPLACE INTO responses (cache_key, provider, model, template_name,"
                " template_version, status, raw_text, data_json, error, prompt_tokens, completion_tokens,"
                " cost_usd, attempts, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    entry.cache_key,
                    entry.provider,
                    entry.model,
                    entry.template_name,
                    entry.template_version,
                    entry.status,
                    entry.raw_text,
                    data_json,
                    entry.error,
                    entry.usage.prompt_tokens,
                    entry.usage.completion_tokens,
                    entry.cost_usd,
                    entry.attempts,
                    entry.created_at or time.time(),
                ),
            )

    def delete(self, keys: Iterable[str]) -> int:
        """Remove entries (e.g. to re-ask quarantined ones); returns how many were removed."""
        removed = 0
        unique_keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                cursor = self._connection.execute(
                    f"DELETE FROM responses WHERE cache_key IN ({','.join('?' * len(chunk))})", chunk
                )
                removed += cursor.rowcount
        return removed
