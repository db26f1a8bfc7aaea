"""The grounding stages that call paid models (``object_phrases``, ``sft_cold_start``) in batch mode, their cost
estimate and their budget, on the sample world against the loopback OpenAI server.

Batch mode (OpenAI's Batch API over the real SDK) must write the tables of sync mode; the estimate made before
sending must be within 10% of what the server bills; ``max_cost_usd`` fails the asset before its first request
with one sentence.
"""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from assets.grounding.assets import GROUNDING_ASSETS
from assets.grounding.cold_start import ColdStartSettings, build_cold_start
from assets.grounding.training_table import build_spatialcore_train
from assets.sources.assets import SOURCE_ASSETS
from data_contracts.spatialcore_train import SpatialcoreTrain
from data_contracts.storage import table_path
from data_contracts.validation import polars_schema
from model_clients import LLMClient, LLMClientConfig
from tests.fakes.llm_servers import Fault, hide_cached_answers, request_text
from tests.grounding.conftest import FAST, SELECTION, TEST_API_KEY, asset_metadata, grounding_resources

BATCH = {"mode": "batch", "batch_poll_interval_s": 0.02, "batch_sync_reask_max": 0}
"""Batch mode with re-asks in new batches too (the default sends up to 20 re-asks one by one)."""


def phrases_of(body: dict):
    """Nouns of the question as phrases; a question about a "plant" gets an answer outside the schema."""
    question = request_text(body).splitlines()[0]
    if "plant" in question and "box" in question:
        return {"objects": ["plant"]}
    return {"phrases": [word.strip("?,.") for word in question.split() if len(word) > 5][:3]}


def reasoning_of(body: dict) -> dict:
    return {"reasoning": "The " + " ".join(request_text(body).split()[:12]) + " so the answer follows."}


def _materialize(root, world, **llm_settings) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [*SOURCE_ASSETS, *GROUNDING_ASSETS],
        selection=["mcq_questions", "mcq_images", "mcq_questions_quarantine", *SELECTION],
        resources=grounding_resources(root, world, **{**FAST, **llm_settings}),
        run_config={
            "ops": {"object_phrases_asset": {"config": {"backend": "openai", "max_failure_fraction": 1.0}}}
        },
        raise_on_error=False,
    )


def test_object_phrases_in_batch_mode_writes_the_tables_of_sync_mode(
    tmp_path, small_world, llm_server_factory
):
    sync_server = llm_server_factory("openai", responder=phrases_of)
    sync_root, batch_root = tmp_path / "sync", tmp_path / "batch"
    sync = _materialize(sync_root, small_world, base_url=sync_server.base_url, api_key=TEST_API_KEY)
    server = llm_server_factory("openai", responder=phrases_of)
    batch = _materialize(batch_root, small_world, base_url=server.base_url, api_key=TEST_API_KEY, **BATCH)
    assert sync.success and batch.success
    for table in SELECTION:
        assert pl.read_parquet(table_path(batch_root, table)).equals(
            pl.read_parquet(table_path(sync_root, table))
        )
    assert (
        server.calls("/chat/completions") == 0 and len(server.batches.batches) == 2
    )  # answers, then the re-ask
    metadata, sync_metadata = asset_metadata(batch), asset_metadata(sync)
    assert metadata["llm_mode"] == "batch" and metadata["llm_batches_submitted"] == 2
    assert metadata["llm_expected_finish"].endswith("UTC")
    assert metadata["llm_batch_completed"] >= metadata["llm_estimated_requests"]  # every request answered
    assert metadata["llm_prompt_tokens"] == sync_metadata["llm_prompt_tokens"]
    assert metadata["llm_cost_usd"] == pytest.approx(sync_metadata["llm_cost_usd"] / 2, rel=1e-3)
    # The estimate made before sending sits beside the actual cost, within 10% on the prompt per call (the
    # re-ask of the answer outside the schema is billed but cannot be foreseen).
    estimated = metadata["llm_estimated_prompt_tokens"] / metadata["llm_estimated_requests"]
    billed = metadata["llm_prompt_tokens"] / metadata["llm_api_calls"]
    assert metadata["llm_api_calls"] == metadata["llm_estimated_requests"] + 1
    assert abs(estimated - billed) <= 0.1 * billed


def test_max_cost_usd_fails_object_phrases_before_the_first_request(
    tmp_path, small_world, llm_server_factory
):
    server = llm_server_factory("openai", responder=phrases_of)
    result = _materialize(
        tmp_path, small_world, base_url=server.base_url, api_key=TEST_API_KEY, max_cost_usd=0.0001
    )
    assert not result.success
    (event,) = result.get_step_failure_events()
    failure = event.step_failure_data.user_failure_data
    assert failure.description.startswith("object_phrases: object phrases could cost up to $")
    assert "above max_cost_usd $0.00010: nothing was sent" in failure.description
    assert failure.metadata["llm_estimated_requests"].value > 0
    assert server.hits == 0 and not table_path(tmp_path, "object_phrases").exists()


