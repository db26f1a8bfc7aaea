"""A run killed halfway loses nothing and pays nothing twice when it is started again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from model_clients import LLMClient, LLMClientConfig, LLMRequest
from model_clients.sync_mode import SyncMode
from tests.fakes.llm_servers import request_text
from tests.model_clients.conftest import PHRASES_SCHEMA, TEST_API_KEY

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
NUMBER_OF_REQUESTS = 40
CONCURRENCY = 4

RUNNER = textwrap.dedent(
    """
    import sys
    from model_clients import LLMClient, LLMClientConfig, LLMRequest

    base_url, cache_path, count, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    schema = {schema!r}
    config = LLMClientConfig(base_url=base_url, api_key={key!r}, cache_path=cache_path,
                             max_concurrency=concurrency, backoff_base_s=0.01)
    with LLMClient(config) as client:
        client.run_batch([LLMRequest("object_phrases", "v1", f"question {{n}}", schema=schema) for n in range(count)],
                         progress=False)
    """
).format(schema=PHRASES_SCHEMA, key=TEST_API_KEY)


def committed_rows(cache_path: Path) -> int:
    if not cache_path.exists():
        return 0
    with sqlite3.connect(cache_path) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.OperationalError:  # the table is not created yet
            return 0


def committed_keys(cache_path: Path) -> set[str]:
    with sqlite3.connect(cache_path) as connection:
        return {row[0] for row in connection.execute("SELECT cache_key FROM responses")}


def test_kill_and_restart(llm_server_factory, tmp_path):
    server = llm_server_factory(
        "openai",
        latency_s=0.05,
        responder=lambda body: {"phrases": [request_text(body).replace("question", "object")]},
    )
    cache_path = tmp_path / "responses.sqlite"
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)}
    child = subprocess.Popen(
        [
            sys.executable,
            str(script),
            server.base_url,
            str(cache_path),
            str(NUMBER_OF_REQUESTS),
            str(CONCURRENCY),
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while committed_rows(cache_path) < NUMBER_OF_REQUESTS // 3:
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the runner made no progress"
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        child.stderr.close()

    time.sleep(0.1)  # let requests that were in flight at the kill reach the server's log
    paid_before_kill = server.texts()
    saved = committed_keys(cache_path)
    assert NUMBER_OF_REQUESTS // 3 <= len(saved) < NUMBER_OF_REQUESTS

    config = LLMClientConfig(
        base_url=server.base_url, api_key=TEST_API_KEY, cache_path=cache_path, max_concurrency=CONCURRENCY
    )
    requests = [
        LLMRequest("object_phrases", "v1", f"question {n}", schema=PHRASES_SCHEMA)
        for n in range(NUMBER_OF_REQUESTS)
    ]
    with LLMClient(config) as client:
        results = client.run_batch(requests, progress=False)
        saved_prompts = {request.prompt for request in requests if client.cache_key(request) in saved}

    # Nothing lost: every request has its own valid answer.
    assert [result.data for result in results] == [
        {"phrases": [f"object {n}"]} for n in range(NUMBER_OF_REQUESTS)
    ]
    # Nothing paid twice: answers committed before the kill were not asked again ...
    paid_after_restart = server.texts()[len(paid_before_kill) :]
    assert not saved_prompts & set(paid_after_restart)
    assert sum(result.cached for result in results) == len(saved)
    # ... and every other request was asked exactly once after the restart.
    assert sorted(paid_after_restart) == sorted({request.prompt for request in requests} - saved_prompts)
    # At most the requests in flight at the kill were paid for twice.
    assert len(set(paid_before_kill) - saved_prompts) <= CONCURRENCY


def test_an_interrupted_batch_starts_no_new_request(llm_server_factory, make_llm_client, monkeypatch):
    """Ctrl-C during a batch: the answers already received stay cached and no queued request is sent
    afterwards (the worker that saw the interrupt must not take the next request off the queue)."""
    server = llm_server_factory("openai", responder=lambda body: {"phrases": [request_text(body)]})
    client = make_llm_client(server, max_concurrency=1)
    original = SyncMode.execute
    started = []

    def interrupted_on_the_fourth(self, request, key, *arguments):
        started.append(request.prompt)
        if len(started) == 4:
            raise KeyboardInterrupt
        return original(self, request, key, *arguments)

    monkeypatch.setattr(SyncMode, "execute", interrupted_on_the_fourth)
    requests = [LLMRequest("object_phrases", "v1", f"question {n}", schema=PHRASES_SCHEMA) for n in range(12)]
    with pytest.raises(KeyboardInterrupt):
        client.run_batch(requests, progress=False)
    time.sleep(0.3)  # a worker still taking requests would have sent one by now
    assert server.texts() == ["question 0", "question 1", "question 2"]
    assert started == ["question 0", "question 1", "question 2", "question 3"]

    monkeypatch.setattr(SyncMode, "execute", original)
    results = client.run_batch(requests, progress=False)
    assert [result.cached for result in results] == [True] * 3 + [False] * 9
    assert sorted(server.texts()[3:]) == sorted(f"question {n}" for n in range(3, 12))
