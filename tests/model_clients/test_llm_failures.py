"""Answers a request refuses (``answer_check``), failure reasons and the failure check of an online stage.

Against the OpenAI-compatible loopback server: a reply that the request's check refuses is asked again
like an answer outside the schema and then quarantined; a cached ``ok`` reply that the check refuses is
asked again; the summary keeps the first failure reasons; :mod:`model_clients.failures` fails a stage with one
sentence above its threshold and lets it through below.
"""

from __future__ import annotations

import pytest

from model_clients import (
    FailureBudgetSettings,
    LLMRequest,
    ResultStatus,
    UsageSummary,
    failure_budget_message,
    failure_metadata,
)
from tests.fakes.llm_servers import Fault, request_text
from tests.model_clients.conftest import TEST_API_KEY


def letter_only(text):
    """The check of a judge reply: one letter A-D."""
    return None if text in ("A", "B", "C", "D") else f"reply is not one option letter: {text!r}"


def judge_request(text: str, check=letter_only) -> LLMRequest:
    return LLMRequest("judge", "v1", text, parameters={"max_tokens": 5}, request_id=text, answer_check=check)


def scripted(replies: dict[str, list[str]]):
    """Responder: the next reply for the prompt from `replies` (the last one repeats)."""
    seen: dict[str, int] = {}

    def respond(body):
        text = request_text(body)
        count = seen.get(text, 0)
        seen[text] = count + 1
        options = replies[text]
        return options[min(count, len(options) - 1)]

    return respond


class TestAnswerCheck:
    def test_a_truncated_reply_is_asked_again(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=scripted({"q1": ["The answer is", "B"]}))
        result = make_llm_client(server).run(judge_request("q1"))
        assert result.ok and result.data == "B" and result.attempts == 2 and server.hits == 2

    def test_a_reply_still_refused_after_the_reask_is_quarantined(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", responder=scripted({"q1": ["I think", "Probably"]}))
        client = make_llm_client(server)
        result = client.run(judge_request("q1"))
        assert result.status == ResultStatus.INVALID_RESPONSE and result.raw_text == "Probably"
        assert "not one option letter" in result.error and server.hits == 2
        # cached as quarantined, not as a good answer: a rebuild does not pay, requery asks again
        assert make_llm_client(server).run(judge_request("q1")).status == ResultStatus.INVALID_RESPONSE
        assert server.hits == 2
        make_llm_client(server, requery_quarantined=True).run(judge_request("q1"))
        assert server.hits == 4

    def test_a_cached_ok_reply_that_the_check_refuses_is_asked_again(
        self, llm_server_factory, make_llm_client
    ):
        server = llm_server_factory("openai", responder=scripted({"q1": ["The answer", "C"]}))
        unchecked = make_llm_client(server).run(judge_request("q1", check=None))
        assert unchecked.ok and unchecked.data == "The answer"  # cached as ok before the check existed
        checked = make_llm_client(server).run(judge_request("q1"))
        assert checked.ok and not checked.cached and checked.data == "C" and server.hits == 2
        again = make_llm_client(server).run(judge_request("q1"))
        assert again.cached and again.data == "C" and server.hits == 2

    def test_the_check_is_not_part_of_the_cache_key(self, openai_server, make_llm_client):
        client = make_llm_client(openai_server)
        assert client.cache_key(judge_request("q1")) == client.cache_key(judge_request("q1", check=None))


class TestFailureReasons:
    def test_the_summary_keeps_the_first_distinct_reasons(self, llm_server_factory, make_llm_client):
        server = llm_server_factory("openai", api_key=TEST_API_KEY)
        client = make_llm_client(server, api_key="sk-wrong-key-000000000000")
        results = client.run_batch(
            [judge_request(f"q{index}", check=None) for index in range(5)], progress=False
        )
        assert all(result.status == ResultStatus.REJECTED for result in results)
        assert client.summary.failures == client.summary.rejected == 5
        assert len(client.summary.first_errors) == 1 and "401" in client.summary.first_errors[0]
        metadata = client.summary.as_metadata()
        assert "401" in metadata["llm_first_errors"] and "sk-wrong-key" not in str(metadata)

    def test_merge_keeps_at_most_three_reasons(self):
        summary = UsageSummary(first_errors=["a", "b"])
        summary.merge(UsageSummary(first_errors=["b", "c", "d"]))
        assert summary.first_errors == ["a", "b", "c"]

    @pytest.mark.parametrize(
        ("status", "hint"),
        [
            (ResultStatus.INVALID_RESPONSE, "requery_quarantined: true on the phrase_llm resource"),
            (ResultStatus.TRANSPORT_ERROR, "not cached: a re-run asks again"),
            (ResultStatus.REJECTED, "once the key, model or request is fixed"),
        ],
    )
    def test_quarantine_reasons_say_how_to_ask_again(self, llm_server_factory, make_llm_client, status, hint):
        server = llm_server_factory("openai", responder=lambda body: "no")
        faults = {
            ResultStatus.TRANSPORT_ERROR: Fault.server_error(500),
            ResultStatus.REJECTED: Fault.http_error(400, "image too large"),
        }
        if status in faults:
            server.fault_policy = lambda recorded, hit: faults[status]
        result = make_llm_client(server, max_retries=1).run(judge_request("q1"))
        assert result.status == status
        assert hint in result.quarantine_row("object_phrases", resource="phrase_llm")["reason"]


class TestFailureBudget:
    def test_under_or_at_the_threshold_passes(self):
        assert failure_budget_message(UsageSummary(requests=100, failures=3), 0.05, "s", "r") is None
        assert failure_budget_message(UsageSummary(requests=100, failures=5), 0.05, "s", "r") is None
        assert failure_budget_message(UsageSummary(), 0.0, "s", "r") is None  # no request, nothing failed
        assert failure_metadata(UsageSummary(requests=100, failures=3), 0.05)["llm_failure_fraction"] == 0.03

    def test_above_the_threshold_one_sentence_says_what_and_how(self):
        summary = UsageSummary(
            requests=20,
            failures=20,
            invalid_responses=20,
            first_errors=["invalid_response: response is not valid JSON"],
        )
        message = failure_budget_message(summary, 0.05, "object_phrases", "phrase_llm")
        assert message.startswith("object_phrases failed: 20 of 20 model requests failed (100.0%")
        assert "20 invalid answers" in message and "response is not valid JSON" in message
        assert "requery_quarantined: true on the phrase_llm resource" in message
        assert "pays only for the 20 failed requests" in message
        assert message.count(". ") == 0 and message.endswith(".")  # one sentence

    def test_the_threshold_is_a_setting(self):
        assert FailureBudgetSettings().max_failure_fraction == 0.05
        assert FailureBudgetSettings(max_failure_fraction=1.0).max_failure_fraction == 1.0
        with pytest.raises(ValueError):
            FailureBudgetSettings(max_failure_fraction=1.5)
