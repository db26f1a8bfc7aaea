"""The model-calling STVQA stages over many shards in one run, against the loopback servers, in batch mode.

A range run asks round ``k`` of every shard in one call: generation (planned balance) is one set of batches for
every image of every shard, pass@2 two (round 1, round 2), whatever the number of shards. The run config of
``model_clients/README.md`` for the paid stages keeps each stage's provider, model and sampling (the resource
class's defaults), and the run's log and metadata name them.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import dagster as dg
import yaml

from assets.resources import SourcesResource, WorkersResource
from assets.sources.assets import scene_graphs_asset
from assets.stvqa.assets import stvqa_candidates_asset, stvqa_validated_asset
from assets.stvqa.generate import QuestionGenerationSettings, generation_task
from assets.stvqa.shards import shard_of
from data_contracts.storage import read_table
from model_clients.rounds import run_rounds
from pipelines.cli import partition_range_tags
from pipelines.definitions import build_resources
from tests.stvqa.conftest import TEST_API_KEY
from tests.stvqa.helpers import COUNT_ITEM, RELATION_ITEM

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
SHARD_ASSETS = [scene_graphs_asset, stvqa_candidates_asset, stvqa_validated_asset]


def readme_paid_stage_yaml() -> dict:
    """The ``resources:`` run config of ``model_clients/README.md``'s "Paid stages" section, exactly as written
    there."""
    readme = (REPOSITORY_ROOT / "model_clients" / "README.md").read_text()
    section = readme[readme.index("## Paid stages") :]
    return yaml.safe_load(re.search(r"```yaml\n(.*?)```", section, re.S).group(1))


def generated(body: dict) -> dict:
    return {"questions": [RELATION_ITEM, COUNT_ITEM]}


def judged(body: dict) -> str:
    """A deterministic judge: the letter follows from a hash of the image and prompt (right for some questions,
    wrong for others)."""
    return "AB"[hashlib.sha256(json.dumps(body["messages"]).encode()).digest()[0] % 2]


def _event_messages(instance: dg.DagsterInstance, result: dg.ExecuteInProcessResult) -> list[str]:
    return [
        record.event_log_entry.user_message for record in instance.get_records_for_run(result.run_id).records
    ]


def _shard_metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, dict]:
    return {
        event.partition: {name: value.value for name, value in event.materialization.metadata.items()}
        for event in result.get_asset_materialization_events()
        if event.asset_key.to_user_string() == asset
    }


def test_the_readme_run_config_keeps_each_model_and_waits_once_per_round(
    tmp_path, small_world, sample_scene_graphs, llm_server_factory, monkeypatch
):
    claude = llm_server_factory("anthropic", responder=generated)
    gpt = llm_server_factory("openai", responder=judged)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)  # the README's config names no endpoint
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", gpt.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    resources = {
        **build_resources(str(tmp_path)),  # the project's own resources
        "sources": SourcesResource(sample_world_root=str(small_world)),
        "workers": WorkersResource(max_workers=1),
    }
    instance = dg.DagsterInstance.ephemeral()
    assert dg.materialize([scene_graphs_asset], resources=resources, instance=instance).success
    shards = sorted({shard_of(image_id) for image_id in sample_scene_graphs["image_id"]})
    assert len(shards) > 2
    readme = readme_paid_stage_yaml()
    assert set(readme) == {"stvqa_generator_llm", "stvqa_judge_llm"}
    assert all(
        set(entry["config"]) <= {"mode", "max_cost_usd", "batch_poll_interval_s"} for entry in readme.values()
    )

    generation = dg.materialize(
        SHARD_ASSETS,
        selection=[stvqa_candidates_asset],
        resources=resources,
        run_config={
            "resources": readme,
            "ops": {"stvqa_candidates_asset": {"config": {"backend": "anthropic"}}},
        },
        instance=instance,
        tags=partition_range_tags(shards[0], shards[-1]),
    )
    assert generation.success
    # Claude, in batch mode, with the generator's sampling: every image of every shard in one batch, one wait.
    assert gpt.hits == 0 and claude.calls("/v1/messages") == 0
    (batch,) = claude.batches.batches.values()
    assert len(batch.items) == sample_scene_graphs.height
    assert {(body["model"], body["max_tokens"], body["temperature"]) for _, body in batch.items} == {
        ("claude-sonnet-4-20250514", 2048, 0.0)
    }
    metadata = _shard_metadata(generation, "stvqa_candidates")
    for shard in shards:
        assert metadata[shard]["llm_provider"] == "anthropic"
        assert metadata[shard]["llm_model"] == "claude-sonnet-4-20250514"
        assert metadata[shard]["llm_mode"] == "batch" and metadata[shard]["llm_stage_batch_waits"] == 1
        assert metadata[shard]["llm_requests"] == sum(
            shard_of(i) == shard for i in sample_scene_graphs["image_id"]
        )
    messages = _event_messages(instance, generation)
    assert any(
        "stvqa_candidates: stvqa_generator_llm resource calls anthropic/claude-sonnet-4-20250514 "
        "(batch mode, max_cost_usd $600.00)" in message
        for message in messages
    )

    validation = dg.materialize(
        SHARD_ASSETS,
        selection=[stvqa_validated_asset],
        resources=resources,
        run_config={"resources": readme, "ops": {"stvqa_validated_asset": {"config": {"backend": "openai"}}}},
        instance=instance,
        tags=partition_range_tags(shards[0], shards[-1]),
    )
    assert validation.success
    # GPT-4o, at temperature 1 and high detail: round 1 of every shard in one batch, round 2 in another.
    candidates = read_table(tmp_path, "stvqa_candidates")
    rounds = list(gpt.batches.batches.values())
    assert len(rounds) == 2 and len(rounds[0].items) == 2 * candidates.height
    assert 0 < len(rounds[1].items) < len(rounds[0].items)
    bodies = [body for batch in rounds for _, body in batch.items]
    assert {(body["model"], body["temperature"], body["max_completion_tokens"]) for body in bodies} == {
        ("gpt-4o", 1.0, 5)
    }
    assert all(
        block["image_url"]["detail"] == "high"
        for body in bodies
        for block in body["messages"][0]["content"]
        if block["type"] == "image_url"
    )
    metadata = _shard_metadata(validation, "stvqa_validated")
    assert {entry["llm_model"] for entry in metadata.values()} == {"gpt-4o"}
    assert {entry["llm_stage_batch_waits"] for entry in metadata.values()} == {2}
    assert sum(entry["llm_requests"] for entry in metadata.values()) == len(bodies)


def test_a_running_balance_sends_chunk_i_of_every_shard_together(
    sample_scene_graphs, sample_geometry, llm_server_factory, make_llm_client
):
    server = llm_server_factory("anthropic", responder=generated)
    client = make_llm_client(server, mode="batch", batch_poll_interval_s=0.02)
    settings = QuestionGenerationSettings(
        backend="anthropic", questions_per_image=2, chunk_size=1, balance="running"
    )
    by_shard: dict[str, list[str]] = {}
    for image_id in sample_scene_graphs["image_id"]:
        by_shard.setdefault(shard_of(image_id), []).append(image_id)
    tasks = {
        shard: generation_task(
            sample_scene_graphs.filter(sample_scene_graphs["image_id"].is_in(ids)),
            settings,
            sample_geometry,
            client,
        )
        for shard, ids in by_shard.items()
    }
    done = run_rounds(client, tasks, "stvqa_candidates")
    # Chunk 1 of every shard in the first batch, chunk 2 (only the shards with a second image) in the next.
    sizes = [len(batch.items) for batch in server.batches.batches.values()]
    most = max(len(ids) for ids in by_shard.values())
    assert len(sizes) == most and sizes[0] == len(by_shard)
    assert sum(sizes) == sample_scene_graphs.height
    assert client.summary.batch_waits == most
    assert {shard: result.value.candidates.height for shard, result in done.items()} == {
        shard: 2 * len(ids) for shard, ids in by_shard.items()
    }
