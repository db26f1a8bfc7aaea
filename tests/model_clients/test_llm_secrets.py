"""API keys never reach logs, results, summaries, reprs or the cache file."""

from __future__ import annotations

import logging

import pytest

from model_clients import LLMClientConfig, LLMRequest
from tests.fakes.llm_servers import Fault
from tests.model_clients.conftest import PHRASES_SCHEMA, TEST_API_KEY

FAULTS = [
    Fault.echo_key_error(401),  # an error body that repeats the key
    Fault.echo_key_error(500),  # the same, on a retryable status
    Fault.rate_limit(retry_after_s=0.01),
    Fault.truncated(),
    Fault.non_json(),
    Fault.http_error(400, "bad request"),
]


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
def test_key_is_never_exposed(protocol, llm_server_factory, make_llm_client, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    server = llm_server_factory(protocol)
    server.queue_faults(*FAULTS)
    client = make_llm_client(server, max_retries=2, max_concurrency=1)
    requests = [
        LLMRequest("object_phrases", "v1", f"question {number}", schema=PHRASES_SCHEMA) for number in range(6)
    ]
    requests.append(LLMRequest("object_phrases", "v1", "no JSON please"))
    results = client.run_batch(requests, progress=False)
    client.close()

    # The key did travel to the server (so the checks below are meaningful) ...
    assert any(TEST_API_KEY in " ".join(recorded.headers.values()) for recorded in server.requests)
    # ... and at least one error message had it echoed back.
    assert any(result.error and "[REDACTED]" in result.error for result in results)

    # The SDK's and the transport's debug logs were captured too, not only this project's.
    assert {record.name.split(".")[0] for record in caplog.records} >= {protocol, "model_clients"}
    assert TEST_API_KEY not in caplog.text
    for result in results:
        assert TEST_API_KEY not in repr(result)
    assert TEST_API_KEY not in repr(client.summary.as_metadata())
    assert TEST_API_KEY not in repr(client) and TEST_API_KEY not in repr(client.config)
    for path in (tmp_path / "llm_cache").iterdir():
        assert TEST_API_KEY.encode() not in path.read_bytes(), path.name


def test_config_repr_hides_the_key():
    assert TEST_API_KEY not in repr(LLMClientConfig(api_key=TEST_API_KEY))
