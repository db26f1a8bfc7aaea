"""The STVQA stages that call paid models (generation with Claude, pass@2 with GPT-4o) in batch mode, and their
cost estimate, on the sample world against the loopback servers.

Batch mode (Anthropic's Message Batches, OpenAI's Batch API, over the real SDKs) must give the tables of sync
mode with the same balance (at half the price in the attempts' cost column); the estimate made before sending
must be within 10% of what the server bills. The budget: ``test_llm_budget.py``.
"""

from __future__ import annotations

import hashlib

import polars as pl
import pytest

from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.pass_at_2 import PassAt2Settings, run_pass_at_2
from tests.fakes.llm_servers import hide_cached_answers, request_text
from tests.stvqa.helpers import COUNT_ITEM, RELATION_ITEM

BATCH = {"mode": "batch", "batch_poll_interval_s": 0.02, "batch_sync_reask_max": 0}
GENERATION = QuestionGenerationSettings(backend="anthropic", questions_per_image=2, chunk_size=2)


def generated(body: dict) -> dict:
    return {"questions": [RELATION_ITEM, COUNT_ITEM]}


def judged(body: dict) -> str:
    """A deterministic judge: the letter follows from a hash of the question (right for some, wrong for others)."""
    text = request_text(body)
    return "AB"[hashlib.sha256(text.encode()).digest()[0] % 2]


@pytest.fixture(scope="module")
def template_candidates(sample_scene_graphs, sample_geometry) -> pl.DataFrame:
    settings = QuestionGenerationSettings(questions_per_image=3)
    return generate_candidates(sample_scene_graphs, settings, sample_geometry, progress=False).candidates


def test_generation_in_batch_mode_equals_sync_and_is_estimated_within_ten_percent(
    llm_server_factory, make_llm_client, sample_scene_graphs, sample_geometry, tmp_path
):
    planned = GENERATION.model_copy(
        update={"balance": "planned"}
    )  # batch mode's default, asked for in sync mode
    sync_server = llm_server_factory("anthropic", responder=generated)
    sync_client = make_llm_client(sync_server, cache_path=tmp_path / "sync.sqlite")
    sync = generate_candidates(sample_scene_graphs, planned, sample_geometry, sync_client, progress=False)
    server = llm_server_factory("anthropic", responder=generated)
    client = make_llm_client(server, cache_path=tmp_path / "batch.sqlite", **BATCH)
    output = generate_candidates(sample_scene_graphs, GENERATION, sample_geometry, client, progress=False)

    assert output.candidates.equals(sync.candidates) and output.quarantine.rows == sync.quarantine.rows
    assert output.candidates.height == 2 * sample_scene_graphs.height
    # The planned balance writes every prompt up front: one batch for every image, whatever chunk_size says.
    assert server.calls("/v1/messages") == 0 and len(server.batches.batches) == 1
    assert client.summary.batch_waits == 1
    batch_prompts = sorted(request_text(body) for _, body in server.batches.batches.popitem()[1].items)
    assert batch_prompts == sorted(sync_server.texts())  # the same requests as sync mode asked
    assert all(
        text.startswith("Planned balance of the questions before this scene") for text in batch_prompts
    )
    assert client.summary.cost_usd == pytest.approx(sync_client.summary.cost_usd / 2)

    first = sync_client.summary  # the estimate before the first run: prompt tokens within 10%
    assert abs(first.estimated_prompt_tokens - first.prompt_tokens) <= 0.1 * first.prompt_tokens
    hide_cached_answers(tmp_path / "sync.sqlite")  # a later run: other images, same template (observed mean)
    later_client = make_llm_client(sync_server, cache_path=tmp_path / "sync.sqlite")
    generate_candidates(sample_scene_graphs, GENERATION, sample_geometry, later_client, progress=False)
    later = later_client.summary
    assert later.cache_hits == 0 and abs(later.estimated_cost_usd - later.cost_usd) <= 0.1 * later.cost_usd


def test_pass_at_2_in_batch_mode_equals_sync_at_half_the_price(
    llm_server_factory, make_llm_client, template_candidates, sample_scene_graphs, tmp_path
):
    settings = PassAt2Settings(backend="openai")
    sync_server = llm_server_factory("openai", responder=judged)
    sync_client = make_llm_client(sync_server, cache_path=tmp_path / "sync.sqlite")
    sync = run_pass_at_2(
        template_candidates, sample_scene_graphs, settings, client=sync_client, progress=False
    )
    server = llm_server_factory("openai", responder=judged)
    client = make_llm_client(server, cache_path=tmp_path / "batch.sqlite", **BATCH)
    output = run_pass_at_2(template_candidates, sample_scene_graphs, settings, client=client, progress=False)

    assert output.validated.equals(sync.validated) and output.quarantine.rows == sync.quarantine.rows
    assert 0 < output.validated.height < template_candidates.height  # some kept, some filtered out
    assert output.attempts.drop("cost_usd").equals(sync.attempts.drop("cost_usd"))
    assert output.attempts["cost_usd"].sum() == pytest.approx(sync.attempts["cost_usd"].sum() / 2)
    assert server.calls("/chat/completions") == 0 and len(server.batches.batches) == 2  # round 1, round 2

    first = sync_client.summary  # images at high detail and one-letter answers: estimated within 10%
    assert abs(first.estimated_prompt_tokens - first.prompt_tokens) <= 0.1 * first.prompt_tokens
    hide_cached_answers(tmp_path / "sync.sqlite")
    later_client = make_llm_client(sync_server, cache_path=tmp_path / "sync.sqlite")
    run_pass_at_2(template_candidates, sample_scene_graphs, settings, client=later_client, progress=False)
    later = later_client.summary
    assert later.cache_hits == 0 and abs(later.estimated_cost_usd - later.cost_usd) <= 0.1 * later.cost_usd
