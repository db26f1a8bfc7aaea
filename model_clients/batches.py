"""The providers' Batch APIs: submit many requests at once at the batch price, poll, read the results.

Two adapters share one small interface (:class:`BatchAPI`), each on top of the official SDK client of its
chat adapter (:mod:`model_clients.providers`), whose request bodies they send unchanged:

- :class:`OpenAIBatchAPI`: OpenAI's Batch API. The requests become a JSONL file (one
  ``{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`` line each) uploaded with
  ``client.files.create(purpose="batch")``; ``client.batches.create`` starts the batch, ``retrieve`` polls
  it (``validating``, ``in_progress``, ``finalizing``, then ``completed``, ``expired``, ``failed`` or
  ``cancelled``), and ``client.files.content`` reads its output file (answers) and error file (per-request
  errors, and the requests an expired or cancelled batch never ran). At most 50,000 requests and 200 MB
  per batch.
- :class:`AnthropicBatchAPI`: Anthropic's Message Batches. ``client.messages.batches.create`` takes the
  requests (``{"custom_id", "params"}``), ``retrieve`` polls (``in_progress``, ``canceling``, ``ended``), and
  ``results`` streams one line per request: ``succeeded`` (the message), ``errored``, ``expired`` or
  ``canceled``. At most 100,000 requests and 256 MB per batch.

A batch is created in two steps (:meth:`BatchAPI.prepare`, then :meth:`BatchAPI.create`) so that the caller can
record its intent first, and :meth:`BatchAPI.recent_batches` lists what the provider holds, so that a batch
created and never recorded (a kill, or a create call whose answer was lost) is found instead of paid again:
OpenAI's batch carries the intent's key in its ``metadata``; Anthropic's Message Batches take no metadata, so
a batch is known there by its creation time and its number of requests, and confirmed by its results'
``custom_id`` values.

The ``custom_id`` of a request is its cache key (64 hex characters, valid for both providers), so an
answer goes back to its request whatever the order of the result lines. Every outcome of a request is an
:class:`ItemOutcome`: an answer body to read with the chat adapter's ``read_body``, or an error that is
worth asking again (expired, cancelled, 429, 5xx, missing) or not (the API refused the request). SDK
failures of the batch calls themselves are translated like those of a chat call
(:class:`~model_clients.providers.TransientProviderError`, :class:`~model_clients.providers.PermanentProviderError`),
so the client retries them with its backoff.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from model_clients.providers import (
    RETRYABLE_STATUS_CODES,
    AnthropicMessagesProvider,
    OpenAIChatProvider,
    PermanentProviderError,
    TransientProviderError,
    _error_message,
    _status_reason,
    redact,
    sdk_call,
)

__all__ = [
    "BATCH_LIMITS",
    "INTENT_METADATA_KEY",
    "AnthropicBatchAPI",
    "BatchAPI",
    "BatchState",
    "ItemOutcome",
    "OpenAIBatchAPI",
    "RemoteBatch",
    "build_batch_api",
]

logger = logging.getLogger(__name__)

BATCH_LIMITS: Mapping[str, tuple[int, int]] = {
    "openai": (50_000, 200 * 1000 * 1000),
    "anthropic": (100_000, 256 * 1000 * 1000),
}
"""(requests, bytes) per batch of each provider."""
TRANSFER_TIMEOUT_S = 900.0
"""Timeout of the calls that move a whole batch (upload, create with the requests, results download): up to
hundreds of megabytes, far longer than one chat call's ``timeout_s``."""
BATCH_BYTES_MARGIN = 0.95
"""Share of a provider's byte limit a batch is filled to (JSON framing varies a little)."""
INTENT_METADATA_KEY = "submission_key"
"""The ``metadata`` entry of an OpenAI batch holding the client-generated key of its submission."""
LIST_PAGE_SIZE = 100