@pytest.fixture(scope="module")
def training_frame(world_questions) -> pl.DataFrame:
    """The small world's questions with made-up pseudo-GT boxes."""
    ids = sorted(world_questions["question_id"].to_list())
    boxes = pl.DataFrame(
        {
            "question_id": ids,
            "pseudo_gt": [
                [{"bbox_2d": [100 + index, 100, 300, 300], "label": "red box", "validity": 0.8}]
                for index in range(len(ids))
            ],
        },
        schema_overrides={"pseudo_gt": polars_schema(SpatialcoreTrain)["pseudo_gt"]},
    )
    return build_spatialcore_train(world_questions, boxes)


def _client(server, cache_path, **overrides) -> LLMClient:
    settings = {"base_url": server.base_url, "api_key": TEST_API_KEY, "cache_path": cache_path, **FAST}
    return LLMClient(LLMClientConfig(**{**settings, **overrides}))


def test_sft_cold_start_in_batch_mode_equals_sync_and_is_estimated_within_ten_percent(
    training_frame, llm_server_factory, tmp_path
):
    settings = ColdStartSettings(samples=100, reasoning="llm")
    sync_server = llm_server_factory("openai", responder=reasoning_of)
    with _client(sync_server, tmp_path / "sync.sqlite") as client:
        sync_frame, sync_log, _ = build_cold_start(
            training_frame, settings, llm_client=client, progress=False
        )
        first_run = client.summary
    server = llm_server_factory("openai", responder=reasoning_of)
    with _client(server, tmp_path / "batch.sqlite", **BATCH) as client:
        frame, log, _ = build_cold_start(training_frame, settings, llm_client=client, progress=False)
    assert frame.equals(sync_frame) and log.rows == sync_log.rows and frame.height == training_frame.height
    assert server.calls("/chat/completions") == 0 and len(server.batches.batches) == 1

    # The estimate before the first run (completion from the max_tokens budget): the prompt within 10%.
    assert abs(first_run.estimated_prompt_tokens - first_run.prompt_tokens) <= 0.1 * first_run.prompt_tokens
    # A later run over new rows of the same template: the observed mean gives dollars within 10%.
    hide_cached_answers(tmp_path / "sync.sqlite")
    with _client(sync_server, tmp_path / "sync.sqlite") as client:
        build_cold_start(training_frame, settings, llm_client=client, progress=False)
        later = client.summary
    assert later.cache_hits == 0
    assert abs(later.estimated_cost_usd - later.cost_usd) <= 0.1 * later.cost_usd


@pytest.mark.parametrize("failure", ["server_error", "expired"])
def test_sft_cold_start_asks_a_failed_request_again_once_and_loses_no_row(
    failure, training_frame, llm_server_factory, tmp_path
):
    rows = training_frame.head(4)
    server = llm_server_factory("openai", responder=reasoning_of)
    if failure == "server_error":  # one request fails in every batch
        doomed = rows["question"][1].strip()
        server.batch_item_policy = lambda custom_id, body: (
            Fault.server_error(500) if doomed in request_text(body) else None
        )
    else:  # the first batch expires before its last request, the re-ask's batch before any
        server.expire_batches = {1: 3, 2: 0}
    settings = ColdStartSettings(samples=4, reasoning="llm")
    with _client(server, tmp_path / "cache.sqlite", **BATCH) as client:
        frame, log, _ = build_cold_start(rows, settings, llm_client=client, progress=False)
    # Every row is a training row or a quarantined one, with its reason; the failed request went out twice at most.
    assert frame.height == 3 and len(log.rows) == 1
    assert set(frame["question_id"]) | {log.rows[0]["record_id"]} == set(rows["question_id"])
    reason = log.rows[0]["reason"]
    assert reason.startswith("transport_error: ") and "asked again once after" in reason
    assert "a re-run asks again" in reason
    assert [len(batch.items) for batch in server.batches.batches.values()] == [4, 1]
    assert server.calls("/chat/completions") == 0
    attempts = json.loads(log.rows[0]["payload_json"])["attempts"]
    assert attempts == (
        2 if failure == "server_error" else 0
    )  # calls the provider ran, as sync mode counts them


def test_a_budget_on_a_model_without_a_price_fails_the_stage_with_one_sentence(
    tmp_path, small_world, llm_server_factory
):
    server = llm_server_factory("openai", responder=phrases_of)
    result = _materialize(
        tmp_path,
        small_world,
        base_url=server.base_url,
        api_key=TEST_API_KEY,
        model="deepseek-reasoner",
        max_cost_usd=5.0,
    )
    assert not result.success
    (event,) = result.get_step_failure_events()
    assert event.step_failure_data.user_failure_data.description == (
        "object_phrases: model 'deepseek-reasoner' has no price, so max_cost_usd $5.00 cannot cap what it spends: "
        "set price_table: {deepseek-reasoner: {input_usd_per_million: ..., output_usd_per_million: ...}} on the "
        "phrase_llm resource (batch prices default to half), or remove max_cost_usd."
    )
    assert server.hits == 0 and not table_path(tmp_path, "object_phrases").exists()
