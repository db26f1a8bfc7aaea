"""Loopback HTTP servers that speak the OpenAI chat-completions and Anthropic Messages protocols.

The real `openai` and `anthropic` SDK clients talk to these servers over TCP on 127.0.0.1, so the
whole client layer (HTTP, parsing, retries, cache) is exercised without network or keys.

- Answers come from a pluggable *responder*: a function `request_json -> str | dict | list` (text, or a
  JSON value that is serialised, or given as the tool input when an Anthropic request forces a tool).
  The default answers a schema-shaped example (:func:`schema_example`) when a schema was requested,
  else `"ok"`. Helpers read what a responder needs: :func:`request_text`, :func:`request_images`,
  :func:`request_schema`.
- Faults are queued (:meth:`LoopbackLLMServer.queue_faults`, FIFO, one per request) or chosen by a
  `fault_policy(recorded_request, hit_number) -> Fault | None`: 429 with `Retry-After`, 500 (or any
  status), a stall longer than the client's timeout, a truncated body, a non-JSON body, and an error
  that echoes the received API key (to prove the client redacts it).
- `latency_s` delays every answer; `billing_factor` scales the prompt tokens billed; `requests` records
  every hit (path, method, headers, body, time, fault); `max_in_flight` is the highest number of requests
  handled at once.
- The Batch APIs: OpenAI's files and batches, Anthropic's Message Batches (:mod:`tests.fakes.batch_protocol`,
  scripted through `batch_polls_to_finish`, `batch_latency_s`, `hold_batches`, `expire_batches`,
  `fail_batches` and `batch_item_policy`); batch requests are answered by the same responder. A
  `Fault.lost_response` on a create call creates the batch and drops the answer.
- Usage is reported the way the providers bill (:mod:`tests.fakes.token_counts`): prompt tokens of the
  text, the chat format, the schema or tools, and the images from their pixel size.

Pytest fixtures (`openai_server`, `anthropic_server`, `llm_server_factory`) are defined here; register
them for the whole suite in `tests/conftest.py` with::

    from tests.fakes.llm_servers import anthropic_server, llm_server_factory, openai_server  # noqa: F401

Run as a script to serve from a separate process (`benchmarks/bench_llm.py` and
`benchmarks/bench_phrases.py` start it by path)::

    python tests/fakes/llm_servers.py --protocol openai --latency 0.2

It prints the port on the first line of stdout and serves until stdin closes; then it prints one JSON line
with every batch it ran (id, number of requests, creation and end times). `--batch-latency S` gives every batch
a fixed turnaround; `--responder letters` answers schema-less requests with a letter (a pass@2 judge).
"""

from __future__ import annotations

import argparse
import base64
import collections
import hashlib
import json
import logging
import socket
import socketserver
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import pytest

if not __package__:  # run as a script (the benchmarks start it by path): make `tests` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.fakes.batch_protocol import FakeBatches  # noqa: E402
from tests.fakes.token_counts import anthropic_prompt_tokens, openai_prompt_tokens  # noqa: E402

if TYPE_CHECKING:
    from model_clients import LLMClient

__all__ = [
    "Fault",
    "LoopbackLLMServer",
    "hide_cached_answers",
    "RecordedRequest",
    "anthropic_server",
    "llm_server_factory",
    "openai_server",
    "request_images",
    "request_schema",
    "request_text",
    "schema_example",
]

logger = logging.getLogger(__name__)

Responder = Callable[[dict], Any]


