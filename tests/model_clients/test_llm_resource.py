"""The Dagster resource: EnvVar keys, cache location, price overrides, metadata without secrets."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.resources import LLMResource
from data_contracts.storage import LLM_CACHE_RELATIVE_PATH
from model_clients import LLMRequest, UsageSummary
from tests.model_clients.conftest import PHRASES_SCHEMA, TEST_API_KEY


@dg.asset
def phrase_answers(llm: LLMResource) -> dg.MaterializeResult:
    """A minimal LLM-backed asset: ask three questions, report the usage summary."""
    requests = [
        LLMRequest("object_phrases", "v1", f"question {number}", schema=PHRASES_SCHEMA) for number in range(3)
    ]
    with llm.get_client() as client:
        results = client.run_batch(requests, progress=False)
        metadata = client.summary.as_metadata()
    metadata["answers"] = dg.MetadataValue.json([result.data for result in results])
    return dg.MaterializeResult(metadata=metadata)


def test_materialize_with_env_var_key(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_LLM_API_KEY", TEST_API_KEY)
    openai_server.api_key = TEST_API_KEY  # the server refuses calls without this key
    llm = LLMResource(
        provider="openai",
        model="gpt-4o-mini",
        base_url=openai_server.base_url,
        api_key=dg.EnvVar("TEST_LLM_API_KEY"),
        storage_root=str(tmp_path),
    )
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([phrase_answers], resources={"llm": llm}, instance=instance)
    assert result.success

    materialization = result.asset_materializations_for_node("phrase_answers")[0]
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    assert metadata["llm_requests"] == 3 and metadata["llm_api_calls"] == 3 and metadata["llm_failures"] == 0
    assert metadata["llm_cost_usd"] > 0
    assert (tmp_path / LLM_CACHE_RELATIVE_PATH).exists()

    # The key appears nowhere in the run's events (metadata, logs, resource config display).
    records = instance.get_records_for_run(result.run_id).records
    assert records and all(TEST_API_KEY not in str(record.event_log_entry) for record in records)

    # A rebuild is served from the cache.
    rebuild = dg.materialize([phrase_answers], resources={"llm": llm}, instance=instance)
    rebuilt = rebuild.asset_materializations_for_node("phrase_answers")[0].metadata
    assert rebuilt["llm_cache_hits"].value == 3 and rebuilt["llm_api_calls"].value == 0
    assert openai_server.hits == 3


@pytest.mark.parametrize(
    ("fields", "environment", "expected"),
    [
        ({"cache_path": "/somewhere/cache.sqlite"}, {}, Path("/somewhere/cache.sqlite")),  # explicit path
        (
            {"storage_root": "/data/root"},
            {"SPATIAL_DATA_ROOT": "/env/root"},
            Path("/data/root") / LLM_CACHE_RELATIVE_PATH,
        ),
        (
            {},
            {"SPATIAL_DATA_ROOT": "/env/root"},
            Path("/env/root") / LLM_CACHE_RELATIVE_PATH,
        ),  # from the environment
        (
            {},
            {"DAGSTER_HOME": "/home/dagster"},
            Path("/home/dagster/spatial_data") / LLM_CACHE_RELATIVE_PATH,
        ),  # where spatial-build writes under dev.sh
        ({}, {}, Path("data").resolve() / LLM_CACHE_RELATIVE_PATH),  # the default storage root
    ],
)
def test_cache_location(fields, environment, expected, monkeypatch):
    monkeypatch.delenv("SPATIAL_DATA_ROOT", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert LLMResource(**fields).resolved_cache_path() == expected


def test_price_table_override_and_repr():
    llm = LLMResource(
        model="my-vllm-model",
        api_key=TEST_API_KEY,
        price_table={"my-vllm": {"input_usd_per_million": 0.1, "output_usd_per_million": 0.2}},
    )
    config = llm.client_config()
    assert config.price_table["my-vllm"].output_usd_per_million == 0.2
    assert config.price_table["gpt-4o"].input_usd_per_million == 2.5  # defaults kept
    assert TEST_API_KEY not in repr(llm)


def test_invalid_provider_is_refused():
    with pytest.raises(ValueError, match="provider must be one of"):
        LLMResource(provider="cohere").client_config()


def test_summary_metadata_is_plain_values():
    metadata = UsageSummary(
        provider="anthropic", model="claude-sonnet-4", requests=2, cost_usd=0.0123456789
    ).as_metadata()
    assert metadata["llm_cost_usd"] == 0.012346
    assert all(isinstance(value, (int, float, str)) for value in metadata.values())


def test_batch_mode_budget_and_batch_prices_from_the_resource(openai_server, tmp_path):
    llm = LLMResource(
        provider="openai",
        model="my-model",
        base_url=openai_server.base_url,
        api_key=TEST_API_KEY,
        storage_root=str(tmp_path),
        mode="batch",
        batch_poll_interval_s=0.02,
        max_cost_usd=5.0,
        price_table={
            "my-model": {
                "input_usd_per_million": 1.0,
                "output_usd_per_million": 4.0,
                "batch_input_usd_per_million": 0.4,
            }
        },
    )
    config = llm.client_config()
    assert (config.mode, config.max_cost_usd) == ("batch", 5.0)
    price = config.price_table["my-model"]
    assert (price.batch_input_usd_per_million, price.batch_output_usd_per_million) == (0.4, 2.0)

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([phrase_answers], resources={"llm": llm}, instance=instance)
    assert result.success and openai_server.calls("/chat/completions") == 0
    metadata = result.asset_materializations_for_node("phrase_answers")[0].metadata
    assert metadata["llm_mode"].value == "batch" and metadata["llm_batches_submitted"].value == 1
    usage = metadata["llm_prompt_tokens"].value * 0.4 + metadata["llm_completion_tokens"].value * 2.0
    assert metadata["llm_cost_usd"].value == pytest.approx(usage / 1e6, abs=1e-6)
    # The estimate and the batch progress are in the run's own log.
    messages = [
        record.event_log_entry.user_message for record in instance.get_records_for_run(result.run_id).records
    ]
    assert any("estimate 3 uncached requests" in message for message in messages)
    assert any("submitted batch" in message for message in messages)


def test_a_run_config_naming_only_mode_and_budget_keeps_every_stage_model(tmp_path):
    from pipelines.definitions import build_resources

    seen: dict[str, dict] = {}
    keys = ("phrase_llm", "sft_reasoning_llm", "stvqa_generator_llm", "stvqa_judge_llm")

    @dg.asset(required_resource_keys=set(keys))
    def llm_settings(context) -> None:
        for key in keys:
            config = getattr(context.resources, key).client_config(tmp_path)
            seen[key] = config.model_dump(exclude={"price_table", "api_key", "cache_path"})

    resources = build_resources(str(tmp_path))
    defaults = {
        key: resources[key]
        .client_config(tmp_path)
        .model_dump(exclude={"price_table", "api_key", "cache_path"})
        for key in keys
    }
    run_config = {"resources": {key: {"config": {"mode": "batch", "max_cost_usd": 1.5}} for key in keys}}
    assert dg.materialize([llm_settings], resources=resources, run_config=run_config).success
    for key in keys:
        assert seen[key] == {**defaults[key], "mode": "batch", "max_cost_usd": 1.5}, key
    assert (seen["stvqa_generator_llm"]["provider"], seen["stvqa_generator_llm"]["model"]) == (
        "anthropic",
        "claude-sonnet-4-20250514",
    )
    assert (seen["stvqa_judge_llm"]["model"], seen["stvqa_judge_llm"]["temperature"]) == ("gpt-4o", 1.0)
    assert resources["phrase_llm"].api_key_env == "OPENAI_API_KEY"
