"""The model-calling STVQA shards fail loudly when the service fails, instead of materialising tiny tables.

Against the loopback servers: ``stvqa_candidates`` (Anthropic protocol) with the endpoint down, and
``stvqa_validated`` (OpenAI protocol) with a bad key or nothing but garbage replies, fail with
``dagster.Failure`` (one sentence: counts, first errors, how to re-run) and write no shard; within the
threshold the shard materialises with the failure counts in its metadata.
"""

from __future__ import annotations

import dagster as dg
import pytest

from assets.resources import LLMResource, SourcesResource, StorageResource, WorkersResource
from assets.sources.assets import scene_graphs_asset
from assets.stvqa.assets import stvqa_candidates_asset, stvqa_validated_asset
from assets.stvqa.shards import shard_of
from data_contracts.storage import read_table, table_path
from pipelines.io_manager import ParquetIOManager
from tests.fakes.llm_servers import LoopbackLLMServer
from tests.stvqa.conftest import TEST_API_KEY

SHARD_ASSETS = [scene_graphs_asset, stvqa_candidates_asset, stvqa_validated_asset]
FAST = {"backoff_base_s": 0.01, "backoff_max_s": 0.02, "max_retries": 1, "timeout_s": 2.0}


def _resources(root, world, generator: dict | None = None, judge: dict | None = None) -> dict:
    return {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "workers": WorkersResource(max_workers=1),
        "sources": SourcesResource(sample_world_root=str(world)),
        "stvqa_generator_llm": LLMResource(
            provider="anthropic",
            model="claude-sonnet-4-20250514",
            storage_root=str(root),
            **FAST,
            **(generator or {}),
        ),
        "stvqa_judge_llm": LLMResource(
            provider="openai", model="gpt-4o", storage_root=str(root), **FAST, **(judge or {})
        ),
    }


@pytest.fixture
def shard_store(tmp_path, small_world):
    """A storage root with ``scene_graphs`` and the offline candidates of its fullest shard; (root, shard)."""
    resources = _resources(tmp_path, small_world)
    assert dg.materialize([scene_graphs_asset], resources=resources).success
    image_ids = read_table(tmp_path, "scene_graphs")["image_id"].to_list()
    shard = max(
        sorted({shard_of(image_id) for image_id in image_ids}), key=[shard_of(i) for i in image_ids].count
    )
    candidates = dg.materialize(
        SHARD_ASSETS,
        selection=[stvqa_candidates_asset],
        partition_key=shard,
        resources=resources,
        run_config={"ops": {"stvqa_candidates_asset": {"config": {"questions_per_image": 8}}}},
    )
    assert candidates.success
    return tmp_path, shard


def _failure(result: dg.ExecuteInProcessResult) -> str:
    assert not result.success
    (event,) = result.get_step_failure_events()
    return event.step_failure_data.user_failure_data.description


def _validate(root, world, shard, judge: dict, **config) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        SHARD_ASSETS,
        selection=[stvqa_validated_asset],
        partition_key=shard,
        resources=_resources(root, world, judge=judge),
        run_config={"ops": {"stvqa_validated_asset": {"config": {"backend": "openai", **config}}}},
        raise_on_error=False,
    )


def test_generation_with_the_endpoint_down_fails(shard_store, small_world):
    root, shard = shard_store
    server = LoopbackLLMServer("anthropic").start()
    dead_url = server.base_url
    server.stop()
    result = dg.materialize(
        SHARD_ASSETS,
        selection=[stvqa_candidates_asset],
        partition_key=shard,
        resources=_resources(root, small_world, generator={"base_url": dead_url, "api_key": TEST_API_KEY}),
        run_config={"ops": {"stvqa_candidates_asset": {"config": {"backend": "anthropic"}}}},
        raise_on_error=False,
    )
    message = _failure(result)
    assert message.startswith(f"stvqa_candidates shard {shard} failed: ")
    assert "transport failures" in message and "stvqa_generator_llm" in message
    assert "pays only for the" in message


def test_judging_with_a_bad_key_fails(shard_store, small_world, llm_server_factory):
    root, shard = shard_store
    server = llm_server_factory("openai", api_key=TEST_API_KEY, responder=lambda body: "A")
    result = _validate(
        root, small_world, shard, {"base_url": server.base_url, "api_key": "sk-wrong-judge-key-7"}
    )
    message = _failure(result)
    assert "refused" in message and "401" in message and "stvqa_judge_llm" in message
    assert "sk-wrong-judge-key-7" not in str(result.all_events)
    assert not table_path(root, "stvqa_validated", shard).exists()  # nothing feeds stvqa


def test_garbage_judge_replies_fail_and_say_how_to_ask_again(shard_store, small_world, llm_server_factory):
    root, shard = shard_store
    server = llm_server_factory("openai", responder=lambda body: "Let me think about")
    message = _failure(
        _validate(root, small_world, shard, {"base_url": server.base_url, "api_key": TEST_API_KEY})
    )
    assert "invalid answers" in message and "reply is not one option letter" in message
    assert "requery_quarantined: true on the stvqa_judge_llm resource" in message
    assert not table_path(root, "stvqa_validated", shard).exists()


def test_judging_within_the_threshold_materialises_with_the_counts(
    shard_store, small_world, llm_server_factory
):
    root, shard = shard_store
    server = llm_server_factory("openai", responder=lambda body: "Let me think about")
    result = _validate(
        root,
        small_world,
        shard,
        {"base_url": server.base_url, "api_key": TEST_API_KEY},
        max_failure_fraction=1.0,
    )
    assert result.success
    event = next(
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "stvqa_validated"
    )
    metadata = {name: value.value for name, value in event.materialization.metadata.items()}
    assert metadata["llm_failure_fraction"] == 1.0 and metadata["max_failure_fraction"] == 1.0
    quarantine = read_table(root, "stvqa_validated_quarantine", [shard])
    assert quarantine.height == read_table(root, "stvqa_candidates", [shard]).height
    assert all("requery_quarantined" in reason for reason in quarantine["reason"])
