"""The Batch API side of the loopback servers: OpenAI's files and batches, Anthropic's Message Batches.

:class:`FakeBatches` keeps the uploaded files and the batches of one loopback server and answers their
endpoints with the JSON shapes the SDKs read:

- OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``GET /v1/files/{id}`` and
  ``/v1/files/{id}/content``, ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches``,
  ``POST /v1/batches/{id}/cancel``. A batch goes ``validating`` -> ``in_progress`` -> ``completed`` (or
  ``expired``, ``failed``, ``cancelled``); its output file holds the answers, its error file the per-request
  errors and the requests it never ran (``batch_expired``, ``batch_cancelled``).
- Anthropic: ``POST /v1/messages/batches``, ``GET /v1/messages/batches`` (newest first),
  ``GET /v1/messages/batches/{id}``, ``GET /v1/messages/batches/{id}/results`` (JSONL: ``succeeded``,
  ``errored``, ``expired``, ``canceled``), ``POST /v1/messages/batches/{id}/cancel``.

Both lists (``GET /v1/batches``, ``GET /v1/messages/batches``) return the newest batch first, one page.

Scripting (attributes of the server, read when a batch is polled):

- ``batch_polls_to_finish`` (default 1): polls a batch stays in progress before it ends;
- ``batch_latency_s`` (default 0): seconds after its creation before a batch can end (a fixed turnaround; a
  poll before then finds it in progress);
- ``hold_batches``: keep every batch in progress (a test kills its client meanwhile);
- ``expire_batches``: ``{batch number: requests answered before it expires}`` (numbers count from 1 in
  creation order);
- ``fail_batches``: ``{batch number: message}``, the whole batch fails (OpenAI ``failed``; Anthropic: every
  request errored with an ``api_error``);
- ``batch_item_policy(custom_id, body) -> Fault | None``: a per-request error (its status: 400 refused,
  429 or 5xx retryable) instead of the answer.

Requests are answered by the server's responder when their batch ends, so a batch answers exactly what the
same requests would get from the sync endpoint. ``asked`` counts how often each ``custom_id`` was run.
"""

from __future__ import annotations

import collections
import email.parser
import email.policy
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.fakes.llm_servers import Fault, LoopbackLLMServer

__all__ = ["FakeBatch", "FakeBatches"]

DAY_S = 24 * 3600


@dataclass
class FakeBatch:
    """One batch: its requests, its state and (once ended) its results."""

    batch_id: str
    number: int
    items: list[tuple[str, dict]]
    created_at: float
    input_file_id: str | None = None
    metadata: dict | None = None
    status: str = "validating"
    polls: int = 0
    cancelled: bool = False
    ended_at: float | None = None
    output_lines: list[dict] = field(default_factory=list)
    error_lines: list[dict] = field(default_factory=list)
    results: list[dict] = field(default_factory=list)
    output_file_id: str | None = None
    error_file_id: str | None = None
    failure: str | None = None
    counts: collections.Counter = field(default_factory=collections.Counter)


def _iso(timestamp: float | None) -> str | None:
    return (
        None
        if timestamp is None
        else datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")
    )


