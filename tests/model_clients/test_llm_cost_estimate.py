"""Cost before spending: the estimate of uncached requests against what the loopback servers bill, and the budget.

The servers report usage the way the providers bill (tests/fakes/token_counts.py, written apart from the
client's estimator): text, chat format, schema or tool, images by pixel size and detail. The estimate must
be within 10% of it, prompt and completion; ``max_cost_usd`` stops a call before its first request.
"""

from __future__ import annotations

import io
import json

import pytest

from model_clients import BudgetExceededError, LLMRequest, ModelPrice, UnpricedModelError
from model_clients.estimate import MIN_OBSERVED_ANSWERS, TokenEstimator, image_size
from model_clients.pricing import format_usd
from tests.fakes.llm_servers import request_text
from tests.fakes.token_counts import anthropic_image_tokens, openai_image_tokens
from tests.model_clients.conftest import PHRASES_SCHEMA

PROTOCOLS = ("openai", "anthropic")
SCENE_GRAPH = json.dumps(
    {
        "objects": [
            {"id": f"chair.{n}", "bbox": [12 * n, 40 + n, 60 + 12 * n, 118 + 2 * n], "attributes": ["wooden"]}
            for n in range(8)
        ],
        "relationships": [{"subject": "chair.1", "predicate": "left of", "object": "table.1"}],
    }
)


def image(width: int, height: int, kind: str = "PNG") -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (20, 90, 160)).save(buffer, kind)
    return buffer.getvalue()


def mixed_requests() -> list[LLMRequest]:
    """Text, numbers and JSON, schemas, and images of several sizes and details (as the paid stages send)."""
    return (
        [
            LLMRequest(
                "object_phrases",
                "v1",
                f"Question: Is the gray vehicle number {n} to the left of the boy in orange clothes?\nOptions: A. yes B. no",
                system="Extract the physical objects and persons mentioned in the question and the options.",
                schema=PHRASES_SCHEMA,
                images=[image(160, 120)] if n % 2 else [],
                parameters={"image_detail": "low", "max_tokens": 256},
            )
            for n in range(6)
        ]
        + [
            LLMRequest(
                "stvqa_generation",
                "v1",
                f"Image size: (1024 x 768)\nScene graph {n}:\n{SCENE_GRAPH}\nWrite 3 questions.",
                system="You write multiple-choice spatial questions about an image from its scene graph.",
                schema=PHRASES_SCHEMA,
                parameters={"max_tokens": 2048},
            )
            for n in range(3)
        ]
        + [
            LLMRequest(
                "pass_at_2",
                "v1",
                "Where is the chair with respect to the table?\n(A) left of\n(B) right of\nReply with only the letter.",
                images=[image(width, height, kind)],
                parameters={"image_detail": "high", "max_tokens": 5},
                sample_index=n,
            )
            for n, (width, height, kind) in enumerate(
                [(800, 600, "JPEG"), (3000, 2000, "PNG"), (400, 1600, "GIF")]
            )
        ]
    )


