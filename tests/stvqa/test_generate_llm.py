"""Generation with the ``anthropic`` backend against the loopback Anthropic Messages server.

The server answers from scripted responders; the real ``anthropic`` SDK, the client layer's retries,
cache and cost accounting, and the STVQA prompt, schema, validation, re-ask and quarantine all run.
"""

import json
import logging

import pytest

from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.prompts import GENERATION_PROMPT_VERSION
from tests.fakes.llm_servers import Fault, request_schema, request_text
from tests.stvqa.conftest import TEST_API_KEY
from tests.stvqa.helpers import COUNT_ITEM, RELATION_ITEM

REASK_MARKER = "Your previous answer for this scene had these problems"


def _settings(**overrides):
    settings = {"backend": "anthropic", "questions_per_image": 2, "chunk_size": 2}
    settings.update(overrides)
    return QuestionGenerationSettings(**settings)


def test_generation_through_the_anthropic_protocol(
    llm_server_factory, make_llm_client, sample_scene_graphs, caplog
):
    server = llm_server_factory(
        "anthropic", responder=lambda body: {"questions": [RELATION_ITEM, COUNT_ITEM]}
    )
    client = make_llm_client(server)
    with caplog.at_level(logging.DEBUG):
        output = generate_candidates(sample_scene_graphs, _settings(), client=client, progress=False)

    images = sample_scene_graphs.height
    assert server.hits == images  # one request per image, no retries needed
    body = server.requests[0].body
    assert body["model"] == "claude-sonnet-4-20250514" and body["temperature"] == 0.0
    assert body["tool_choice"] == {"type": "tool", "name": "stvqa_questions"}
    schema = request_schema(body)
    assert schema["properties"]["questions"]["items"]["properties"]["category"]["enum"][0] == "relation"
    assert "left of" in body["system"] and "facing away from" in body["system"]  # relation vocabulary
    text = request_text(body)
    assert "Image size: (160 x 120)" in text and '"id": "' in text and '"bbox": [' in text
    # running balance: the first chunk sees nothing, the second sees the first chunk's 4 questions
    texts = server.texts()
    assert sum("Questions generated so far: 0" in t for t in texts) == 2
    assert sum("Questions generated so far: 4" in t for t in texts) == 2

    candidates = output.candidates
    assert candidates.height == 2 * images
    assert set(candidates["generator"]) == {"anthropic:claude-sonnet-4-20250514"}
    assert set(candidates["prompt_version"]) == {GENERATION_PROMPT_VERSION}
    counts = candidates.filter(candidates["category"] == "count")
    # the model said 0 chairs; the gold moved to the option with the filtered scene's count
    for row in counts.iter_rows(named=True):
        assert row["options"][row["answer_index"]] != "0"
        assert row["gt_note"].startswith("count corrected")
        assert all(obj["id"].startswith("chair.") for obj in row["gt_scene"]["objects"])
    assert output.stats["count_corrected"] == images
    assert TEST_API_KEY not in caplog.text


def test_invalid_json_is_retried_once_then_quarantined(
    llm_server_factory, make_llm_client, sample_scene_graphs
):
    server = llm_server_factory("anthropic", responder=lambda body: "Sure! Here are some questions: none")
    output = generate_candidates(
        sample_scene_graphs.head(2), _settings(), client=make_llm_client(server), progress=False
    )
    assert server.hits == 4  # each answer asked once more
    assert output.candidates.height == 0
    rows = output.quarantine.to_frame()
    assert rows.height == 2 and all(reason.startswith("invalid_response") for reason in rows["reason"])
    assert all(
        "Here are some questions" in json.loads(payload)["raw_text"] for payload in rows["payload_json"]
    )


def test_gold_outside_options_is_reasked_and_fixed(llm_server_factory, make_llm_client, sample_scene_graphs):
    broken = {**RELATION_ITEM, "answer": "C"}

    def responder(body):
        return (
            {"questions": [RELATION_ITEM]} if REASK_MARKER in request_text(body) else {"questions": [broken]}
        )

    server = llm_server_factory("anthropic", responder=responder)
    output = generate_candidates(
        sample_scene_graphs.head(2), _settings(), client=make_llm_client(server), progress=False
    )
    assert server.hits == 4
    reasks = [text for text in server.texts() if REASK_MARKER in text]
    assert len(reasks) == 2 and all("gold letter C is outside the 2 options" in text for text in reasks)
    assert output.candidates.height == 2 and len(output.quarantine) == 0
    assert output.stats["generation_reasks"] == 2


def test_duplicate_options_twice_are_quarantined(llm_server_factory, make_llm_client, sample_scene_graphs):
    duplicated = {**RELATION_ITEM, "options": ["left of", "Left of "]}
    server = llm_server_factory(
        "anthropic", responder=lambda body: {"questions": [duplicated, RELATION_ITEM]}
    )
    output = generate_candidates(
        sample_scene_graphs.head(2), _settings(), client=make_llm_client(server), progress=False
    )
    assert server.hits == 4
    rows = output.quarantine.to_frame()
    assert rows.height == 2
    assert all("after one re-ask: options are not distinct" in reason for reason in rows["reason"])
    assert output.candidates.height == 2  # the valid item of each answer is kept


def test_faults_and_latency_lose_nothing(llm_server_factory, make_llm_client, sample_scene_graphs):
    server = llm_server_factory(
        "anthropic", latency_s=0.02, responder=lambda body: {"questions": [RELATION_ITEM]}
    )
    server.queue_faults(
        Fault.rate_limit(retry_after_s=0.05),
        Fault.server_error(529),
        Fault.truncated(),
        Fault.non_json(),
        Fault.timeout(delay_s=1.0),
    )
    client = make_llm_client(server, timeout_s=0.5)
    output = generate_candidates(sample_scene_graphs, _settings(chunk_size=6), client=client, progress=False)
    assert output.candidates.height == sample_scene_graphs.height
    assert len(output.quarantine) == 0
    assert server.hits >= sample_scene_graphs.height + 5
    assert client.summary.retries >= 5 and client.summary.cost_usd > 0


def test_rerun_is_served_from_the_cache(llm_server_factory, make_llm_client, sample_scene_graphs):
    server = llm_server_factory(
        "anthropic", responder=lambda body: {"questions": [RELATION_ITEM, COUNT_ITEM]}
    )
    first = generate_candidates(
        sample_scene_graphs, _settings(), client=make_llm_client(server), progress=False
    )
    hits = server.hits
    client = make_llm_client(server)
    again = generate_candidates(sample_scene_graphs, _settings(), client=client, progress=False)
    assert server.hits == hits and client.summary.api_calls == 0 and client.summary.cost_usd == 0
    assert again.candidates.equals(first.candidates)


def test_anthropic_backend_needs_a_client(sample_scene_graphs):
    with pytest.raises(ValueError, match="needs an LLM client"):
        generate_candidates(sample_scene_graphs, _settings(), progress=False)