@dataclass(frozen=True)
class Fault:
    """A misbehaviour for one request; build them with the class methods.

    Example:
        >>> Fault.rate_limit(retry_after_s=0.5).status
        429
    """

    kind: str
    status: int = 200
    retry_after_s: float | None = None
    delay_s: float = 0.0
    body: str = ""
    content_type: str = "application/json"

    @classmethod
    def rate_limit(cls, retry_after_s: float | None = 1.0) -> Fault:
        """HTTP 429 with a `Retry-After` header (seconds, may be fractional)."""
        return cls("rate_limit", status=429, retry_after_s=retry_after_s)

    @classmethod
    def server_error(cls, status: int = 500, retry_after_s: float | None = None) -> Fault:
        """An HTTP 5xx (500 by default; 529 is Anthropic's "overloaded")."""
        return cls("server_error", status=status, retry_after_s=retry_after_s)

    @classmethod
    def http_error(cls, status: int, message: str = "request refused") -> Fault:
        """Any HTTP error status with a provider-shaped JSON error body."""
        return cls("http_error", status=status, body=message)

    @classmethod
    def echo_key_error(cls, status: int = 401) -> Fault:
        """An error whose message repeats the API key the client sent (as some gateways do)."""
        return cls("echo_key_error", status=status)

    @classmethod
    def timeout(cls, delay_s: float = 2.0) -> Fault:
        """Stall `delay_s` before answering (set it longer than the client's timeout)."""
        return cls("timeout", delay_s=delay_s)

    @classmethod
    def lost_response(cls, delay_s: float = 0.0) -> Fault:
        """Handle the request (a batch is created), then wait `delay_s` and close the connection without an answer:
        the provider accepted the call and its answer never arrived (a timeout, a kill while waiting)."""
        return cls("lost_response", delay_s=delay_s)

    @classmethod
    def truncated(cls) -> Fault:
        """A 200 whose body stops halfway (the connection closes before `Content-Length` bytes)."""
        return cls("truncated")

    @classmethod
    def non_json(cls, content_type: str = "text/html") -> Fault:
        """A 200 whose body is not JSON (an HTML error page by default)."""
        return cls("non_json", body="<html><body>502 Bad Gateway</body></html>", content_type=content_type)


@dataclass
class RecordedRequest:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: dict | None
    received_at: float
    fault: str | None = None
    method: str = "POST"


def schema_example(schema: Any) -> Any:
    """A small value that satisfies a JSON schema (first enum value, required properties, min items...).

    Example:
        >>> schema_example({"type": "object", "required": ["phrases"],
        ...                 "properties": {"phrases": {"type": "array", "items": {"type": "string"}}}})
        {'phrases': ['text']}
    """
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        if schema.get(combinator):
            return schema_example(schema[combinator][0])
    schema_type = schema.get("type", "object")
    if isinstance(schema_type, list):
        schema_type = next((name for name in schema_type if name != "null"), "null")
    if schema_type == "object":
        properties = schema.get("properties", {})
        return {
            name: schema_example(properties.get(name, {}))
            for name in schema.get("required", list(properties))
        }
    if schema_type == "array":
        items = [
            schema_example(schema.get("items", {"type": "string"}))
            for _ in range(max(schema.get("minItems", 1), 1))
        ]
        # Distinct strings, as a list of options or phrases holds.
        return [f"{item} {n + 1}" if n and isinstance(item, str) else item for n, item in enumerate(items)]
    if schema_type == "string":
        return "text" + "x" * max(schema.get("minLength", 0) - 4, 0)
    if schema_type == "integer":
        return int(schema.get("minimum", 1))
    if schema_type == "number":
        return float(schema.get("minimum", 0.5))
    if schema_type == "boolean":
        return True
    return None


def _content_blocks(body: dict) -> Iterator[dict]:
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            yield {"type": "text", "text": content}
        elif isinstance(content, list):
            yield from content


def request_text(body: dict) -> str:
    """The user text of a request (either protocol), blocks joined by newlines.

    Example:
        >>> request_text({"messages": [{"role": "user", "content": "Where is the cup?"}]})
        'Where is the cup?'
    """
    return "\n".join(block.get("text", "") for block in _content_blocks(body) if block.get("type") == "text")


def request_images(body: dict) -> list[bytes]:
    """The images of a request, decoded (OpenAI `data:` URLs or Anthropic base64 blocks)."""
    images: list[bytes] = []
    for block in _content_blocks(body):
        if block.get("type") == "image_url":
            url = block["image_url"]["url"]
            images.append(base64.b64decode(url.split(",", 1)[1]))
        elif block.get("type") == "image":
            images.append(base64.b64decode(block["source"]["data"]))
    return images


