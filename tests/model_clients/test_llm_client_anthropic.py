"""LLMClient against the Anthropic Messages loopback server: forced-tool JSON, images, faults."""

from __future__ import annotations

import base64

import pytest

from model_clients import LLMRequest, ResultStatus
from model_clients.pricing import DEFAULT_PRICE_TABLE, cost_usd
from tests.fakes.llm_servers import Fault, request_schema, request_text

QUESTION_SCHEMA = {
    "type": "object",
    "required": ["items"],
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["question", "options", "answer", "category", "level", "rating"],
                "properties": {
                    "question": {"type": "string"},
                    "options": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
                    "answer": {"enum": ["A", "B", "C", "D"]},
                    "category": {"type": "string"},
                    "level": {"enum": ["easy", "medium", "hard"]},
                    "rating": {"type": "integer", "minimum": 1, "maximum": 10},
                },
            },
        }
    },
}
GENERATED = {
    "items": [
        {
            "question": "Is the lamp above the table?",
            "options": ["yes", "no"],
            "answer": "A",
            "category": "relation",
            "level": "easy",
            "rating": 8,
        }
    ]
}
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x01" * 16


def generation_request(scene: str, **options) -> LLMRequest:
    return LLMRequest(
        "stvqa_generation",
        "v1",
        f"Scene graph: {scene}",
        system="Write spatial questions.",
        schema=QUESTION_SCHEMA,
        schema_name="record_questions",
        **options,
    )


class TestAnthropicRequests:
    def test_forced_tool_call(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("anthropic", responder=lambda body: GENERATED)
        client = make_llm_client(server, temperature=0.0, max_tokens=2048)
        result = client.run(generation_request("lamp above table"))
        assert result.ok and result.data == GENERATED
        body = server.requests[0].body
        assert body["model"] == "claude-sonnet-4-20250514"
        assert body["system"] == "Write spatial questions."
        assert body["tools"][0]["name"] == "record_questions"
        assert body["tools"][0]["input_schema"] == QUESTION_SCHEMA
        assert body["tool_choice"] == {"type": "tool", "name": "record_questions"}
        assert body["temperature"] == 0.0 and body["max_tokens"] == 2048
        assert "seed" not in body and "image_detail" not in body
        assert request_schema(body) == QUESTION_SCHEMA

    def test_images_are_base64_blocks(self, anthropic_server, make_llm_client):
        client = make_llm_client(anthropic_server)
        assert client.run(generation_request("cup on desk", images=[PNG_BYTES])).ok
        content = anthropic_server.requests[0].body["messages"][0]["content"]
        assert content[0] == {
            "type": "image",
            "source": {
                "type": "base64",
                "media_type": "image/png",
                "data": base64.b64encode(PNG_BYTES).decode(),
            },
        }
        assert content[1] == {"type": "text", "text": "Scene graph: cup on desk"}

    def test_prompt_json_mode(self, llm_server_factory, make_llm_client):
        server = llm_server_factory(
            "anthropic", responder=lambda body: "Here you go:\n" + __import__("json").dumps(GENERATED)
        )
        client = make_llm_client(server, json_mode="prompt")
        result = client.run(generation_request("lamp above table"))
        assert result.ok and result.data == GENERATED
        body = server.requests[0].body
        assert "tools" not in body and "matches this JSON schema" in body["system"]

    def test_text_instead_of_tool_call_is_quarantined(self, llm_server_factory, make_llm_client):
        server = llm_server_factory(
            "anthropic", responder=lambda body: "I cannot write questions for this scene."
        )
        client = make_llm_client(server)
        results = client.run_batch([generation_request("empty room")], progress=False)
        assert results[0].status == ResultStatus.INVALID_RESPONSE and results[0].attempts == 2
        assert results[0].raw_text == "I cannot write questions for this scene."

    def test_usage_and_cost(self, anthropic_server, make_llm_client):
        client = make_llm_client(anthropic_server)
        result = client.run(generation_request("lamp above table"))
        assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
        assert result.cost_usd == pytest.approx(
            cost_usd(result.usage, DEFAULT_PRICE_TABLE["claude-sonnet-4"])
        )


class TestAnthropicFaults:
    @pytest.mark.parametrize(
        "fault",
        [
            Fault.rate_limit(retry_after_s=0.05),  # 429 with Retry-After
            Fault.server_error(529),  # Anthropic "overloaded"
            Fault.truncated(),  # body cut off
            Fault.non_json(),  # HTML page with status 200
        ],
        ids=lambda fault: f"{fault.kind}-{fault.status}",
    )
    def test_fault_is_retried(self, llm_server_factory, make_llm_client, fault):
        server = llm_server_factory("anthropic", responder=lambda body: GENERATED)
        server.queue_faults(fault)
        result = make_llm_client(server).run(generation_request("lamp above table"))
        assert result.ok and result.attempts == 2

    def test_batch_goes_on_past_failures(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("anthropic", responder=lambda body: GENERATED)
        server.fault_policy = lambda recorded, hit: (
            Fault.server_error(529) if "bad" in request_text(recorded.body) else None
        )
        results = make_llm_client(server, max_retries=1).run_batch(
            [generation_request(f"scene {name}") for name in ("one", "bad", "three")], progress=False
        )
        assert [result.status for result in results] == ["ok", "transport_error", "ok"]
