"""LLMClient against the OpenAI-compatible loopback server: requests, retries, quarantine, cache, cost."""

from __future__ import annotations

import base64
import json
import threading
import time

import pytest

from model_clients import LLMRequest, ResultStatus
from model_clients.pricing import DEFAULT_PRICE_TABLE, cost_usd
from tests.fakes.llm_servers import Fault, request_images, request_text
from tests.model_clients.conftest import PHRASES_SCHEMA

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
JPEG_BYTES = b"\xff\xd8\xff\xe0" + b"\x00" * 32


def phrase_request(text: str, **options) -> LLMRequest:
    return LLMRequest(
        "object_phrases", "v1", text, system="List the physical objects.", schema=PHRASES_SCHEMA, **options
    )


def echo_phrases(body: dict) -> dict:
    """Answer with the prompt's words as phrases, so every answer tells which request it belongs to."""
    return {"phrases": request_text(body).split()}


class TestRequestShape:
    def test_structured_output_request(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server, temperature=0.0, max_tokens=300)
        result = client.run(phrase_request("Is the red mug left of the laptop?"))
        assert result.ok and result.status == ResultStatus.OK
        body = openai_server.requests[0].body
        assert body["model"] == "gpt-4o-mini"
        assert body["messages"][0] == {"role": "system", "content": "List the physical objects."}
        assert body["messages"][1] == {"role": "user", "content": "Is the red mug left of the laptop?"}
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": PHRASES_SCHEMA, "strict": True},
        }
        assert body["temperature"] == 0.0 and body["max_completion_tokens"] == 300
        assert "image_detail" not in body

    def test_images_go_as_data_urls_with_detail(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server, image_detail="low")
        request = phrase_request(
            "What is on the table?", images=[PNG_BYTES, JPEG_BYTES], parameters={"image_detail": "high"}
        )
        assert client.run(request).ok
        body = openai_server.requests[0].body
        parts = body["messages"][1]["content"]
        assert [part["type"] for part in parts] == ["image_url", "image_url", "text"]
        assert parts[0]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG_BYTES).decode()
        assert parts[1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
        assert {part["image_url"]["detail"] for part in parts[:2]} == {"high"}
        assert request_images(body) == [PNG_BYTES, JPEG_BYTES]

    def test_unsupported_image_bytes_are_rejected_without_a_call(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server)
        results = client.run_batch(
            [phrase_request("a", images=[b"BM not an image"]), phrase_request("b")], progress=False
        )
        assert results[0].status == ResultStatus.REJECTED and "unsupported image encoding" in results[0].error
        assert results[1].ok
        assert openai_server.hits == 1

    def test_extra_parameters_are_sent_as_body_fields(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server)
        assert client.run(phrase_request("x", parameters={"top_k": 5, "seed": 3})).ok
        body = openai_server.requests[0].body
        assert body["top_k"] == 5 and body["seed"] == 3

    def test_prompt_json_mode(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=lambda body: '```json\n{"phrases": ["cup"]}\n```')
        client = make_llm_client(server, json_mode="prompt")
        result = client.run(phrase_request("Where is the cup?"))
        assert result.ok and result.data == {"phrases": ["cup"]}
        body = server.requests[0].body
        assert "response_format" not in body
        assert "matches this JSON schema" in body["messages"][0]["content"]

    def test_plain_text_request(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=lambda body: "  B \n")
        client = make_llm_client(server)
        result = client.run(LLMRequest("pass_at_2", "v1", "Answer with the letter only."))
        assert result.ok and result.data == "B" and result.raw_text == "  B \n"
        assert "response_format" not in server.requests[0].body


class TestBatch:
    def test_order_is_preserved_and_concurrency_bounded(self, llm_server_factory, make_llm_client):
        def uneven_latency(body: dict) -> dict:
            number = int(request_text(body).split()[-1])
            time.sleep(0.05 if number % 3 == 0 else 0.02)
            return {"phrases": [f"object {number}"]}

        server = llm_server_factory("openai", responder=uneven_latency)
        client = make_llm_client(server, max_concurrency=4)
        requests = [phrase_request(f"question {number}", request_id=f"q{number}") for number in range(24)]
        results = client.run_batch(requests, progress=False)
        assert [result.data["phrases"][0] for result in results] == [
            f"object {number}" for number in range(24)
        ]
        assert [result.request_id for result in results] == [f"q{number}" for number in range(24)]
        assert server.max_in_flight == 4

    def test_second_run_is_served_from_the_cache(self, openai_server, make_llm_client, tmp_path):
        requests = [phrase_request(f"question {number}") for number in range(10)]
        first = make_llm_client(openai_server).run_batch(requests, progress=False)
        assert openai_server.hits == 10 and not any(result.cached for result in first)

        rerun_client = make_llm_client(openai_server)
        second = rerun_client.run_batch(requests, progress=False)
        assert openai_server.hits == 10
        assert all(result.cached and result.attempts == 0 and result.cost_usd == 0.0 for result in second)
        assert [result.data for result in second] == [result.data for result in first]
        summary = rerun_client.summary
        assert summary.cache_hits == 10 and summary.api_calls == 0
        assert summary.cached_cost_usd == pytest.approx(sum(result.cost_usd for result in first))

    def test_identical_requests_in_a_batch_are_sent_once(self, openai_server, make_llm_client):
        requests = [phrase_request("same question", request_id=f"row{index}") for index in range(5)]
        results = make_llm_client(openai_server).run_batch(requests, progress=False)
        assert openai_server.hits == 1
        assert [result.request_id for result in results] == [f"row{index}" for index in range(5)]
        assert [result.cached for result in results] == [False, True, True, True, True]

    def test_samples_of_one_prompt_are_separate_calls(self, openai_server, make_llm_client):
        requests = [LLMRequest("pass_at_2", "v1", "Answer A or B.", sample_index=index) for index in range(4)]
        make_llm_client(openai_server).run_batch(requests, progress=False)
        assert openai_server.hits == 4

    def test_usage_and_cost(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server, model="gpt-4o-mini-2024-07-18")
        results = client.run_batch(
            [phrase_request(f"question {number}") for number in range(3)], progress=False
        )
        for result in results:
            assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
            assert result.cost_usd == pytest.approx(
                cost_usd(result.usage, DEFAULT_PRICE_TABLE["gpt-4o-mini"])
            )
        metadata = client.summary.as_metadata()
        assert metadata["llm_requests"] == 3 and metadata["llm_api_calls"] == 3
        assert metadata["llm_prompt_tokens"] == sum(result.usage.prompt_tokens for result in results)
        assert metadata["llm_cost_usd"] == pytest.approx(sum(result.cost_usd for result in results), abs=1e-6)
        assert metadata["llm_model"] == "gpt-4o-mini-2024-07-18"

    def test_rate_limit_spaces_requests(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server, requests_per_second=20.0, burst=1, max_concurrency=8)
        client.run_batch([phrase_request(f"question {number}") for number in range(6)], progress=False)
        arrivals = sorted(recorded.received_at for recorded in openai_server.requests)
        # Six requests at 20/s with a burst of one span at least five intervals of 50 ms.
        assert arrivals[-1] - arrivals[0] >= 0.2


class TestRetries:
    @pytest.mark.parametrize(
        "fault",
        [
            Fault.rate_limit(retry_after_s=0.05),  # 429 with Retry-After
            Fault.rate_limit(retry_after_s=None),  # 429 without a hint: plain backoff
            Fault.server_error(500),  # internal error
            Fault.server_error(503, retry_after_s=0.05),  # unavailable, with a hint
            Fault.timeout(delay_s=0.8),  # stall past the client's 0.5 s timeout
            Fault.truncated(),  # body cut off before Content-Length
            Fault.non_json(),  # an HTML error page with status 200
            Fault.non_json(content_type="application/json"),  # claims JSON, is not
        ],
        ids=lambda fault: f"{fault.kind}-{fault.status}-{fault.content_type.split('/')[-1]}",
    )
    def test_each_fault_kind_is_retried(self, llm_server_factory, make_llm_client, fault):
        server = llm_server_factory("openai", responder=echo_phrases)
        server.queue_faults(fault, fault)
        client = make_llm_client(server, timeout_s=0.5, max_concurrency=1)
        result = client.run(phrase_request("red mug"))
        assert result.ok and result.data == {"phrases": ["red", "mug"]}
        assert result.attempts == 3 and result.retries == 2
        assert [recorded.fault for recorded in server.requests] == [fault.kind, fault.kind, None]
        assert client.summary.retries == 2 and client.summary.failures == 0

    def test_retry_after_is_honoured(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai")
        server.queue_faults(Fault.rate_limit(retry_after_s=0.4))
        client = make_llm_client(server, backoff_base_s=0.001, backoff_max_s=0.001)
        assert client.run(phrase_request("red mug")).ok
        first, second = server.requests
        assert second.received_at - first.received_at >= 0.4

    def test_retry_after_pauses_the_other_workers(self, llm_server_factory, make_llm_client):
        def slow_answer(body: dict) -> dict:
            time.sleep(0.1)  # answers take long; the 429 comes at once
            return echo_phrases(body)

        server = llm_server_factory("openai", responder=slow_answer)
        server.queue_faults(Fault.rate_limit(retry_after_s=0.3))
        client = make_llm_client(server, max_concurrency=2, backoff_base_s=0.001, backoff_max_s=0.001)
        results = client.run_batch(
            [phrase_request(f"question {number}") for number in range(8)], progress=False
        )
        assert all(result.ok for result in results)
        # The first two requests went out together; one got the 429. The other worker finished its answer
        # 0.1 s later but waited for the Retry-After too before sending its next request.
        limited_at = server.requests[0].received_at
        later = [recorded.received_at for recorded in server.requests[2:]]
        assert all(arrival - limited_at >= 0.3 for arrival in later)

    def test_exhausted_retries_are_quarantined_and_not_cached(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=echo_phrases)
        server.fault_policy = lambda recorded, hit: (
            Fault.server_error(500) if "broken" in request_text(recorded.body) else None
        )
        client = make_llm_client(server, max_retries=2)
        requests = [phrase_request("fine one"), phrase_request("broken one"), phrase_request("fine two")]
        results = client.run_batch(requests, progress=False)
        assert [result.ok for result in results] == [True, False, True]
        failed = results[1]
        assert failed.status == ResultStatus.TRANSPORT_ERROR and failed.attempts == 3
        assert "HTTP 500" in failed.error and "after 3 calls" in failed.error
        assert client.summary.transport_failures == 1 and client.summary.failures == 1

        server.fault_policy = None
        rerun = make_llm_client(server).run_batch(requests, progress=False)
        assert [result.cached for result in rerun] == [True, False, True]
        assert rerun[1].ok and rerun[1].data == {"phrases": ["broken", "one"]}

    def test_refused_request_is_not_retried(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai")
        server.queue_faults(Fault.http_error(400, "Invalid schema for response_format 'response'"))
        client = make_llm_client(server)
        result = client.run(phrase_request("red mug"))
        assert result.status == ResultStatus.REJECTED and result.attempts == 1
        assert result.error == "HTTP 400: Invalid schema for response_format 'response'"
        assert server.hits == 1


class TestInvalidAnswers:
    def test_invalid_json_is_asked_again_once_then_quarantined(self, llm_server_factory, make_llm_client):
        server = llm_server_factory(
            "openai",
            responder=lambda body: "no idea" if "weird" in request_text(body) else echo_phrases(body),
        )
        client = make_llm_client(server)
        results = client.run_batch(
            [phrase_request("weird question"), phrase_request("red mug")], progress=False
        )
        quarantined, good = results
        assert good.ok and good.data == {"phrases": ["red", "mug"]}
        assert quarantined.status == ResultStatus.INVALID_RESPONSE and not quarantined.ok
        assert quarantined.attempts == 2 and quarantined.raw_text == "no idea"
        assert "not valid JSON" in quarantined.error
        assert quarantined.usage.completion_tokens > 0  # both paid answers are counted
        assert server.texts().count("weird question") == 2
        assert client.summary.invalid_responses == 1

        row = quarantined.quarantine_row(
            "object_phrases", record_id="q7", source_file="omnispatial/data.json"
        )
        assert row["record_id"] == "q7" and row["reason"].startswith(
            "invalid_response: response is not valid JSON"
        )
        assert json.loads(row["payload_json"])["raw_text"] == "no idea"

    def test_quarantined_answer_is_cached_and_can_be_asked_again(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=lambda body: "no idea")
        make_llm_client(server).run(phrase_request("weird question"))
        assert server.hits == 2

        cached = make_llm_client(server).run(phrase_request("weird question"))
        assert cached.cached and cached.status == ResultStatus.INVALID_RESPONSE and server.hits == 2

        server.responder = echo_phrases
        requeried = make_llm_client(server, requery_quarantined=True).run(phrase_request("weird question"))
        assert requeried.ok and not requeried.cached and server.hits == 3

    def test_invalid_then_valid(self, llm_server_factory, make_llm_client):
        answers = iter(['{"phrases": "not a list"}', '{"phrases": ["mug"]}'])
        lock = threading.Lock()

        def flaky(body: dict) -> str:
            with lock:
                return next(answers)

        server = llm_server_factory("openai", responder=flaky)
        result = make_llm_client(server).run(phrase_request("red mug"))
        assert result.ok and result.data == {"phrases": ["mug"]} and result.attempts == 2

    @pytest.mark.parametrize(
        ("answer", "reason_fragment"),
        [
            ('{"phrases": [1, 2]}', "$.phrases[0]: expected string, got integer"),  # wrong item type
            ('{"objects": ["mug"]}', "missing required property 'phrases'"),  # wrong key
            ('{"phrases": ["mug"]', "not valid JSON"),  # truncated JSON
        ],
    )
    def test_reason_names_the_problem(self, llm_server_factory, make_llm_client, answer, reason_fragment):
        server = llm_server_factory("openai", responder=lambda body: answer)
        result = make_llm_client(server, invalid_json_retries=0).run(phrase_request("red mug"))
        assert result.status == ResultStatus.INVALID_RESPONSE and result.attempts == 1
        assert reason_fragment in result.error