class TestImageTokens:
    @pytest.mark.parametrize(
        ("size", "kind"),
        [((160, 120), "PNG"), ((1024, 768), "JPEG"), ((333, 77), "GIF"), ((640, 480), "WEBP")],
    )
    def test_image_size_from_the_header(self, size, kind):
        assert image_size(image(*size, kind)) == size  # read from the header, without decoding

    @pytest.mark.parametrize("size", [(160, 120), (800, 600), (3000, 2000), (400, 1600), (2048, 4096)])
    @pytest.mark.parametrize("detail", ["low", "high"])
    def test_image_tokens_match_the_providers_rules(self, size, detail):
        data = image(*size)
        for model in ("gpt-4o", "gpt-4o-mini"):
            assert TokenEstimator("openai", model).image_tokens(data, detail) == openai_image_tokens(
                data, detail, model
            )
        assert TokenEstimator("anthropic", "claude-sonnet-4").image_tokens(
            data, detail
        ) == anthropic_image_tokens(data)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_prompt_estimate_is_within_ten_percent_of_the_billed_tokens(
    protocol, llm_server_factory, make_llm_client
):
    server = llm_server_factory(protocol, responder=lambda body: {"phrases": request_text(body).split()[:3]})
    client = make_llm_client(server)
    requests = mixed_requests()
    estimate = client.estimate(requests)
    results = client.run_batch(requests, progress=False)
    billed = sum(result.usage.prompt_tokens for result in results)
    assert all(result.ok for result in results)
    assert estimate.requests == len(requests) and estimate.cached == 0
    assert abs(estimate.prompt_tokens - billed) <= 0.10 * billed
    # Per request too, so that no kind of prompt hides behind another.
    for request, result in zip(requests, results, strict=True):
        single = client._estimate([request], [0], cached=0)
        assert abs(single.prompt_tokens - result.usage.prompt_tokens) <= 0.10 * result.usage.prompt_tokens + 3


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_completion_estimate_from_the_budget_then_the_observed_mean(
    protocol, llm_server_factory, make_llm_client
):
    server = llm_server_factory(protocol, responder=lambda body: {"phrases": ["red mug", "laptop"]})
    client = make_llm_client(server)
    first = [
        LLMRequest("object_phrases", "v1", f"q{n}", schema=PHRASES_SCHEMA, parameters={"max_tokens": 256})
        for n in range(MIN_OBSERVED_ANSWERS)
    ]
    before = client.estimate(first)
    assert (
        before.completion_tokens == 256 * MIN_OBSERVED_ANSWERS
        and "max_tokens budget" in before.completion_basis
    )
    client.run_batch(first, progress=False)

    later = [
        LLMRequest("object_phrases", "v1", f"r{n}", schema=PHRASES_SCHEMA, parameters={"max_tokens": 256})
        for n in range(8)
    ]
    after = client.estimate(later)
    results = client.run_batch(later, progress=False)
    billed = sum(result.usage.completion_tokens for result in results)
    assert "observed mean of 5 answers" in after.completion_basis
    assert abs(after.completion_tokens - billed) <= 0.10 * billed
    billed_cost = sum(result.cost_usd for result in results)
    assert abs(after.cost_usd - billed_cost) <= 0.10 * billed_cost
    # The summary keeps estimate and actual side by side.
    metadata = client.summary.as_metadata()
    assert metadata["llm_estimated_requests"] == MIN_OBSERVED_ANSWERS + 8
    assert metadata["llm_estimated_cost_usd"] > 0 and metadata["llm_cost_usd"] > 0


def test_cached_requests_cost_nothing(openai_server, make_llm_client):
    client = make_llm_client(openai_server)
    requests = [LLMRequest("t", "v1", f"question {n}") for n in range(4)]
    client.run_batch(requests[:3], progress=False)
    estimate = client.estimate(requests + requests[:1])  # a duplicate counts once
    assert (estimate.requests, estimate.cached) == (1, 3)


@pytest.mark.parametrize("mode", ["sync", "batch"])
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_max_cost_usd_stops_a_call_before_the_first_request(
    protocol, mode, llm_server_factory, make_llm_client, caplog
):
    server = llm_server_factory(protocol)
    client = make_llm_client(server, mode=mode, max_cost_usd=0.001, batch_poll_interval_s=0.02)
    requests = mixed_requests()
    with pytest.raises(BudgetExceededError) as raised:
        client.run_batch(requests, progress=False, description="stvqa generation")
    message = str(raised.value)
    assert server.hits == 0 and client.cache.batch_jobs() == []  # nothing sent, nothing submitted
    assert message.startswith("stvqa generation could cost up to $") and "max_cost_usd $0.0010:" in message
    assert "nothing was sent" in message
    assert message.count(". ") == 0 and message.endswith(".") and "\n" not in message  # one sentence
    assert (" batch price" in message) == (mode == "batch")
    assert ("use mode: batch" in message) == (mode == "sync")  # no batch-mode advice to a batch stage
    assert raised.value.estimate.requests == len(requests)
    assert message in caplog.text

    # Within the budget the call runs; what it spent counts toward the next call's budget.
    cheap = make_llm_client(server, mode=mode, max_cost_usd=1.0, batch_poll_interval_s=0.02)
    assert all(result.ok for result in cheap.run_batch(requests[:2], progress=False))
    cheap.config = cheap.config.model_copy(update={"max_cost_usd": cheap.summary.cost_usd})
    with pytest.raises(BudgetExceededError, match=r"on top of \$[0-9.]+ already spent") as raised:
        cheap.run_batch(requests[2:4], progress=False)
    assert "nothing more was sent and the answers already paid stay in the response cache" in str(
        raised.value
    )


