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

__all__ = [
    "CACHE_KEY_VERSION",
    "BatchIntent",
    "BatchJob",
    "CachedResponse",
    "ResponseCache",
    "canonical_json",
    "compute_cache_key",
]

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
_BATCH_SCHEMA_SQL = (
    """
CREATE TABLE IF NOT EXISTS batch_jobs (
    batch_id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    label TEXT NOT NULL,
    requests INTEGER NOT NULL,
    submitted_at REAL NOT NULL,
    collected_at REAL,
    final_status TEXT
)
""",
    """
CREATE TABLE IF NOT EXISTS batch_items (
    batch_id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    PRIMARY KEY (batch_id, cache_key)
)
""",
    "CREATE INDEX IF NOT EXISTS batch_items_by_key ON batch_items (cache_key)",
    """
CREATE TABLE IF NOT EXISTS batch_intents (
    intent_key TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    label TEXT NOT NULL,
    requests INTEGER NOT NULL,
    created_at REAL NOT NULL
)
""",
    """
CREATE TABLE IF NOT EXISTS batch_intent_items (
    intent_key TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    PRIMARY KEY (intent_key, cache_key)
)
""",
    "CREATE INDEX IF NOT EXISTS batch_intent_items_by_key ON batch_intent_items (cache_key)",
    """
CREATE TABLE IF NOT EXISTS batch_outcomes (
    cache_key TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    outcome_json TEXT NOT NULL,
    PRIMARY KEY (cache_key, batch_id)
)
""",
)


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


class BatchJob(NamedTuple):
    """A batch submitted to a provider's Batch API, as the cache records it before polling."""

    batch_id: str
    provider: str
    model: str
    label: str
    requests: int
    submitted_at: float
    collected_at: float | None
    final_status: str | None


class BatchIntent(NamedTuple):
    """A batch about to be created, recorded before the create call with a key generated here.

    Until the batch's id is recorded (:meth:`ResponseCache.record_batch` with the intent's key), a run that
    finds the intent looks for the batch among the provider's recent ones before submitting its requests.
    """

    intent_key: str
    provider: str
    model: str
    label: str
    requests: int
    created_at: float