def parse_multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a ``multipart/form-data`` body: name -> (file name, bytes)."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
    )
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[str(name)] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class FakeBatches:
    """Files and batches of one loopback server (thread-safe; see the module docstring)."""

    def __init__(self, server: LoopbackLLMServer) -> None:
        self.server = server
        self.files: dict[str, bytes] = {}
        self.file_names: dict[str, str] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.asked: collections.Counter[str] = collections.Counter()
        self._lock = threading.RLock()

    # -- routing ---------------------------------------------------------------------------------------
    def handle(
        self, method: str, path: str, body: Any, raw: bytes, headers: dict[str, str]
    ) -> tuple[int, Any, str]:
        """(status, payload, content type) of a batch or file endpoint; 404 for any other path."""
        parts = [part for part in path.split("?")[0].split("/") if part]
        if self.server.protocol == "openai":
            return self._openai(method, parts, body, raw, headers)
        return self._anthropic(method, parts, body)

    def _openai(self, method: str, parts: list[str], body: Any, raw: bytes, headers: dict[str, str]):
        if parts == ["v1", "files"] and method == "POST":
            return self._upload(raw, headers.get("content-type", ""))
        if len(parts) >= 3 and parts[:2] == ["v1", "files"] and method == "GET":
            file_id = parts[2]
            if file_id not in self.files:
                return 404, _openai_error(f"No such File object: {file_id}"), "application/json"
            if parts[3:] == ["content"]:
                return 200, self.files[file_id], "application/octet-stream"
            return 200, self._file_object(file_id), "application/json"
        if parts == ["v1", "batches"] and method == "POST":
            return self._create_openai(body)
        if parts == ["v1", "batches"] and method == "GET":
            data = [self._openai_object(batch) for batch in reversed(list(self.batches.values()))]
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            listing = {"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": False}
            return 200, listing, "application/json"
        if len(parts) >= 3 and parts[:2] == ["v1", "batches"]:
            batch = self.batches.get(parts[2])
            if batch is None:
                return 404, _openai_error(f"No such Batch object: {parts[2]}"), "application/json"
            if parts[3:] == ["cancel"] and method == "POST":
                batch.cancelled = True
            else:
                self._advance(batch)
            return 200, self._openai_object(batch), "application/json"
        return 404, _openai_error(f"unknown path /{'/'.join(parts)}"), "application/json"

    def _anthropic(self, method: str, parts: list[str], body: Any):
        if parts == ["v1", "messages", "batches"] and method == "POST":
            return self._create_anthropic(body)
        if parts == ["v1", "messages", "batches"] and method == "GET":
            data = [self._anthropic_object(batch) for batch in reversed(list(self.batches.values()))]
            first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
            return (
                200,
                {"data": data, "first_id": first, "last_id": last, "has_more": False},
                "application/json",
            )
        if len(parts) >= 4 and parts[:3] == ["v1", "messages", "batches"]:
            batch = self.batches.get(parts[3])
            if batch is None:
                return (
                    404,
                    _anthropic_error("not_found_error", f"batch {parts[3]} not found"),
                    "application/json",
                )
            if parts[4:] == ["results"]:
                if batch.ended_at is None:
                    return (
                        400,
                        _anthropic_error("invalid_request_error", "batch has not ended"),
                        "application/json",
                    )
                payload = "".join(json.dumps(line) + "\n" for line in batch.results).encode("utf-8")
                return 200, payload, "application/binary"
            if parts[4:] == ["cancel"] and method == "POST":
                batch.cancelled = True
            else:
                self._advance(batch)
            return 200, self._anthropic_object(batch), "application/json"
        return (
            404,
            _anthropic_error("not_found_error", f"unknown path /{'/'.join(parts)}"),
            "application/json",
        )

    # -- creating --------------------------------------------------------------------------------------
    def _upload(self, raw: bytes, content_type: str):
        fields = parse_multipart(content_type, raw)
        if "file" not in fields or fields.get("purpose", (None, b""))[1] != b"batch":
            return 400, _openai_error("expected a file with purpose=batch"), "application/json"
        file_name, data = fields["file"]
        file_id = self._new_file(data, file_name or "upload.jsonl")
        return 200, self._file_object(file_id), "application/json"

    def _new_file(self, data: bytes, name: str) -> str:
        with self._lock:
            file_id = f"file-{uuid.uuid4().hex[:24]}"
            self.files[file_id] = data
            self.file_names[file_id] = name
        return file_id

    def _file_object(self, file_id: str) -> dict:
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(self.files[file_id]),
            "created_at": int(time.time()),
            "filename": self.file_names[file_id],
            "purpose": "batch",
            "status": "processed",
        }

    def _new_batch(self, prefix: str, items: list[tuple[str, dict]], **extra: Any) -> FakeBatch:
        with self._lock:
            batch = FakeBatch(
                f"{prefix}{uuid.uuid4().hex[:20]}", len(self.batches) + 1, items, time.time(), **extra
            )
            self.batches[batch.batch_id] = batch
        return batch

    def _create_openai(self, body: Any):
        if not isinstance(body, dict) or body.get("input_file_id") not in self.files:
            return 400, _openai_error("input_file_id is not an uploaded file"), "application/json"
        if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
            return 400, _openai_error("unsupported endpoint or completion window"), "application/json"
        items = []
        for number, line in enumerate(
            self.files[body["input_file_id"]].decode("utf-8").splitlines(), start=1
        ):
            request = json.loads(line)
            if request.get("method") != "POST" or request.get("url") != "/v1/chat/completions":
                return (
                    400,
                    _openai_error(f"line {number}: expected POST /v1/chat/completions"),
                    "application/json",
                )
            items.append((request["custom_id"], request["body"]))
        if len({custom_id for custom_id, _ in items}) != len(items):
            return 400, _openai_error("custom_id values must be unique within a batch"), "application/json"
        batch = self._new_batch(
            "batch_", items, input_file_id=body["input_file_id"], metadata=body.get("metadata")
        )
        return 200, self._openai_object(batch), "application/json"

    def _create_anthropic(self, body: Any):
        if not isinstance(body, dict) or not isinstance(body.get("requests"), list) or not body["requests"]:
            return (
                400,
                _anthropic_error("invalid_request_error", "requests: expected a list"),
                "application/json",
            )
        items = [(request["custom_id"], request["params"]) for request in body["requests"]]
        if len({custom_id for custom_id, _ in items}) != len(items):
            return (
                400,
                _anthropic_error("invalid_request_error", "custom_id must be unique"),
                "application/json",
            )
        batch = self._new_batch("msgbatch_", items, status="in_progress")
        return 200, self._anthropic_object(batch), "application/json"

    # -- running ---------------------------------------------------------------------------------------
    def _advance(self, batch: FakeBatch) -> None:
        """One poll: the batch moves on, and ends once it was polled `batch_polls_to_finish` times."""
        with self._lock:
            if batch.ended_at is not None:
                return
            batch.polls += 1
            if batch.status == "validating":
                batch.status = "in_progress"
            if batch.cancelled:
                self._end(batch, answered=0, final="cancelled")
                return
            if self.server.hold_batches or batch.polls < self.server.batch_polls_to_finish:
                return
            if time.time() < batch.created_at + self.server.batch_latency_s:
                return
            failure = self.server.fail_batches.get(batch.number)
            if failure is not None:
                batch.failure = failure
                self._end(batch, answered=0, final="failed")
                return
            expire_after = self.server.expire_batches.get(batch.number)
            if expire_after is not None:
                self._end(batch, answered=expire_after, final="expired")
                return
            self._end(batch, answered=len(batch.items), final="completed")

    def _end(self, batch: FakeBatch, answered: int, final: str) -> None:
        for position, (custom_id, body) in enumerate(batch.items):
            if position >= answered:
                self._not_run(batch, custom_id, final)
                continue
            self.asked[custom_id] += 1
            policy: Callable[[str, dict], Fault | None] | None = self.server.batch_item_policy
            fault = policy(custom_id, body) if policy is not None else None
            if fault is not None:
                self._item_error(batch, custom_id, fault.status, fault.body or "request failed")
            else:
                self._item_answer(batch, custom_id, body)
        batch.status = final if self.server.protocol == "openai" else "ended"
        batch.ended_at = time.time()
        if self.server.protocol == "openai" and final != "failed":
            if batch.output_lines:
                batch.output_file_id = self._new_file(_jsonl(batch.output_lines), "batch_output.jsonl")
            if batch.error_lines:
                batch.error_file_id = self._new_file(_jsonl(batch.error_lines), "batch_errors.jsonl")

    def _not_run(self, batch: FakeBatch, custom_id: str, final: str) -> None:
        if self.server.protocol == "anthropic":
            if final == "failed":
                self._item_error(batch, custom_id, 500, batch.failure or "batch failed")
                return
            kind = "canceled" if final == "cancelled" else "expired"
            batch.results.append({"custom_id": custom_id, "result": {"type": kind}})
            batch.counts[kind] += 1
            return
        if final == "failed":
            return
        code = "batch_cancelled" if final == "cancelled" else "batch_expired"
        message = "This request could not be executed before the completion window expired."
        batch.error_lines.append(
            {
                "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                "custom_id": custom_id,
                "response": None,
                "error": {"code": code, "message": message},
            }
        )
        batch.counts["failed"] += 1

    def _item_answer(self, batch: FakeBatch, custom_id: str, body: dict) -> None:
        answer = self.server._answer_body(body)
        if self.server.protocol == "anthropic":
            batch.results.append({"custom_id": custom_id, "result": {"type": "succeeded", "message": answer}})
            batch.counts["succeeded"] += 1
            return
        batch.output_lines.append(
            {
                "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                "custom_id": custom_id,
                "response": {"status_code": 200, "request_id": uuid.uuid4().hex[:12], "body": answer},
                "error": None,
            }
        )
        batch.counts["completed"] += 1

    def _item_error(self, batch: FakeBatch, custom_id: str, status: int, message: str) -> None:
        if self.server.protocol == "anthropic":
            kind = {400: "invalid_request_error", 429: "rate_limit_error", 529: "overloaded_error"}.get(
                status, "api_error"
            )
            error = {"type": "error", "error": {"type": kind, "message": message}}
            batch.results.append({"custom_id": custom_id, "result": {"type": "errored", "error": error}})
            batch.counts["errored"] += 1
            return
        batch.error_lines.append(
            {
                "id": f"batch_req_{uuid.uuid4().hex[:12]}",
                "custom_id": custom_id,
                "response": {
                    "status_code": status,
                    "request_id": uuid.uuid4().hex[:12],
                    "body": _openai_error(message),
                },
                "error": None,
            }
        )
        batch.counts["failed"] += 1

    # -- objects ---------------------------------------------------------------------------------------
    def _openai_object(self, batch: FakeBatch) -> dict:
        ended = batch.ended_at is not None
        errors = None
        if batch.failure is not None:
            errors = {
                "object": "list",
                "data": [{"code": "batch_failed", "message": batch.failure, "line": None}],
            }
        return {
            "id": batch.batch_id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "errors": errors,
            "input_file_id": batch.input_file_id,
            "completion_window": "24h",
            "status": batch.status,
            "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "created_at": int(batch.created_at),
            "in_progress_at": int(batch.created_at),
            "expires_at": int(batch.created_at + DAY_S),
            "completed_at": int(batch.ended_at) if ended and batch.status == "completed" else None,
            "expired_at": int(batch.ended_at) if ended and batch.status == "expired" else None,
            "failed_at": int(batch.ended_at) if ended and batch.status == "failed" else None,
            "request_counts": {
                "total": len(batch.items),
                "completed": batch.counts["completed"],
                "failed": batch.counts["failed"],
            },
            "metadata": batch.metadata,
        }

    def _anthropic_object(self, batch: FakeBatch) -> dict:
        ended = batch.ended_at is not None
        processing = 0 if ended else len(batch.items)
        base = self.server.base_url
        return {
            "id": batch.batch_id,
            "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch.cancelled else "in_progress"),
            "request_counts": {
                "processing": processing,
                "succeeded": batch.counts["succeeded"],
                "errored": batch.counts["errored"],
                "canceled": batch.counts["canceled"],
                "expired": batch.counts["expired"],
            },
            "ended_at": _iso(batch.ended_at),
            "created_at": _iso(batch.created_at),
            "expires_at": _iso(batch.created_at + DAY_S),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{base}/v1/messages/batches/{batch.batch_id}/results" if ended else None,
        }


def _jsonl(lines: list[dict]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode("utf-8")


def _openai_error(message: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


def _anthropic_error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