def test_stage_estimate_checks_the_whole_stage(openai_server, make_llm_client):
    client = make_llm_client(openai_server, max_cost_usd=0.0001)
    with pytest.raises(BudgetExceededError, match="^object_phrases could cost up to"):
        client.estimate(mixed_requests(), label="object_phrases", check_budget=True)
    assert openai_server.hits == 0
    assert client.estimate(mixed_requests()[:1], label="object_phrases", check_budget=False).requests == 1


def test_a_running_call_stops_before_the_request_that_could_pass_the_budget(openai_server, make_llm_client):
    # Earlier answers of the template were short, so the estimate made before the call (observed mean) is low;
    # these answers are long. Each request holds what it could cost at most (its prompt, its whole max_tokens).
    openai_server.responder = lambda body: {"phrases": ["red mug"]}
    primer = make_llm_client(openai_server)
    primer.run_batch(
        [LLMRequest("object_phrases", "v1", f"old question {n}", schema=PHRASES_SCHEMA) for n in range(6)],
        progress=False,
    )
    openai_server.responder = lambda body: {"phrases": [f"phrase number {n} " * 4 for n in range(40)]}
    requests = [
        LLMRequest(
            "object_phrases", "v1", f"question {n}", schema=PHRASES_SCHEMA, parameters={"max_tokens": 512}
        )
        for n in range(10)
    ]
    probe = make_llm_client(openai_server, cache_path=primer.config.cache_path.parent / "probe.sqlite")
    worst = probe.estimate(requests[:1]).cost_usd  # no answers in that cache: the whole max_tokens
    budget = 3.5 * worst
    client = make_llm_client(openai_server, max_concurrency=1, max_cost_usd=budget)
    assert client.estimate(requests).upper_bound_usd < budget  # the estimate before the call lets it start
    hits = openai_server.hits
    with pytest.raises(BudgetExceededError) as raised:
        client.run_batch(requests, progress=False, description="object_phrases")
    message = str(raised.value)
    assert message.startswith("object_phrases stopped before request ") and message.endswith(".")
    assert ". " not in message and f"max_cost_usd {format_usd(budget)}" in message
    assert f"{format_usd(client.spent_usd)} spent so far" in message
    sent = openai_server.hits - hits
    assert 0 < sent < len(requests) and client.spent_usd <= budget  # the cap held
    assert client.summary.api_calls == sent and client.summary.cost_usd == pytest.approx(client.spent_usd)

    # What was paid is in the cache: a run without the budget asks only the others.
    rest = make_llm_client(openai_server).run_batch(requests, progress=False)
    assert sum(result.cached for result in rest) == sent and openai_server.hits - hits == len(requests)


def test_a_budget_on_a_model_without_a_price_is_refused(openai_server, make_llm_client):
    with pytest.raises(UnpricedModelError) as raised:
        make_llm_client(openai_server, model="deepseek-reasoner", max_cost_usd=5.0)
    assert str(raised.value) == (
        "model 'deepseek-reasoner' has no price, so max_cost_usd $5.00 cannot cap what it spends: set price_table: "
        "{deepseek-reasoner: {input_usd_per_million: ..., output_usd_per_million: ...}} on the LLM resource (batch "
        "prices default to half), or remove max_cost_usd."
    )
    priced = make_llm_client(
        openai_server,
        model="deepseek-reasoner",
        max_cost_usd=5.0,
        price_table={"deepseek-reasoner": ModelPrice(0.55, 2.19)},
    )
    assert priced.estimate([LLMRequest("t", "v1", "question")]).cost_usd > 0
    unpriced = make_llm_client(
        openai_server, model="deepseek-reasoner"
    )  # no budget: estimated, reported unpriced
    assert not unpriced.estimate([LLMRequest("t", "v1", "question")]).priced
