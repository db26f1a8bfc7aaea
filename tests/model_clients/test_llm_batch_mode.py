"""Batch mode against loopback servers that speak OpenAI's Batch API and Anthropic's Message Batches.

The real SDK clients upload JSONL files, create, poll and read batches over HTTP. Batch mode must give the
results and cache entries of sync mode at the batch price, split large calls under the size limits, ask
again what an expired or failed batch did not run (exactly once), quarantine refused requests with their
reason, and resume after a kill by polling the batches it had submitted, never submitting them again.
"""

from __future__ import annotations

import io
import logging
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from model_clients import LLMRequest, ResultStatus
from model_clients.batch_mode import BatchRun
from model_clients.pricing import DEFAULT_PRICE_TABLE, cost_usd, find_price
from tests.fakes.llm_servers import Fault, request_text
from tests.model_clients.conftest import PHRASES_SCHEMA, TEST_API_KEY

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
PROTOCOLS = ("openai", "anthropic")
CHAT_PATH = {"openai": "/chat/completions", "anthropic": "/v1/messages"}
BATCH_CREATE_PATH = {"openai": "/v1/batches", "anthropic": "/v1/messages/batches"}


def png_image(width: int = 64, height: int = 48) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (120, 60, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def batch_polls(server) -> int:
    """Polls of a batch's state (GET of one batch) the server received."""
    return sum(
        1 for recorded in list(server.requests) if recorded.method == "GET" and "batch" in recorded.path
    )


def phrase_request(text: str, **options) -> LLMRequest:
    return LLMRequest(
        "object_phrases", "v1", text, system="List the physical objects.", schema=PHRASES_SCHEMA, **options
    )


def scripted_answer(body: dict):
    """Words as phrases; "weird" questions get text that is not JSON (quarantined after one re-ask)."""
    text = request_text(body)
    return "no idea" if "weird" in text else {"phrases": text.split()}


def refused(body: dict) -> bool:
    return "forbidden" in request_text(body)


def batch_client(make_llm_client, server, **overrides):
    settings = {"mode": "batch", "batch_poll_interval_s": 0.02, "batch_sync_reask_max": 0}
    settings.update(overrides)
    return make_llm_client(server, **settings)


def outcome(result) -> tuple:
    return (result.ok, result.status, result.data, result.raw_text, result.error, result.request_id)


MIXED_REQUESTS = [
    phrase_request("red mug", request_id="q0"),
    phrase_request("weird question", request_id="q1"),
    phrase_request("gray vehicle near the boy", request_id="q2", images=[png_image()]),
    phrase_request("forbidden request", request_id="q3"),
    phrase_request("red mug", request_id="q4"),  # a duplicate: sent once, answered for both
]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batch_results_and_cache_equal_sync_at_half_price(
    protocol, llm_server_factory, make_llm_client, tmp_path
):
    sync_server = llm_server_factory(protocol, responder=scripted_answer)
    sync_server.fault_policy = lambda recorded, hit: (
        Fault.http_error(400, "request refused by policy") if refused(recorded.body or {}) else None
    )
    sync_client = make_llm_client(sync_server, cache_path=tmp_path / "sync.sqlite")
    sync_results = sync_client.run_batch(MIXED_REQUESTS, progress=False)

    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_item_policy = lambda custom_id, body: (
        Fault.http_error(400, "request refused by policy") if refused(body) else None
    )
    client = batch_client(make_llm_client, server, cache_path=tmp_path / "batch.sqlite")
    results = client.run_batch(MIXED_REQUESTS, progress=False)

    assert [outcome(result) for result in results] == [outcome(result) for result in sync_results]
    assert [result.status for result in results] == [
        ResultStatus.OK,
        ResultStatus.INVALID_RESPONSE,
        ResultStatus.OK,
        ResultStatus.REJECTED,
        ResultStatus.OK,
    ]
    assert results[3].error.startswith("HTTP 400: ") and results[3].error.endswith(
        "request refused by policy"
    )
    assert results[1].attempts == 2  # the invalid answer was asked again once, in a second batch
    assert [result.attempts for result in results] == [result.attempts for result in sync_results]
    # Same cache keys and entries as sync mode; the refusal is not cached (a re-run asks again).
    assert {key: (entry.status, entry.data) for key, entry in _entries(client).items()} == {
        key: (entry.status, entry.data) for key, entry in _entries(sync_client).items()
    }
    # No sync call; the tokens billed are those of sync mode, at half the price.
    assert server.calls(CHAT_PATH[protocol]) == 0 and server.calls(BATCH_CREATE_PATH[protocol], "POST") == 2
    price = find_price(client.config.model, DEFAULT_PRICE_TABLE)
    for result, sync_result in zip(results, sync_results, strict=True):
        assert result.usage == sync_result.usage and result.cached == sync_result.cached
        if not result.cached:  # the duplicate costs nothing in either mode
            assert result.cost_usd == pytest.approx(cost_usd(result.usage, price, batch=True))
            assert result.cost_usd == pytest.approx(sync_result.cost_usd / 2)
    row = results[3].quarantine_row("object_phrases", resource="phrase_llm")
    assert row["record_id"] == "q3" and row["reason"].startswith(f"rejected: {results[3].error}")


def _entries(client) -> dict:
    keys = {client.cache_key(request) for request in MIXED_REQUESTS}
    return client.cache.get_many(keys)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_large_calls_are_split_under_the_size_limits(protocol, llm_server_factory, make_llm_client):
    server = llm_server_factory(protocol, responder=scripted_answer)
    client = batch_client(make_llm_client, server, batch_max_requests=3)
    requests = [phrase_request(f"object number {n}") for n in range(8)]
    results = client.run_batch(requests, progress=False)
    assert all(result.ok for result in results)
    assert [len(batch.items) for batch in server.batches.batches.values()] == [3, 3, 2]

    server = llm_server_factory(protocol, responder=scripted_answer)
    line_bytes = 700  # each request's line is a few hundred bytes: at most two fit in 1,400
    client = batch_client(make_llm_client, server, batch_max_bytes=2 * line_bytes)
    results = client.run_batch([phrase_request(f"another object {n}") for n in range(5)], progress=False)
    assert all(result.ok for result in results)
    sizes = [len(batch.items) for batch in server.batches.batches.values()]
    assert sum(sizes) == 5 and max(sizes) <= 2 and len(sizes) >= 3
    assert client.summary.batches_submitted == len(sizes) and client.summary.batch_requests == 5


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("sync_reask_max", [0, 20], ids=["new-batch", "sync"])
def test_expired_batch_items_are_asked_again_exactly_once(
    protocol, sync_reask_max, llm_server_factory, make_llm_client
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    server.expire_batches = {1: 2}  # the first batch answers two requests, then expires
    client = batch_client(make_llm_client, server, batch_sync_reask_max=sync_reask_max)
    requests = [phrase_request(f"object number {n}") for n in range(6)]
    results = client.run_batch(requests, progress=False)

    assert [result.data for result in results] == [
        {"phrases": ["object", "number", str(n)]} for n in range(6)
    ]
    keys = [client.cache_key(request) for request in requests]
    first_batch = next(iter(server.batches.batches.values()))
    assert [custom_id for custom_id, _ in first_batch.items] == keys
    if sync_reask_max:  # four re-asks are under the threshold: sent one by one, each once
        assert len(server.batches.batches) == 1
        assert sorted(text for text in server.texts() if text) == sorted(
            f"object number {n}" for n in range(2, 6)
        )
        assert client.summary.batch_sync_reasks == 4
    else:  # a new batch with exactly the four requests the expired one never ran
        assert len(server.batches.batches) == 2 and server.calls(CHAT_PATH[protocol]) == 0
        second_batch = list(server.batches.batches.values())[1]
        assert [custom_id for custom_id, _ in second_batch.items] == keys[2:]
    assert all(server.batches.asked[key] <= 1 for key in keys)
    # A request the expired batch never ran is no attempt: each was answered by its first call, as in sync mode.
    assert [result.attempts for result in results] == [1] * 6
    assert client.summary.batch_failed == 4 and client.summary.failures == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_retryable_item_errors_and_failed_batches_are_asked_again(
    protocol, llm_server_factory, make_llm_client
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    failed_once: set[str] = set()

    def overloaded_once(custom_id: str, body: dict):
        if "busy" in request_text(body) and custom_id not in failed_once:
            failed_once.add(custom_id)
            return Fault.server_error(529 if protocol == "anthropic" else 500)
        return None

    server.batch_item_policy = overloaded_once
    client = batch_client(make_llm_client, server)
    results = client.run_batch([phrase_request("busy one"), phrase_request("calm one")], progress=False)
    assert [result.ok for result in results] == [True, True] and results[0].attempts == 2

    server = llm_server_factory(protocol, responder=scripted_answer)
    server.fail_batches = {1: "the batch could not be processed"}
    client = batch_client(make_llm_client, server)
    results = client.run_batch([phrase_request("first"), phrase_request("second")], progress=False)
    assert all(result.ok for result in results) and len(server.batches.batches) == 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("sync_reask_max", [0, 20], ids=["new-batch", "sync"])
def test_a_request_that_keeps_failing_is_asked_again_once_then_quarantined(
    protocol, sync_reask_max, llm_server_factory, make_llm_client
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_item_policy = lambda custom_id, body: (
        Fault.server_error(500) if "always" in request_text(body) else None
    )
    server.fault_policy = lambda recorded, hit: (  # the one-by-one re-ask fails as well
        Fault.server_error(500) if "always" in request_text(recorded.body or {}) else None
    )
    client = batch_client(
        make_llm_client, server, max_retries=5, batch_sync_reask_max=sync_reask_max, backoff_max_s=0.01
    )
    results = client.run_batch([phrase_request("always failing"), phrase_request("fine")], progress=False)
    failed, good = results
    assert good.ok and failed.status == ResultStatus.TRANSPORT_ERROR and failed.error.startswith("HTTP 500")
    if sync_reask_max:  # asked once more one by one: the sync retries, counting the batch's failure
        assert server.batches.asked[failed.cache_key] == 1 and len(server.batches.batches) == 1
        assert server.calls(CHAT_PATH[protocol]) == client.config.max_retries
    else:  # asked once more in a second batch, not max_retries times
        assert server.batches.asked[failed.cache_key] == 2 and len(server.batches.batches) == 2
        assert "asked again once after a failure; failed again" in failed.error
        assert failed.attempts == 2  # two calls the provider ran, as sync mode counts them
    assert client.cache.get_many([failed.cache_key]) == {}  # not cached: the next run asks again
    row = failed.quarantine_row("object_phrases", resource="phrase_llm")
    assert row["reason"].startswith("transport_error: HTTP 500") and "a re-run asks again" in row["reason"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batch_calls_that_fail_in_transit_are_retried(protocol, llm_server_factory, make_llm_client):
    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_polls_to_finish = 2
    gets = []

    def some_gets_fail(recorded, hit):
        if recorded.method != "GET":
            return None
        gets.append(recorded.path)
        return Fault.server_error(503) if len(gets) in (1, 2, 5, 7) else None  # polls, downloads

    server.fault_policy = some_gets_fail
    client = batch_client(make_llm_client, server)
    results = client.run_batch([phrase_request(f"object {n}") for n in range(3)], progress=False)
    assert all(result.ok for result in results)
    assert any(recorded.fault == "server_error" for recorded in server.requests)
    assert server.calls(BATCH_CREATE_PATH[protocol], "POST") == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_progress_in_the_log_and_the_metadata(protocol, llm_server_factory, make_llm_client, caplog):
    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_polls_to_finish = 3
    client = batch_client(make_llm_client, server)
    with caplog.at_level(logging.INFO, logger="model_clients"):
        client.run_batch(
            [phrase_request(f"object {n}") for n in range(4)], progress=False, description="phrases"
        )
    messages = [record.getMessage() for record in caplog.records]
    assert any(
        message.startswith("phrases (") and "estimate 4 uncached requests" in message for message in messages
    )
    assert any("submitted batch" in message for message in messages)
    progress = [message for message in messages if "1 batches in flight, 4 requests submitted" in message]
    when = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC"
    # Nothing is done at the first poll: no finish is claimed (the providers' 24-hour expiry is no estimate).
    assert re.search(
        rf"0 completed, 0 failed; expected finish unknown until some requests are done \(they expire {when}\)$",
        progress[0],
    )
    assert re.search(rf"4 completed, 0 failed; expected finish {when}$", progress[-1])
    metadata = client.summary.as_metadata()
    assert metadata["llm_mode"] == "batch" and metadata["llm_batches_submitted"] == 1
    assert metadata["llm_batch_requests"] == 4 and metadata["llm_batch_completed"] == 4
    assert metadata["llm_batch_failed"] == 0 and metadata["llm_expected_finish"].endswith("UTC")
    assert metadata["llm_estimated_cost_usd"] > 0 and metadata["llm_cost_usd"] > 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_downloaded_outcomes_survive_a_kill_before_they_are_read(
    protocol, llm_server_factory, make_llm_client, monkeypatch
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    client = batch_client(make_llm_client, server)
    requests = [phrase_request(f"object {n}") for n in range(3)]
    original = BatchRun._read_outcomes
    calls = []

    def killed_after_download(self, keys):
        calls.append(len(keys))
        if len(calls) == 2:  # the first call reads nothing; the second comes after the download
            raise KeyboardInterrupt
        return original(self, keys)

    monkeypatch.setattr(BatchRun, "_read_outcomes", killed_after_download)
    with pytest.raises(KeyboardInterrupt):
        client.run_batch(requests, progress=False)
    monkeypatch.setattr(BatchRun, "_read_outcomes", original)
    hits_before = server.hits
    results = batch_client(make_llm_client, server).run_batch(requests, progress=False)
    assert all(result.ok for result in results)
    assert server.hits == hits_before  # read from the cache: no poll, no download, no new batch


RUNNER = textwrap.dedent(
    """
    import sys
    from model_clients import LLMClient, LLMClientConfig, LLMRequest

    protocol, base_url, cache_path, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    model = "gpt-4o-mini" if protocol == "openai" else "claude-sonnet-4-20250514"
    config = LLMClientConfig(provider=protocol, model=model, base_url=base_url, api_key={key!r},
                             cache_path=cache_path, mode="batch", batch_poll_interval_s=0.05,
                             batch_max_requests=4, backoff_base_s=0.01)
    schema = {schema!r}
    with LLMClient(config) as client:
        client.run_batch([LLMRequest("object_phrases", "v1", f"question {{n}}", schema=schema)
                          for n in range(count)], progress=False)
    """
).format(schema=PHRASES_SCHEMA, key=TEST_API_KEY)


def _recorded_batches(cache_path: Path) -> int:
    if not cache_path.exists():
        return 0
    with sqlite3.connect(cache_path) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM batch_jobs").fetchone()[0]
        except sqlite3.OperationalError:  # the tables are not created yet
            return 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_kill_during_polling_then_resume_submits_nothing_again(protocol, llm_server_factory, tmp_path):
    server = llm_server_factory(protocol, responder=lambda body: {"phrases": [request_text(body)]})
    server.hold_batches = True  # the batches stay in progress while the first run polls them
    cache_path = tmp_path / "responses.sqlite"
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(script), protocol, server.base_url, str(cache_path), "10"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while _recorded_batches(cache_path) < 3 or batch_polls(server) < 6:
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the runner did not submit and poll its batches"
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()
    created_before_kill = server.calls(BATCH_CREATE_PATH[protocol], "POST")
    assert created_before_kill == 3 == len(server.batches.batches)

    from model_clients import LLMClient, LLMClientConfig

    server.hold_batches = False
    config = LLMClientConfig(
        provider=protocol,
        model="gpt-4o-mini" if protocol == "openai" else "claude-sonnet-4-20250514",
        base_url=server.base_url,
        api_key=TEST_API_KEY,
        cache_path=cache_path,
        mode="batch",
        batch_poll_interval_s=0.02,
        batch_max_requests=4,
    )
    requests = [LLMRequest("object_phrases", "v1", f"question {n}", schema=PHRASES_SCHEMA) for n in range(10)]
    with LLMClient(config) as client:
        results = client.run_batch(requests, progress=False)
        summary = client.summary
    assert [result.data for result in results] == [{"phrases": [f"question {n}"]} for n in range(10)]
    assert server.calls(BATCH_CREATE_PATH[protocol], "POST") == created_before_kill  # nothing submitted again
    assert server.calls(CHAT_PATH[protocol]) == 0
    assert sorted(server.batches.asked.values()) == [1] * 10
    assert summary.batches_submitted == 0 and summary.batch_completed == 10


def _creates(server) -> int:
    return server.calls(BATCH_CREATE_PATH[server.protocol], "POST")


def _lost_first_create(server, delay_s: float = 0.0) -> None:
    """The first create call is carried out by the provider and its answer never reaches the client."""
    path = BATCH_CREATE_PATH[server.protocol]

    def policy(recorded, hit):
        if recorded.method == "POST" and recorded.path.split("?")[0] == path and _creates(server) == 1:
            return Fault.lost_response(delay_s)
        return None

    server.fault_policy = policy


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("lost", ["dropped", "timed out"])
def test_a_create_call_whose_answer_is_lost_creates_no_second_batch(
    protocol, lost, llm_server_factory, make_llm_client, caplog, monkeypatch
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    if lost == "dropped":  # the connection closes after the provider created the batch
        _lost_first_create(server)
        client = batch_client(make_llm_client, server, batch_max_requests=3)
    else:  # the answer comes after the client's timeout
        _lost_first_create(server, delay_s=1.5)
        monkeypatch.setattr("model_clients.batches.TRANSFER_TIMEOUT_S", 0.5)  # Anthropic's create timeout
        client = batch_client(make_llm_client, server, batch_max_requests=3, timeout_s=0.5)
    requests = [phrase_request(f"object number {n}") for n in range(7)]
    with caplog.at_level(logging.WARNING, logger="model_clients"):
        results = client.run_batch(requests, progress=False)
    assert [result.data for result in results] == [
        {"phrases": ["object", "number", str(n)]} for n in range(7)
    ]
    # The create whose answer was lost made the first batch; it is found in the provider's list, not made again.
    assert _creates(server) == 3 == len(server.batches.batches)
    assert sorted(server.batches.asked.values()) == [1] * 7
    assert "the create call failed" in caplog.text and "it is not created again" in caplog.text
    assert ("the create call failed (request timed out)" in caplog.text) == (lost == "timed out")
    assert (
        client.cache.open_intents([client.cache_key(r) for r in requests], protocol, client.config.model)
        == {}
    )


def _intents(cache_path: Path) -> int:
    if not cache_path.exists():
        return 0
    with sqlite3.connect(cache_path) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM batch_intents").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_kill_after_the_provider_accepted_a_batch_submits_nothing_again(
    protocol, llm_server_factory, tmp_path
):
    server = llm_server_factory(protocol, responder=lambda body: {"phrases": [request_text(body)]})
    _lost_first_create(
        server, delay_s=20.0
    )  # the runner waits for the create's answer; it is killed meanwhile
    cache_path = tmp_path / "responses.sqlite"
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)}
    child = subprocess.Popen(
        [sys.executable, str(script), protocol, server.base_url, str(cache_path), "3"],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while len(server.batches.batches) < 1:  # the provider holds the batch; the runner has no id for it
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the runner did not create its batch"
            time.sleep(0.02)
        assert _recorded_batches(cache_path) == 0 and _intents(cache_path) == 1  # only the intent is recorded
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()

    from model_clients import LLMClient, LLMClientConfig

    config = LLMClientConfig(
        provider=protocol,
        model="gpt-4o-mini" if protocol == "openai" else "claude-sonnet-4-20250514",
        base_url=server.base_url,
        api_key=TEST_API_KEY,
        cache_path=cache_path,
        mode="batch",
        batch_poll_interval_s=0.02,
        batch_max_requests=4,
    )
    requests = [LLMRequest("object_phrases", "v1", f"question {n}", schema=PHRASES_SCHEMA) for n in range(3)]
    with LLMClient(config) as client:
        results = client.run_batch(requests, progress=False)
        summary = client.summary
    assert [result.data for result in results] == [{"phrases": [f"question {n}"]} for n in range(3)]
    assert _creates(server) == 1 == len(server.batches.batches)  # the batch the killed run created, polled
    assert sorted(server.batches.asked.values()) == [1] * 3 and server.calls(CHAT_PATH[protocol]) == 0
    assert summary.batches_submitted == 0 and _intents(cache_path) == 0 and _recorded_batches(cache_path) == 1


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_intent_whose_batch_never_reached_the_provider_is_submitted(
    protocol, llm_server_factory, make_llm_client
):
    from model_clients.cache import BatchIntent

    server = llm_server_factory(protocol, responder=scripted_answer)
    client = batch_client(make_llm_client, server)
    requests = [phrase_request(f"object number {n}") for n in range(3)]
    keys = [client.cache_key(request) for request in requests]
    intent = BatchIntent("k" * 32, protocol, client.config.model, "killed before create", 3, time.time())
    client.cache.record_intent(intent, keys)  # a run killed between recording its intent and the create call
    results = client.run_batch(requests, progress=False)
    assert all(result.ok for result in results)
    assert _creates(server) == 1 and sorted(server.batches.asked.values()) == [1] * 3
    assert client.cache.open_intents(keys, protocol, client.config.model) == {}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batches_wait_for_room_under_the_enqueued_token_limit(
    protocol, llm_server_factory, make_llm_client, tmp_path
):
    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_polls_to_finish = 2
    requests = [phrase_request(f"object number {n}") for n in range(6)]
    together = batch_client(make_llm_client, server, batch_max_requests=2)
    assert all(result.ok for result in together.run_batch(requests, progress=False))
    assert (
        len(server.batches.batches) == 3 and together.summary.batch_waits == 1
    )  # all three in flight at once

    server = llm_server_factory(protocol, responder=scripted_answer)
    server.batch_polls_to_finish = 2
    probe = batch_client(make_llm_client, server, cache_path=tmp_path / "probe.sqlite")
    tokens_of_two = probe.estimate(
        requests[:2], log=False
    ).prompt_tokens  # a batch of two fits, two batches do not
    assert tokens_of_two > 0
    limited = batch_client(
        make_llm_client,
        server,
        batch_max_requests=2,
        batch_max_enqueued_tokens=tokens_of_two + 1,
        cache_path=tmp_path / "limited.sqlite",
    )
    results = limited.run_batch(requests, progress=False)
    assert [result.data for result in results] == [
        {"phrases": ["object", "number", str(n)]} for n in range(6)
    ]
    batches = sorted(server.batches.batches.values(), key=lambda batch: batch.number)
    assert (
        len(batches) == 3
        and all(  # one batch in flight at a time: each created after the one before ended
            later.created_at >= earlier.ended_at for earlier, later in zip(batches, batches[1:], strict=False)
        )
    )
    assert limited.summary.batch_waits == 3 and sorted(server.batches.asked.values()) == [1] * 6