def request_schema(body: dict) -> dict | None:
    """The JSON schema a request asks for: OpenAI `response_format.json_schema.schema` or the forced tool's `input_schema`."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"].get("schema")
    tool_choice = body.get("tool_choice") or {}
    for tool in body.get("tools", []):
        if tool.get("name") == tool_choice.get("name"):
            return tool.get("input_schema")
    return None


def default_responder(body: dict) -> Any:
    """Answer a schema-shaped example when a schema was requested, else `"ok"`."""
    schema = request_schema(body)
    return schema_example(schema) if schema is not None else "ok"


def letter_responder(body: dict) -> Any:
    """A schema-shaped example when a schema was requested, else a letter, A or B, from a hash of the request's
    messages (a multiple-choice judge that is right about half the time)."""
    schema = request_schema(body)
    if schema is not None:
        return schema_example(schema)
    digest = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode("utf-8")).digest()
    return "AB"[digest[0] % 2]


RESPONDERS: dict[str, Responder] = {"default": default_responder, "letters": letter_responder}
"""The responders the script serves with (``--responder``)."""


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


class LoopbackLLMServer:
    """A threaded HTTP server on 127.0.0.1 speaking `protocol` (`"openai"` or `"anthropic"`).

    Args:
        protocol (`str`): `"openai"` (`POST /v1/chat/completions`) or `"anthropic"` (`POST /v1/messages`).
        responder (`Callable[[dict], Any]`, *optional*): request JSON -> answer content.
        latency_s (`float`, *optional*, defaults to `0.0`): delay before every answer.
        api_key (`str`, *optional*): when set, requests must carry it (`Authorization: Bearer` for
            openai, `x-api-key` for anthropic) or get a 401 that does not repeat it.

    Example:
        >>> with LoopbackLLMServer("openai") as server:
        ...     server.base_url.startswith("http://127.0.0.1:")
        True
    """

    def __init__(
        self,
        protocol: str,
        responder: Responder | None = None,
        latency_s: float = 0.0,
        api_key: str | None = None,
    ) -> None:
        if protocol not in ("openai", "anthropic"):
            raise ValueError(f"protocol must be 'openai' or 'anthropic', got {protocol!r}")
        self.protocol = protocol
        self.responder: Responder = responder or default_responder
        self.latency_s = latency_s
        self.api_key = api_key
        self.fault_policy: Callable[[RecordedRequest, int], Fault | None] | None = None
        self.billing_factor = 1.0
        """Prompt tokens billed over those counted (above 1: a provider billing more than any estimate foresaw)."""
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        # Batch API scripting (see tests/fakes/batch_protocol.py).
        self.batch_polls_to_finish = 1
        self.batch_latency_s = 0.0
        self.hold_batches = False
        self.expire_batches: dict[int, int] = {}
        self.fail_batches: dict[int, str] = {}
        self.batch_item_policy: Callable[[str, dict], Fault | None] | None = None
        self.batches = FakeBatches(self)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> LoopbackLLMServer:
        """Bind a free port and serve in a background thread."""
        httpd = _LoopbackHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What to pass as the SDK client's `base_url`."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.protocol == "openai" else root

    # -- scripting -------------------------------------------------------------------------------
    def queue_faults(self, *faults: Fault) -> None:
        """Make the next requests misbehave, one fault each, in order."""
        with self._lock:
            self._faults.extend(faults)

    def reset(self) -> None:
        """Forget recorded requests, queued faults and the in-flight maximum."""
        with self._lock:
            self.requests.clear()
            self._faults.clear()
            self.max_in_flight = 0

    @property
    def hits(self) -> int:
        """Requests received so far."""
        with self._lock:
            return len(self.requests)

    def calls(self, path_suffix: str, method: str | None = None) -> int:
        """Recorded requests whose path ends with `path_suffix` (e.g. ``"/chat/completions"``, ``"/batches"``)."""
        with self._lock:
            return sum(
                1
                for recorded in self.requests
                if recorded.path.split("?")[0].endswith(path_suffix)
                and (method is None or recorded.method == method)
            )

    def texts(self) -> list[str]:
        """The user text of every recorded request, in arrival order."""
        with self._lock:
            return [request_text(recorded.body or {}) for recorded in self.requests]

    # -- request handling (called from handler threads) ------------------------------------------
    def _admit(self, recorded: RecordedRequest) -> Fault | None:
        with self._lock:
            self.requests.append(recorded)
            hit_number = len(self.requests)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            fault = self._faults.popleft() if self._faults else None
        if fault is None and self.fault_policy is not None:
            fault = self.fault_policy(recorded, hit_number)
        recorded.fault = fault.kind if fault is not None else None
        return fault

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _answer_body(self, body: dict) -> dict:
        content = self.responder(body)
        if self.protocol == "openai":
            answer = _openai_completion(body, content)
            usage, field = answer["usage"], "prompt_tokens"
        else:
            answer = _anthropic_message(body, content)
            usage, field = answer["usage"], "input_tokens"
        if self.billing_factor != 1.0:
            usage[field] = round(usage[field] * self.billing_factor)
            if "total_tokens" in usage:
                usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return answer

    def _received_key(self, headers: dict[str, str]) -> str:
        if self.protocol == "anthropic" and headers.get("x-api-key"):
            return headers["x-api-key"]
        return headers.get("authorization", "").removeprefix("Bearer ").strip()


class _LoopbackHTTPServer(ThreadingHTTPServer):
    """Threaded server with a deep accept queue that skips the reverse DNS lookup of the host name."""

    daemon_threads = True
    request_queue_size = 256

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def _openai_completion(body: dict, content: Any) -> dict:
    text = content if isinstance(content, str) else json.dumps(content)
    prompt_tokens = openai_prompt_tokens(body) if body else 1
    completion_tokens = _estimate_tokens(text)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "unknown"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _anthropic_message(body: dict, content: Any) -> dict:
    tool_choice = body.get("tool_choice") or {}
    forced_tool = tool_choice.get("name") if tool_choice.get("type") == "tool" else None
    if forced_tool and not isinstance(content, str):
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:12]}",
            "name": forced_tool,
            "input": content,
        }
        stop_reason, output_text = "tool_use", json.dumps(content)
    else:
        output_text = content if isinstance(content, str) else json.dumps(content)
        block = {"type": "text", "text": output_text}
        stop_reason = "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:12]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "unknown"),
        "content": [block],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": anthropic_prompt_tokens(body),
            "output_tokens": _estimate_tokens(output_text),
        },
    }


def _error_body(protocol: str, status: int, message: str) -> dict:
    kind = {429: "rate_limit_error", 401: "authentication_error", 400: "invalid_request_error"}.get(
        status, "api_error"
    )
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _make_handler(server: LoopbackLLMServer) -> type[BaseHTTPRequestHandler]:
    """A request-handler class bound to `server` (the HTTP server builds one handler per request)."""
    expected_path = "/v1/chat/completions" if server.protocol == "openai" else "/v1/messages"
    return type("Handler", (_LoopbackHandler,), {"loopback": server, "expected_path": expected_path})


class _LoopbackHandler(BaseHTTPRequestHandler):
    """Answers one POST for the bound `loopback` server: checks, then a fault or the responder's answer."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms stall between the header and body segments
    loopback: LoopbackLLMServer
    expected_path: str

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("loopback %s: " + format, self.loopback.protocol, *args)

    def _send(
        self, status: int, payload: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(payload)

    def _send_json(self, status: int, document: dict, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(document).encode("utf-8"), "application/json", headers)

    def _send_error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send_json(status, _error_body(self.loopback.protocol, status, message), headers)

    def _read_body(self) -> tuple[dict | None, bytes]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if (self.headers.get("Content-Type") or "").startswith("multipart/"):
            return None, raw
        try:
            return (json.loads(raw) if raw else None), raw
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None, raw

    def do_POST(self) -> None:
        self._handle("POST")

    def do_GET(self) -> None:
        self._handle("GET")

    def _handle(self, method: str) -> None:
        body, raw = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        recorded = RecordedRequest(self.path, headers, body, time.monotonic(), method=method)
        fault = self.loopback._admit(recorded)
        try:
            if self.path.split("?")[0] == self.expected_path and method == "POST":
                self._respond(body, headers, fault)
            else:
                self._respond_batch_api(method, body, raw, headers, fault)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            self.loopback._release()

    def _respond_batch_api(
        self, method: str, body: dict | None, raw: bytes, headers: dict[str, str], fault: Fault | None
    ) -> None:
        """A files or batches endpoint (tests/fakes/batch_protocol.py), after the key check and any fault."""
        if not self.path.startswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
            self._send_error(404, f"unknown path {self.path}")
            return
        if (
            self.loopback.api_key is not None
            and self.loopback._received_key(headers) != self.loopback.api_key
        ):
            self._send_error(401, "invalid API key")
            return
        if fault is not None and fault.kind != "lost_response" and self._apply_fault(fault, headers):
            return
        status, payload, content_type = self.loopback.batches.handle(method, self.path, body, raw, headers)
        if fault is not None and fault.kind == "lost_response":
            time.sleep(fault.delay_s)
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if isinstance(payload, bytes):
            self._send(status, payload, content_type)
        else:
            self._send_json(status, payload)

    def _refusal(self, body: dict | None, headers: dict[str, str]) -> tuple[int, str] | None:
        """The status and message of a request the server refuses (wrong path, no JSON, wrong key)."""
        if self.path.split("?")[0] != self.expected_path:
            return 404, f"unknown path {self.path}"
        if body is None:
            return 400, "request body is not JSON"
        if (
            self.loopback.api_key is not None
            and self.loopback._received_key(headers) != self.loopback.api_key
        ):
            return 401, "invalid API key"
        return None

    def _respond(self, body: dict | None, headers: dict[str, str], fault: Fault | None) -> None:
        if self.loopback.latency_s:
            time.sleep(self.loopback.latency_s)
        refusal = self._refusal(body, headers)
        if refusal is not None:
            self._send_error(*refusal)
            return
        if fault is not None and self._apply_fault(fault, headers):
            return
        self._send_json(200, self.loopback._answer_body(body))

    def _apply_fault(self, fault: Fault, headers: dict[str, str]) -> bool:
        """Send the faulty answer; returns False when the fault only delays a normal answer."""
        if fault.kind == "timeout":
            time.sleep(fault.delay_s)
            return False
        sender = _FAULT_SENDERS.get(fault.kind)
        if sender is None:
            raise ValueError(f"unknown fault kind {fault.kind!r}")
        sender(self, fault, headers)
        return True


def _send_status_fault(handler: _LoopbackHandler, fault: Fault, headers: dict[str, str]) -> None:
    """429 or 5xx, with `Retry-After` when the fault sets one."""
    extra = {} if fault.retry_after_s is None else {"Retry-After": f"{fault.retry_after_s:g}"}
    message = "rate limit exceeded" if fault.status == 429 else "internal server error"
    handler._send_error(fault.status, message, extra)


def _send_http_error(handler: _LoopbackHandler, fault: Fault, headers: dict[str, str]) -> None:
    """Any status with the fault's message."""
    handler._send_error(fault.status, fault.body)


def _send_echo_key_error(handler: _LoopbackHandler, fault: Fault, headers: dict[str, str]) -> None:
    """An error that repeats the API key the client sent."""
    handler._send_error(
        fault.status, f"Incorrect API key provided: {handler.loopback._received_key(headers)}"
    )


def _send_truncated(handler: _LoopbackHandler, fault: Fault, headers: dict[str, str]) -> None:
    """A 200 announcing the full length, then half the body and a closed connection."""
    payload = json.dumps(_openai_completion({}, "x" * 200)).encode("utf-8")
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    handler.end_headers()
    handler.wfile.write(payload[: len(payload) // 2])
    handler.wfile.flush()
    handler.close_connection = True
    handler.connection.shutdown(2)


def _send_non_json(handler: _LoopbackHandler, fault: Fault, headers: dict[str, str]) -> None:
    """A 200 whose body is not JSON."""
    handler._send(200, fault.body.encode("utf-8"), fault.content_type)


_FAULT_SENDERS: dict[str, Callable[[_LoopbackHandler, Fault, dict[str, str]], None]] = {
    "rate_limit": _send_status_fault,
    "server_error": _send_status_fault,
    "http_error": _send_http_error,
    "echo_key_error": _send_echo_key_error,
    "truncated": _send_truncated,
    "non_json": _send_non_json,
}


# -- pytest fixtures ----------------------------------------------------------------------------------
@pytest.fixture
def llm_server_factory() -> Iterator[Callable[..., LoopbackLLMServer]]:
    """Start loopback servers with options: `llm_server_factory("openai", latency_s=0.1, responder=fn)`.

    Every server started through the factory is stopped at teardown.
    """
    started: list[LoopbackLLMServer] = []

    def start(protocol: str = "openai", **options: Any) -> LoopbackLLMServer:
        server = LoopbackLLMServer(protocol, **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def loopback_client_factory(
    cache_dir: Path, api_key: str, openai_model: str = "gpt-4o-mini"
) -> tuple[Callable[..., LLMClient], list[LLMClient]]:
    """``make(server, **overrides)`` building a client for a loopback server with fast retries.

    Defaults: ``api_key``, a cache file in ``cache_dir``, backoff base 10 ms, timeout 2 s, seeded
    jitter. Returns the factory and the list of clients it made (close them at teardown).
    """
    from model_clients import LLMClient, LLMClientConfig

    clients: list[LLMClient] = []

    def make(server: LoopbackLLMServer, **overrides: Any) -> LLMClient:
        settings: dict[str, Any] = {
            "provider": server.protocol,
            "model": openai_model if server.protocol == "openai" else "claude-sonnet-4-20250514",
            "base_url": server.base_url,
            "api_key": api_key,
            "cache_path": cache_dir / "llm_cache" / "responses.sqlite",
            "max_concurrency": 4,
            "backoff_base_s": 0.01,
            "backoff_max_s": 0.05,
            "timeout_s": 2.0,
            "seed": 0,
        }
        settings.update(overrides)
        client = LLMClient(LLMClientConfig(**settings))
        clients.append(client)
        return client

    return make, clients


def hide_cached_answers(cache_path: Path) -> None:
    """Re-key every answer of a response cache: it keeps the answers of each prompt template (their completion
    lengths, the estimate's observed mean) but answers none of the requests that were asked.

    The cache as a stage finds it when earlier runs answered other rows of the same templates.
    """
    import sqlite3

    with sqlite3.connect(cache_path) as connection:
        connection.execute("UPDATE responses SET cache_key = 'earlier-' || cache_key")


@pytest.fixture
def openai_server() -> Iterator[LoopbackLLMServer]:
    """A running OpenAI-compatible loopback server (default responder, no latency, no faults)."""
    with LoopbackLLMServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[LoopbackLLMServer]:
    """A running Anthropic Messages loopback server (default responder, no latency, no faults)."""
    with LoopbackLLMServer("anthropic") as server:
        yield server


def main(argv: list[str] | None = None) -> int:
    """Serve from this process until stdin closes; the first stdout line is the port."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=("openai", "anthropic"), default="openai")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument(
        "--batch-latency", type=float, default=0.0, help="seconds from a batch's creation until it can end"
    )
    parser.add_argument("--responder", choices=sorted(RESPONDERS), default="default")
    arguments = parser.parse_args(argv)
    responder = RESPONDERS[arguments.responder]
    with LoopbackLLMServer(arguments.protocol, responder=responder, latency_s=arguments.latency) as server:
        server.batch_latency_s = arguments.batch_latency
        sys.stdout.write(f"{server.port}\n")
        sys.stdout.flush()
        sys.stdin.read()
        batches = [
            {
                "id": batch.batch_id,
                "requests": len(batch.items),
                "created_at": batch.created_at,
                "ended_at": batch.ended_at,
            }
            for batch in server.batches.batches.values()
        ]
    sys.stdout.write(json.dumps({"batches": batches}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