SUCCEEDED, ERRORED, RETRYABLE = "succeeded", "errored", "retryable"
ANTHROPIC_ERROR_STATUS: Mapping[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""The HTTP status of each Anthropic error type (an errored batch request carries the type only)."""


@dataclass(frozen=True)
class BatchState:
    """What a poll of one batch says.

    Attributes:
        batch_id (`str`): the provider's id.
        status (`str`): the provider's own status word.
        ended (`bool`): processing is over; the results can be read.
        total, completed, failed (`int`): request counts so far (Anthropic reports them per request
            once they are processed; OpenAI once the batch runs).
        created_at, expires_at (`float`): Unix times (None when unknown).
        error (`str` or `None`): why the whole batch failed, when it did.
    """

    batch_id: str
    status: str
    ended: bool
    total: int = 0
    completed: int = 0
    failed: int = 0
    created_at: float | None = None
    expires_at: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class RemoteBatch:
    """A batch as the provider's list of recent batches shows it.

    Attributes:
        batch_id (`str`): the provider's id.
        created_at (`float`): Unix time of its creation.
        requests (`int`): its number of requests (0 while the provider has not counted them yet).
        intent_key (`str` or `None`): the submission key in its metadata (OpenAI; None for Anthropic).
    """

    batch_id: str
    created_at: float
    requests: int
    intent_key: str | None = None


@dataclass(frozen=True)
class ItemOutcome:
    """The outcome of one request of a batch.

    Attributes:
        custom_id (`str`): the request's cache key.
        kind (`str`): ``succeeded`` (`body` holds the answer), ``errored`` (the API refused the request:
            not asked again) or ``retryable`` (expired, cancelled, 429, 5xx: asked again once).
        body (`dict` or `None`): the chat completion (OpenAI) or message (Anthropic) JSON.
        error (`str` or `None`): the reason, for the two error kinds.
        ran (`bool`): the provider ran the request (an answer or an error of its own); False for a request an
            expired, cancelled or failed batch never ran, which is no attempt.
    """

    custom_id: str
    kind: str
    body: Mapping[str, Any] | None = None
    error: str | None = None
    ran: bool = True

    def to_json(self) -> str:
        """The outcome as JSON (kept in the cache until its request is read)."""
        return json.dumps(
            {"kind": self.kind, "body": self.body, "error": self.error, "ran": self.ran}, ensure_ascii=False
        )

    @classmethod
    def from_json(cls, custom_id: str, text: str) -> ItemOutcome:
        value = json.loads(text)
        return cls(custom_id, value["kind"], value.get("body"), value.get("error"), value.get("ran", True))


class BatchAPI(Protocol):
    """The interface of a batch adapter."""

    name: str
    max_requests: int
    max_bytes: int
    lists_intent_keys: bool
    """The provider keeps a batch's submission key (:data:`INTENT_METADATA_KEY`), so a lost batch is found by it."""

    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        """One request as submitted (its size counts toward the byte limit)."""
        ...

    def prepare(self, lines: Sequence[bytes], label: str) -> Any:
        """What :meth:`create` sends (OpenAI: the uploaded input file's id; not billed)."""
        ...

    def create(self, prepared: Any, label: str, intent_key: str) -> str:
        """Create the batch (the billed step), tagged with `intent_key` where the provider keeps it; its id."""
        ...

    def recent_batches(self, since: float) -> list[RemoteBatch]:
        """The provider's batches created at or after `since` (Unix time), newest first."""
        ...

    def poll(self, batch_id: str) -> BatchState:
        """The batch's state now."""
        ...

    def results(self, batch_id: str, state: BatchState) -> Iterator[ItemOutcome]:
        """The outcome of every request the batch reports (an ended batch)."""
        ...


def _timestamp(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _status_outcome(custom_id: str, status_code: int, message: str, secrets: Sequence[str]) -> ItemOutcome:
    reason = _status_reason(status_code, message, secrets)
    retryable = status_code in RETRYABLE_STATUS_CODES or status_code >= 500
    return ItemOutcome(custom_id, RETRYABLE if retryable else ERRORED, None, reason)


class OpenAIBatchAPI:
    """OpenAI's Batch API on the SDK client of an :class:`OpenAIChatProvider` (JSONL file in, files out).

    Args:
        chat (`OpenAIChatProvider`): the chat adapter (its SDK client and its request bodies).
        completion_window (`str`, *optional*, defaults to ``"24h"``): the batch's completion window.
    """

    name = "openai"
    endpoint = "/v1/chat/completions"
    lists_intent_keys = True

    def __init__(self, chat: OpenAIChatProvider, completion_window: str = "24h") -> None:
        self.chat = chat
        self.completion_window = completion_window
        self.max_requests, self.max_bytes = BATCH_LIMITS["openai"]
        self._secrets = chat.secrets

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        import openai

        return sdk_call(openai, self._secrets, function, *args, **kwargs)

    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        line = {"custom_id": custom_id, "method": "POST", "url": self.endpoint, "body": body}
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"

    def prepare(self, lines: Sequence[bytes], label: str) -> str:
        uploaded = self._call(
            self.chat.sdk.files.create,
            file=(f"{label}.jsonl", b"".join(lines), "application/jsonl"),
            purpose="batch",
            timeout=TRANSFER_TIMEOUT_S,
        )
        return str(uploaded.id)

    def create(self, prepared: str, label: str, intent_key: str) -> str:
        batch = self._call(
            self.chat.sdk.batches.create,
            input_file_id=prepared,
            endpoint=self.endpoint,
            completion_window=self.completion_window,
            metadata={"label": label[:500], INTENT_METADATA_KEY: intent_key},
        )
        return str(batch.id)

    def recent_batches(self, since: float) -> list[RemoteBatch]:
        found: list[RemoteBatch] = []
        page = self._call(self.chat.sdk.batches.list, limit=LIST_PAGE_SIZE)
        while True:
            for batch in page.data:
                created = _timestamp(batch.created_at) or 0.0
                if created < since:
                    return found  # newest first: the rest is older
                counts = batch.request_counts
                metadata = batch.metadata or {}
                found.append(
                    RemoteBatch(
                        str(batch.id),
                        created,
                        int(getattr(counts, "total", 0) or 0),
                        metadata.get(INTENT_METADATA_KEY),
                    )
                )
            if not page.has_next_page():
                return found
            page = self._call(page.get_next_page)

    def poll(self, batch_id: str) -> BatchState:
        batch = self._call(self.chat.sdk.batches.retrieve, batch_id)
        counts = batch.request_counts
        status = str(batch.status)
        error = None
        if status == "failed":
            messages = [
                f"{item.code}: {item.message}" if item.code else str(item.message)
                for item in ((batch.errors.data or []) if batch.errors is not None else [])
            ]
            error = redact("; ".join(messages) or "the batch failed", self._secrets)
        return BatchState(
            batch_id=batch_id,
            status=status,
            ended=status in ("completed", "expired", "failed", "cancelled"),
            total=int(getattr(counts, "total", 0) or 0),
            completed=int(getattr(counts, "completed", 0) or 0),
            failed=int(getattr(counts, "failed", 0) or 0),
            created_at=_timestamp(batch.created_at),
            expires_at=_timestamp(batch.expires_at),
            error=error,
        )

    def _file_lines(self, file_id: str | None) -> Iterator[Mapping[str, Any]]:
        if not file_id:
            return
        content = self._call(self.chat.sdk.files.content, file_id, timeout=TRANSFER_TIMEOUT_S)
        for number, line in enumerate(content.text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError:
                logger.warning(
                    "line %d of batch file %s is not JSON; its request is asked again", number, file_id
                )
                continue
            if isinstance(value, Mapping) and isinstance(value.get("custom_id"), str):
                yield value

    def results(self, batch_id: str, state: BatchState) -> Iterator[ItemOutcome]:
        batch = self._call(self.chat.sdk.batches.retrieve, batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            for line in self._file_lines(file_id):
                yield self._outcome(line)

    def _outcome(self, line: Mapping[str, Any]) -> ItemOutcome:
        custom_id = line["custom_id"]
        response = line.get("response")
        if isinstance(response, Mapping) and response.get("status_code") is not None:
            status_code = int(response["status_code"])
            body = response.get("body")
            if status_code == 200 and isinstance(body, Mapping):
                return ItemOutcome(custom_id, SUCCEEDED, body)
            # As the SDK does for a sync call: the error object of the body is the error's body.
            error = body.get("error", body) if isinstance(body, Mapping) else None
            message = _error_message(_BodyError(error)) if error else f"status {status_code}"
            return _status_outcome(custom_id, status_code, message, self._secrets)
        error = line.get("error")
        if isinstance(error, Mapping):
            code = str(error.get("code") or "error")
            message = redact(f"{code}: {error.get('message') or ''}".strip(), self._secrets)
            return ItemOutcome(custom_id, RETRYABLE, None, f"batch item not run ({message})", ran=False)
        return ItemOutcome(
            custom_id, RETRYABLE, None, "batch item has neither a response nor an error", ran=False
        )


class _BodyError:
    """Adapts a JSON error body to :func:`model_clients.providers._error_message`."""

    def __init__(self, body: Any) -> None:
        self.body = body


class AnthropicBatchAPI:
    """Anthropic's Message Batches on the SDK client of an :class:`AnthropicMessagesProvider`.

    Args:
        chat (`AnthropicMessagesProvider`): the chat adapter (its SDK client and its request bodies).
    """

    name = "anthropic"
    lists_intent_keys = False

    def __init__(self, chat: AnthropicMessagesProvider) -> None:
        self.chat = chat
        self.max_requests, self.max_bytes = BATCH_LIMITS["anthropic"]
        self._secrets = chat.secrets

    def _call(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        import anthropic

        try:
            return sdk_call(anthropic, self._secrets, function, *args, **kwargs)
        except anthropic.AnthropicError as error:  # e.g. results asked of a batch without a results URL
            raise TransientProviderError(redact(str(error), self._secrets)) from None

    def encode(self, custom_id: str, body: Mapping[str, Any]) -> bytes:
        return json.dumps(
            {"custom_id": custom_id, "params": body}, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")

    def prepare(self, lines: Sequence[bytes], label: str) -> list[Any]:
        return [json.loads(line) for line in lines]

    def create(self, prepared: list[Any], label: str, intent_key: str) -> str:
        # Message Batches take no metadata: an unrecorded batch is known by its time and size (recent_batches).
        batch = self._call(
            self.chat.sdk.messages.batches.create, requests=prepared, timeout=TRANSFER_TIMEOUT_S
        )
        return str(batch.id)

    def recent_batches(self, since: float) -> list[RemoteBatch]:
        found: list[RemoteBatch] = []
        page = self._call(self.chat.sdk.messages.batches.list, limit=LIST_PAGE_SIZE)
        while True:
            for batch in page.data:
                created = _timestamp(batch.created_at) or 0.0
                if created < since:
                    return found  # newest first: the rest is older
                counts = batch.request_counts
                total = sum(
                    int(getattr(counts, name, 0) or 0)
                    for name in ("processing", "succeeded", "errored", "expired", "canceled")
                )
                found.append(RemoteBatch(str(batch.id), created, total))
            if not page.has_next_page():
                return found
            page = self._call(page.get_next_page)

    def poll(self, batch_id: str) -> BatchState:
        batch = self._call(self.chat.sdk.messages.batches.retrieve, batch_id)
        counts = batch.request_counts
        done = sum(
            int(getattr(counts, name, 0) or 0) for name in ("succeeded", "errored", "expired", "canceled")
        )
        processing = int(getattr(counts, "processing", 0) or 0)
        failed = sum(int(getattr(counts, name, 0) or 0) for name in ("errored", "expired", "canceled"))
        return BatchState(
            batch_id=batch_id,
            status=str(batch.processing_status),
            ended=batch.processing_status == "ended",
            total=done + processing,
            completed=done - failed,
            failed=failed,
            created_at=_timestamp(batch.created_at),
            expires_at=_timestamp(batch.expires_at),
        )

    def results(self, batch_id: str, state: BatchState) -> Iterator[ItemOutcome]:
        import httpx2  # the SDK's HTTP client: a read that fails mid-stream raises its errors, not the SDK's

        decoder = self._call(self.chat.sdk.messages.batches.results, batch_id, timeout=TRANSFER_TIMEOUT_S)
        try:
            for line in decoder:
                yield self._outcome(line)
        except httpx2.HTTPError as error:
            raise TransientProviderError(
                f"results of batch {batch_id} cut off: {type(error).__name__}"
            ) from None
        finally:
            decoder.close()

    def _outcome(self, line: Any) -> ItemOutcome:
        custom_id = str(line.custom_id)
        result = line.result
        kind = getattr(result, "type", None)
        if kind == "succeeded":
            return ItemOutcome(custom_id, SUCCEEDED, result.message.model_dump(mode="json"))
        if kind == "errored":
            error = getattr(getattr(result, "error", None), "error", None)
            error_type = str(getattr(error, "type", "") or "api_error")
            message = f"{error_type}: {getattr(error, 'message', '') or ''}"
            status_code = ANTHROPIC_ERROR_STATUS.get(error_type, 500)
            return _status_outcome(custom_id, status_code, message, self._secrets)
        return ItemOutcome(custom_id, RETRYABLE, None, f"batch item not run ({kind})", ran=False)


def build_batch_api(chat: Any, completion_window: str = "24h") -> BatchAPI:
    """The batch adapter of a chat adapter (`PermanentProviderError` for an adapter without a Batch API)."""
    if isinstance(chat, OpenAIChatProvider):
        return OpenAIBatchAPI(chat, completion_window)
    if isinstance(chat, AnthropicMessagesProvider):
        return AnthropicBatchAPI(chat)
    raise PermanentProviderError(
        f"batch mode needs the openai or anthropic adapter, not {type(chat).__name__}"
    )
