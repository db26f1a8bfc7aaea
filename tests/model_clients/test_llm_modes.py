"""The client's two modes work from what they are handed (:class:`ModeServices`), without a client.

Sync mode is driven here by an in-process chat adapter: it reads the answers like the client always did
(schema, re-ask of an unusable answer, quarantine), caches every answer, and stops before a request that could
pass the budget.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from tqdm.auto import tqdm

from model_clients import LLMClientConfig, LLMRequest, ResponseCache, ResultStatus, TokenUsage
from model_clients.answers import AnswerBook, RequestAttempts
from model_clients.budget import BudgetExceededError, SpendingBudget
from model_clients.client import UsageSummary
from model_clients.estimate import TokenEstimator
from model_clients.modes import ModeServices, PendingWork
from model_clients.pricing import ModelPrice
from model_clients.providers import ProviderReply
from model_clients.ratelimit import TokenBucket
from model_clients.sync_mode import SyncMode
from tests.model_clients.conftest import PHRASES_SCHEMA

SECRET = "sk-test-modes-secret-0123456789"


class ScriptedChat:
    """A chat adapter answering each prompt from a script (a list of answers, one per call)."""

    name = "openai"
    model = "gpt-4o-mini"

    def __init__(self, script: Mapping[str, list[str]]) -> None:
        self.script = {prompt: list(answers) for prompt, answers in script.items()}
        self.sent: list[str] = []

    def send(self, request: LLMRequest, parameters: Mapping[str, Any]) -> ProviderReply:
        self.sent.append(request.prompt)
        return ProviderReply(self.script[request.prompt].pop(0), None, TokenUsage(100, 10), "stop")

    def close(self) -> None:
        pass


def services_for(chat: ScriptedChat, cache: ResponseCache, max_cost_usd: float | None = None) -> ModeServices:
    config = LLMClientConfig(max_cost_usd=max_cost_usd)
    price = ModelPrice(input_usd_per_million=1_000.0, output_usd_per_million=1_000.0)

    def request_costs(
        requests: Sequence[LLMRequest], indices: Sequence[int], batch: bool
    ) -> dict[int, float]:
        return dict.fromkeys(indices, 1.0) if max_cost_usd is not None else {}

    return ModeServices(
        config=config,
        provider=chat,
        cache=cache,
        answers=AnswerBook(cache, "openai", "gpt-4o-mini", (SECRET,)),
        budget=SpendingBudget(max_cost_usd),
        estimator=TokenEstimator("openai", "gpt-4o-mini", "native"),
        price=price,
        log=logging.getLogger("test"),
        effective_parameters=lambda request: config.default_parameters() | dict(request.parameters),
        request_costs=request_costs,
        backoff=lambda retry_number, retry_after_s: 0.0,
    )


def pending_work(requests: list[LLMRequest]) -> PendingWork:
    keys = [f"key-{number}" for number in range(len(requests))]
    return PendingWork(
        requests,
        keys,
        range(len(requests)),
        [None] * len(requests),
        tqdm(disable=True),
        "test",
        UsageSummary(),
    )


def test_sync_mode_reads_answers_and_caches_them_from_its_services_alone():
    chat = ScriptedChat(
        {
            "a chair": [json.dumps({"phrases": ["chair"]})],
            "a lamp": ["not json", json.dumps({"phrases": ["lamp"]})],
            "weird": ["not json", "still not json"],
        }
    )
    cache = ResponseCache(":memory:")
    services = services_for(chat, cache)
    requests = [LLMRequest("object_phrases", "v1", prompt, schema=PHRASES_SCHEMA) for prompt in chat.script]
    work = pending_work(requests)

    SyncMode(services, TokenBucket(None, burst=1)).run(work)

    chair, lamp, weird = work.results
    assert chair.ok and chair.data == {"phrases": ["chair"]} and chair.attempts == 1
    assert lamp.ok and lamp.data == {"phrases": ["lamp"]} and lamp.attempts == 2
    assert (
        not weird.ok and weird.status == ResultStatus.INVALID_RESPONSE and weird.raw_text == "still not json"
    )
    assert chair.cost_usd == pytest.approx(0.11)  # 100 + 10 tokens at $1,000 per million
    stored = cache.get_many(work.keys)
    assert {key: entry.status for key, entry in stored.items()} == {
        "key-0": ResultStatus.OK,
        "key-1": ResultStatus.OK,
        "key-2": ResultStatus.INVALID_RESPONSE,
    }
    cache.close()


def test_sync_mode_stops_before_a_request_that_could_pass_the_budget():
    chat = ScriptedChat({"a chair": [json.dumps({"phrases": ["chair"]})]})
    cache = ResponseCache(":memory:")
    services = services_for(chat, cache, max_cost_usd=0.5)  # each request could cost $1.00
    work = pending_work([LLMRequest("object_phrases", "v1", "a chair", schema=PHRASES_SCHEMA)])

    with pytest.raises(
        BudgetExceededError, match=r"test stopped before request key-0 that could cost up to \$1"
    ):
        SyncMode(services, TokenBucket(None, burst=1)).run(work)
    assert chat.sent == []
    assert work.results == [None]
    cache.close()


def test_a_failure_reason_never_holds_the_secret():
    answers = AnswerBook(ResponseCache(":memory:"), "openai", "gpt-4o-mini", (SECRET,))
    result = answers.failure(
        ResultStatus.REJECTED,
        f"401: bad key {SECRET}",
        "key",
        LLMRequest("t", "v1", "p"),
        RequestAttempts(calls=1),
        None,
    )
    assert SECRET not in result.error and "[REDACTED]" in result.error
    answers.cache.close()