class ResponseCache:
    """SQLite store of answers keyed by :func:`compute_cache_key`; safe to share between threads.

    Batch mode keeps its book-keeping in the same file, so a killed run resumes from it: the intent of each batch
    before its create call (:meth:`record_intent`), the submitted batches and the cache keys of their requests
    (:meth:`record_batch`, committed before the first poll, the intent dropped in the same transaction), and the
    downloaded outcomes of an ended batch until their requests are read (:meth:`store_outcomes`,
    :meth:`outcomes`).

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
        for statement in _BATCH_SCHEMA_SQL:
            self._connection.execute(statement)

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

    # -- batch mode ------------------------------------------------------------------------------------
    def _transaction(self, statements: Iterable[tuple[str, Any]]) -> None:
        """Run `(sql, parameters)` statements in one transaction (a list of parameter tuples: executemany)."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                for sql, parameters in statements:
                    if isinstance(parameters, list):
                        self._connection.executemany(sql, parameters)
                    else:
                        self._connection.execute(sql, parameters)
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def record_intent(self, intent: BatchIntent, keys: Iterable[str]) -> None:
        """Record a batch about to be created and the cache keys of its requests, in one transaction."""
        self._transaction(
            [
                (
                    "INSERT OR REPLACE INTO batch_intents (intent_key, provider, model, label, requests, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    tuple(intent),
                ),
                (
                    "INSERT OR IGNORE INTO batch_intent_items (intent_key, cache_key) VALUES (?, ?)",
                    [(intent.intent_key, key) for key in keys],
                ),
            ]
        )

    def drop_intent(self, intent_key: str) -> None:
        """Forget an intent (its batch was never created, or was refused)."""
        self._transaction(
            [
                ("DELETE FROM batch_intents WHERE intent_key = ?", (intent_key,)),
                ("DELETE FROM batch_intent_items WHERE intent_key = ?", (intent_key,)),
            ]
        )

    def open_intents(self, keys: Iterable[str], provider: str, model: str) -> dict[BatchIntent, set[str]]:
        """Intents of `provider`/`model` whose batch id was never recorded that hold some of `keys`: intent -> keys."""
        unique_keys = list(dict.fromkeys(keys))
        found: dict[str, set[str]] = {}
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                rows = self._connection.execute(
                    "SELECT items.intent_key, items.cache_key FROM batch_intent_items AS items JOIN batch_intents"
                    " AS intents ON intents.intent_key = items.intent_key WHERE intents.provider = ? AND"
                    f" intents.model = ? AND items.cache_key IN ({','.join('?' * len(chunk))})",
                    [provider, model, *chunk],
                ).fetchall()
                for intent_key, key in rows:
                    found.setdefault(intent_key, set()).add(key)
            intents = {
                row[0]: BatchIntent(*row)
                for row in self._connection.execute(
                    "SELECT intent_key, provider, model, label, requests, created_at FROM batch_intents"
                ).fetchall()
            }
        return {intents[intent_key]: keys for intent_key, keys in found.items() if intent_key in intents}

    def intent_keys(self, intent_key: str) -> list[str]:
        """The cache keys of an intent's requests."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT cache_key FROM batch_intent_items WHERE intent_key = ?", (intent_key,)
            ).fetchall()
        return [row[0] for row in rows]

    def record_batch(self, job: BatchJob, keys: Iterable[str], intent_key: str | None = None) -> None:
        """Record a submitted batch and the cache keys of its requests, and drop its intent, in one transaction."""
        statements: list[tuple[str, Any]] = [
            (
                "INSERT OR REPLACE INTO batch_jobs (batch_id, provider, model, label, requests, submitted_at,"
                " collected_at, final_status) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                tuple(job),
            ),
            (
                "INSERT OR IGNORE INTO batch_items (batch_id, cache_key) VALUES (?, ?)",
                [(job.batch_id, key) for key in keys],
            ),
        ]
        if intent_key is not None:
            statements += [
                ("DELETE FROM batch_intents WHERE intent_key = ?", (intent_key,)),
                ("DELETE FROM batch_intent_items WHERE intent_key = ?", (intent_key,)),
            ]
        self._transaction(statements)

    def known_batch_ids(self, batch_ids: Iterable[str]) -> set[str]:
        """The ids among `batch_ids` that are recorded."""
        unique = list(dict.fromkeys(batch_ids))
        known: set[str] = set()
        with self._lock:
            for start in range(0, len(unique), _LOOKUP_CHUNK):
                chunk = unique[start : start + _LOOKUP_CHUNK]
                rows = self._connection.execute(
                    f"SELECT batch_id FROM batch_jobs WHERE batch_id IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                known.update(row[0] for row in rows)
        return known

    def open_batches(self, keys: Iterable[str], provider: str, model: str) -> dict[str, set[str]]:
        """Batches of `provider`/`model` submitted and not yet collected that hold some of `keys`: id -> those keys."""
        unique_keys = list(dict.fromkeys(keys))
        found: dict[str, set[str]] = {}
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                rows = self._connection.execute(
                    "SELECT items.batch_id, items.cache_key FROM batch_items AS items JOIN batch_jobs AS jobs"
                    " ON jobs.batch_id = items.batch_id WHERE jobs.collected_at IS NULL AND jobs.provider = ?"
                    f" AND jobs.model = ? AND items.cache_key IN ({','.join('?' * len(chunk))})",
                    [provider, model, *chunk],
                ).fetchall()
                for batch_id, key in rows:
                    found.setdefault(batch_id, set()).add(key)
        return found

    def batch_job(self, batch_id: str) -> BatchJob | None:
        """The record of one batch."""
        with self._lock:
            row = self._connection.execute(
                "SELECT batch_id, provider, model, label, requests, submitted_at, collected_at, final_status"
                " FROM batch_jobs WHERE batch_id = ?",
                (batch_id,),
            ).fetchone()
        return None if row is None else BatchJob(*row)

    def batch_jobs(self) -> list[BatchJob]:
        """Every recorded batch, oldest first."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT batch_id, provider, model, label, requests, submitted_at, collected_at, final_status"
                " FROM batch_jobs ORDER BY submitted_at"
            ).fetchall()
        return [BatchJob(*row) for row in rows]

    def batch_keys(self, batch_id: str) -> list[str]:
        """The cache keys of a batch's requests."""
        with self._lock:
            rows = self._connection.execute(
                "SELECT cache_key FROM batch_items WHERE batch_id = ?", (batch_id,)
            ).fetchall()
        return [row[0] for row in rows]

    def store_outcomes(self, batch_id: str, outcomes: Iterable[tuple[str, str]], final_status: str) -> None:
        """Keep an ended batch's outcomes (`(cache_key, outcome_json)`) and mark it collected, in one transaction."""
        with self._lock:
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                self._connection.executemany(
                    "INSERT OR REPLACE INTO batch_outcomes (cache_key, batch_id, outcome_json) VALUES (?, ?, ?)",
                    [(key, batch_id, text) for key, text in outcomes],
                )
                self._connection.execute(
                    "UPDATE batch_jobs SET collected_at = ?, final_status = ? WHERE batch_id = ?",
                    (time.time(), final_status, batch_id),
                )
            except BaseException:
                self._connection.execute("ROLLBACK")
                raise
            self._connection.execute("COMMIT")

    def outcomes(self, keys: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
        """Downloaded outcomes not yet read, by cache key: `[(batch_id, outcome_json), ...]`."""
        unique_keys = list(dict.fromkeys(keys))
        found: dict[str, list[tuple[str, str]]] = {}
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                rows = self._connection.execute(
                    "SELECT cache_key, batch_id, outcome_json FROM batch_outcomes"
                    f" WHERE cache_key IN ({','.join('?' * len(chunk))})",
                    chunk,
                ).fetchall()
                for key, batch_id, text in rows:
                    found.setdefault(key, []).append((batch_id, text))
        return found

    def delete_outcomes(self, keys: Iterable[str]) -> None:
        """Forget the outcomes of requests that were read (their answers are in the cache now)."""
        unique_keys = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique_keys), _LOOKUP_CHUNK):
                chunk = unique_keys[start : start + _LOOKUP_CHUNK]
                self._connection.execute(
                    f"DELETE FROM batch_outcomes WHERE cache_key IN ({','.join('?' * len(chunk))})", chunk
                )

    def completion_stats(self, provider: str, model: str, template_name: str) -> tuple[int, int, int]:
        """(answers, API calls, completion tokens) of the good answers of one prompt template and model."""
        with self._lock:
            row = self._connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(attempts), 0), COALESCE(SUM(completion_tokens), 0) FROM responses"
                " WHERE provider = ? AND model = ? AND template_name = ? AND status = 'ok' AND attempts > 0",
                (provider, model, template_name),
            ).fetchone()
        return int(row[0]), int(row[1]), int(row[2])
