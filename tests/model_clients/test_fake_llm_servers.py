"""The loopback LLM servers themselves: protocol shapes, faults, helpers, and the script entry point."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from pathlib import Path

import pytest

from model_clients.schema import validate_json
from tests.fakes.llm_servers import (
    Fault,
    LoopbackLLMServer,
    request_images,
    request_schema,
    request_text,
    schema_example,
)
from tests.model_clients.conftest import PHRASES_SCHEMA

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "fakes" / "llm_servers.py"


def post(
    server: LoopbackLLMServer, path: str, body: dict, headers: dict | None = None
) -> tuple[int, bytes, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        connection.request(
            "POST",
            path,
            body=json.dumps(body),
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


@pytest.mark.parametrize(
    "schema",
    [
        PHRASES_SCHEMA,  # object with an array of strings
        {"type": "object", "required": ["answer"], "properties": {"answer": {"enum": ["A", "B"]}}},  # enum
        {"type": "array", "minItems": 3, "items": {"type": "integer", "minimum": 4}},  # bounded array
        {
            "type": "object",
            "properties": {"box": {"type": "array", "items": {"type": "number"}}},
        },  # optional fields
        {"anyOf": [{"type": "string", "minLength": 6}, {"type": "null"}]},  # alternatives
    ],
)
def test_schema_example_satisfies_its_schema(schema):
    assert validate_json(schema_example(schema), schema) == []


def test_openai_protocol_shape(openai_server):
    body = {
        "model": "m",
        "messages": [
            {"role": "system", "content": "sys"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "image_url",
                        "image_url": {"url": "data:image/png;base64,aGk=", "detail": "low"},
                    },
                    {"type": "text", "text": "hello"},
                ],
            },
        ],
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": PHRASES_SCHEMA}},
    }
    status, payload, _ = post(openai_server, "/v1/chat/completions", body)
    completion = json.loads(payload)
    assert status == 200 and completion["object"] == "chat.completion"
    assert json.loads(completion["choices"][0]["message"]["content"]) == {"phrases": ["text"]}
    assert completion["usage"]["total_tokens"] > 0
    assert (
        request_text(body) == "hello"
        and request_images(body) == [b"hi"]
        and request_schema(body) == PHRASES_SCHEMA
    )


def test_anthropic_protocol_shape(anthropic_server):
    body = {
        "model": "m",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
        "tools": [{"name": "answer", "input_schema": PHRASES_SCHEMA}],
        "tool_choice": {"type": "tool", "name": "answer"},
    }
    status, payload, _ = post(anthropic_server, "/v1/messages", body)
    message = json.loads(payload)
    assert status == 200 and message["stop_reason"] == "tool_use"
    assert message["content"][0]["input"] == {"phrases": ["text"]}
    assert message["usage"]["input_tokens"] > 0


def test_key_check_and_unknown_path(openai_server):
    openai_server.api_key = "sk-right-key-0000"
    status, payload, _ = post(
        openai_server, "/v1/chat/completions", {"messages": []}, {"Authorization": "Bearer sk-wrong-key-1111"}
    )
    assert status == 401 and b"sk-wrong-key-1111" not in payload
    status, _, _ = post(
        openai_server, "/v1/chat/completions", {"messages": []}, {"Authorization": "Bearer sk-right-key-0000"}
    )
    assert status == 200
    status, _, _ = post(openai_server, "/v1/embeddings", {})
    assert status == 404


def test_rate_limit_header(openai_server):
    openai_server.queue_faults(Fault.rate_limit(retry_after_s=1.5))
    status, _, headers = post(openai_server, "/v1/chat/completions", {"messages": []})
    assert status == 429 and headers["Retry-After"] == "1.5"


def test_truncated_body(openai_server):
    openai_server.queue_faults(Fault.truncated())
    with pytest.raises(http.client.IncompleteRead):
        post(openai_server, "/v1/chat/completions", {"messages": []})
    assert openai_server.requests[0].fault == "truncated"


def test_fault_policy_and_reset(openai_server):
    openai_server.fault_policy = lambda recorded, hit: Fault.server_error(502) if hit % 2 else None
    statuses = [post(openai_server, "/v1/chat/completions", {"messages": []})[0] for _ in range(4)]
    assert statuses == [502, 200, 502, 200]
    openai_server.reset()
    assert openai_server.hits == 0


def test_script_entry_point():
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--protocol", "anthropic"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(process.stdout.readline())
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("POST", "/v1/messages", body=json.dumps({"messages": []}))
        assert json.loads(connection.getresponse().read())["type"] == "message"
        connection.close()
    finally:
        process.stdin.close()
        process.wait(timeout=10)
        process.stdout.close()
    assert process.returncode == 0
