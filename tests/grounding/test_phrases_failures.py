"""``object_phrases`` with the ``openai`` backend fails loudly when the service fails.

Against the loopback OpenAI-compatible server: with the endpoint down, a bad key or nothing but garbage
answers the asset fails (``dagster.Failure``, one sentence with the counts, the first errors and how to
re-run) and writes no table; with 3% of the requests failing it materialises, quarantines the failed
questions (saying how to ask again) and counts them in the metadata, and a re-run pays only for them.
"""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest

from assets.grounding.assets import GROUNDING_ASSETS
from assets.sources.assets import SOURCE_ASSETS
from data_contracts.storage import table_path
from tests.fakes.llm_servers import Fault, LoopbackLLMServer, request_text
from tests.grounding.conftest import FAST, SELECTION, TEST_API_KEY, asset_metadata, grounding_resources


def _store_questions(root, world_questions: pl.DataFrame, count: int) -> list[str]:
    """``count`` distinct training questions written as the stored ``mcq_questions`` table; their texts."""
    base = world_questions.head(1)
    rows = pl.concat([base] * count).with_columns(
        pl.Series("question_id", [f"omnispatial/q{index:03d}" for index in range(count)]),
        pl.Series(
            "question", [f"Is the red mug number {index} left of the laptop?" for index in range(count)]
        ),
        pl.lit("train").alias("split"),
        pl.lit("omnispatial").alias("source"),
        pl.lit("Perspective_Taking").alias("task_type"),
    )
    rows.write_parquet(table_path(root, "mcq_questions"))
    return rows["question"].to_list()


def _phrases(body: dict) -> dict:
    return {"phrases": ["red mug", "laptop"]}


def _materialize(
    root, world, max_failure_fraction: float = 0.05, **llm_settings
) -> dg.ExecuteInProcessResult:
    config = {"backend": "openai", "send_image": False, "max_failure_fraction": max_failure_fraction}
    return dg.materialize(
        [*SOURCE_ASSETS, *GROUNDING_ASSETS],
        selection=SELECTION,
        resources=grounding_resources(root, world, **{**FAST, **llm_settings}),
        run_config={"ops": {"object_phrases_asset": {"config": config}}},
        raise_on_error=False,
    )


def _failure(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    (event,) = result.get_step_failure_events()
    return event.step_failure_data.user_failure_data.description


@pytest.fixture
def questions_20(tmp_path, world_questions) -> list[str]:
    return _store_questions(tmp_path, world_questions, 20)


def test_endpoint_down_fails_the_asset(tmp_path, small_world, questions_20):
    server = LoopbackLLMServer("openai").start()
    dead_url = server.base_url
    server.stop()  # nothing listens there any more: connection refused
    message = _failure(_materialize(tmp_path, small_world, base_url=dead_url, api_key=TEST_API_KEY))
    assert message.startswith("object_phrases failed: 20 of 20 model requests failed (100.0%")
    assert "20 transport failures" in message and "first errors: transport_error" in message
    assert "re-run object_phrases" in message and "pays only for the 20 failed requests" in message
    assert not table_path(tmp_path, "object_phrases").exists()  # nothing green feeds pseudo_gt_boxes


def test_a_bad_key_fails_the_asset_without_showing_it(
    tmp_path, small_world, questions_20, llm_server_factory
):
    server = llm_server_factory("openai", api_key=TEST_API_KEY, responder=_phrases)
    result = _materialize(tmp_path, small_world, base_url=server.base_url, api_key="sk-not-the-right-key-99")
    message = _failure(result)
    assert "20 of 20 model requests failed" in message and "20 refused" in message and "401" in message
    assert "sk-not-the-right-key-99" not in str(result.all_events)
    assert server.hits == 20  # refusals are not retried
    assert not table_path(tmp_path, "object_phrases").exists()


def test_garbage_answers_fail_the_asset_and_say_how_to_ask_again(
    tmp_path, small_world, questions_20, llm_server_factory
):
    server = llm_server_factory("openai", responder=lambda body: "<html>oops</html>")
    message = _failure(_materialize(tmp_path, small_world, base_url=server.base_url, api_key=TEST_API_KEY))
    assert "20 of 20 model requests failed" in message and "20 invalid answers" in message
    assert "requery_quarantined: true on the phrase_llm resource" in message
    assert server.hits == 40  # every answer asked again once

    server.responder = _phrases  # the model behaves again: the cached quarantine is asked again on request
    result = _materialize(
        tmp_path, small_world, base_url=server.base_url, api_key=TEST_API_KEY, requery_quarantined=True
    )
    assert result.success and server.hits == 60
    assert pl.read_parquet(table_path(tmp_path, "object_phrases")).height == 20


def test_three_percent_failures_pass_and_are_counted(
    tmp_path, small_world, world_questions, llm_server_factory
):
    texts = _store_questions(tmp_path, world_questions, 100)
    refused = set(texts[:3])
    server = llm_server_factory("openai", responder=_phrases)
    server.fault_policy = lambda recorded, hit: (
        Fault.http_error(400, "image too large")
        if request_text(recorded.body).splitlines()[0].removeprefix("Question: ") in refused
        else None
    )
    result = _materialize(tmp_path, small_world, base_url=server.base_url, api_key=TEST_API_KEY)
    assert result.success
    metadata = asset_metadata(result)
    assert metadata["llm_failures"] == 3 and metadata["llm_rejected"] == 3
    assert metadata["llm_failure_fraction"] == 0.03 and metadata["max_failure_fraction"] == 0.05
    assert "image too large" in metadata["llm_first_errors"]
    assert pl.read_parquet(table_path(tmp_path, "object_phrases")).height == 97
    quarantine = pl.read_parquet(table_path(tmp_path, "object_phrases_quarantine"))
    assert quarantine.height == 3 and all("a re-run asks again" in reason for reason in quarantine["reason"])

    # a stricter threshold fails on the same failures; the 97 good answers come from the cache
    hits = server.hits
    message = _failure(
        _materialize(tmp_path, small_world, 0.02, base_url=server.base_url, api_key=TEST_API_KEY)
    )
    assert "3 of 100 model requests failed (3.0%, above max_failure_fraction 2.0%" in message
    assert server.hits == hits + 3

    # once the service accepts them, a re-run pays only for the 3 failures
    server.fault_policy = None
    result = _materialize(tmp_path, small_world, base_url=server.base_url, api_key=TEST_API_KEY)
    assert result.success and server.hits == hits + 6
    assert asset_metadata(result)["llm_cache_hits"] == 97
    assert pl.read_parquet(table_path(tmp_path, "object_phrases")).height == 100
