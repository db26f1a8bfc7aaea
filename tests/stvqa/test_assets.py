"""The STVQA assets materialised with Dagster on the sample world, offline (template generator, solver)."""

import dagster as dg
import polars as pl
import pytest

from assets.resources import LLMResource, SourcesResource, StorageResource, WorkersResource
from assets.sources.assets import SOURCE_ASSETS, scene_graphs_asset
from assets.sources.sample_world import sample_world
from assets.stvqa.assets import STVQA_ASSETS, stvqa_asset, stvqa_candidates_asset, stvqa_validated_asset
from assets.stvqa.shards import STVQA_SHARD_KEYS, shard_of
from data_contracts.storage import read_table, table_path
from data_contracts.stvqa import Stvqa
from data_contracts.validation import check_frame
from pipelines.io_manager import ParquetIOManager
from tests.stvqa.helpers import scene_object, scene_row

SHARD_ASSETS = [scene_graphs_asset, stvqa_candidates_asset, stvqa_validated_asset]
SHARD_SELECTION = [stvqa_candidates_asset, stvqa_validated_asset]
DATASET_ASSETS = [*SHARD_ASSETS, stvqa_asset]
"""``stvqa`` loads its upstream tables through their IO manager, so the job holds their definitions."""
RUN_CONFIG = {"ops": {"stvqa_candidates_asset": {"config": {"questions_per_image": 8}}}}


def _resources(root, world):
    return {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "workers": WorkersResource(max_workers=1),
        "sources": SourcesResource(sample_world_root=str(world)),
        "stvqa_generator_llm": LLMResource(provider="anthropic", model="claude-sonnet-4-20250514"),
        "stvqa_judge_llm": LLMResource(provider="openai", model="gpt-4o", image_detail="high"),
    }


def _metadata(result, key):
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key.to_user_string() == key)
    return {name: value.value for name, value in event.materialization.metadata.items()}, event


@pytest.fixture(scope="module")
def built_chain(tmp_path_factory, small_world):
    """scene_graphs, then every non-empty shard, then the data set, materialised into one storage root."""
    root = tmp_path_factory.mktemp("stvqa_store")
    resources = _resources(root, small_world)
    assert dg.materialize([scene_graphs_asset], resources=resources).success
    shards = sorted({shard_of(image_id) for image_id in read_table(root, "scene_graphs")["image_id"]})
    shard_results = {
        shard: dg.materialize(
            SHARD_ASSETS,
            selection=SHARD_SELECTION,
            partition_key=shard,
            resources=resources,
            run_config=RUN_CONFIG,
        )
        for shard in shards
    }
    dataset = dg.materialize(DATASET_ASSETS, selection=[stvqa_asset], resources=resources)
    return root, resources, shards, shard_results, dataset


def test_whole_chain_on_the_sample_world(built_chain):
    root, _, shards, shard_results, dataset = built_chain
    assert all(result.success for result in shard_results.values()) and dataset.success
    for result in [*shard_results.values(), dataset]:
        assert all(check.passed for check in result.get_asset_check_evaluations())
    for shard in shards:
        assert table_path(root, "stvqa_candidates", shard).exists()
        assert read_table(root, "stvqa_candidates_quarantine", [shard]).height == 0
    candidates = read_table(root, "stvqa_candidates")
    validated = read_table(root, "stvqa_validated")
    attempts = read_table(root, "stvqa_pass_at_2_attempts")
    assert validated.height == candidates.height  # template answers all survive the solver
    assert attempts.height == 2 * candidates.height
    assert set(candidates["category"].cast(pl.String)) == {
        "relation",
        "reach",
        "size",
        "orientation",
        "instance_location",
        "depth",
        "distance",
        "count",
        "existence",
    }
    table = read_table(root, "stvqa")
    assert check_frame(table, Stvqa).passed
    assert table.filter(pl.col("category") == "relation").height == table.height // 2


def test_stage_metadata(built_chain):
    _, _, shards, shard_results, dataset = built_chain
    candidates, _ = _metadata(shard_results[shards[0]], "stvqa_candidates")
    assert candidates["backend"] == "template" and candidates["shard"] == shards[0]
    assert set(candidates["counts_generated"]) == {"categories", "levels"}
    assert candidates["counts_kept"] == candidates["counts_generated"]
    assert "data:image/jpeg;base64" in candidates["preview_image"]
    assert candidates["geometry"].endswith("world.json")
    validated, _ = _metadata(shard_results[shards[0]], "stvqa_validated")
    assert validated["pass_at_2_retention"] == 1.0 and validated["counts_before"] == validated["counts_after"]
    assert set(validated["retention_by_category"].values()) == {1.0}
    final, _ = _metadata(dataset, "stvqa")
    assert final["shards_included"] == shards and final["shards_missing"] == len(STVQA_SHARD_KEYS) - len(
        shards
    )
    assert final["quotas"]["relation"] == final["counts_after"]["categories"]["relation"]
    assert set(final["rows_by_split"]) == {"train", "val"}
    assert "data:image/jpeg;base64" in final["preview_image"]


def test_unchanged_shard_keeps_its_data_version(built_chain):
    _, resources, shards, shard_results, _ = built_chain
    again = dg.materialize(
        SHARD_ASSETS,
        selection=SHARD_SELECTION,
        partition_key=shards[0],
        resources=resources,
        run_config=RUN_CONFIG,
    )
    for key in ("stvqa_candidates", "stvqa_validated"):
        _, before = _metadata(shard_results[shards[0]], key)
        _, after = _metadata(again, key)
        assert (
            after.materialization.tags["dagster/data_version"]
            == before.materialization.tags["dagster/data_version"]
        )


def test_bad_scene_graphs_are_quarantined(tmp_path, small_world):
    """Dangling relation ids, zero-area boxes and missing images go to quarantine; good graphs go on."""
    rows = [
        scene_row("dangling", [scene_object("1", "cup", [0, 0, 50, 50])], [("1", "on", "404")]),
        scene_row(
            "flat",
            [scene_object("1", "cup", [10, 10, 10, 60]), scene_object("2", "box", [60, 0, 90, 40])],
            [],
        ),
        scene_row("noimage", [scene_object("1", "cup", [0, 0, 50, 50])], [], image=None),
        scene_row(
            "good",
            [scene_object("1", "cup", [0, 0, 50, 50], ["red"]), scene_object("2", "box", [120, 10, 190, 90])],
            [("1", "left of", "2")],
        ),
    ]
    # the images land in different shards: materialise the shard of each one
    frame = pl.DataFrame(rows)
    path = table_path(tmp_path, "scene_graphs")
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(path)
    resources = _resources(tmp_path, small_world)
    resources["sources"] = SourcesResource(
        sample_world_root=str(small_world), visual_genome_root=str(tmp_path / "vg")
    )
    reasons = {}
    for image_id in ("dangling", "flat", "noimage", "good"):
        shard = shard_of(image_id)
        result = dg.materialize(
            SHARD_ASSETS, selection=SHARD_SELECTION, partition_key=shard, resources=resources
        )
        assert result.success
        quarantine = read_table(tmp_path, "stvqa_candidates_quarantine", [shard])
        reasons.update(dict(zip(quarantine["record_id"], quarantine["reason"], strict=True)))
    assert set(reasons) == {"dangling", "flat", "noimage"}
    assert "names missing object 404" in reasons["dangling"]
    assert "zero-area pixel box" in reasons["flat"]
    assert "image is missing" in reasons["noimage"]
    good = read_table(tmp_path, "stvqa_candidates", [shard_of("good")])
    assert good.height > 0 and set(good["image_id"]) == {"good"}


def test_published_source(tmp_path, small_world):
    from tests.stvqa.test_dataset import _published_row

    folder = tmp_path / "published"
    folder.mkdir()
    image_type = pl.Struct({"bytes": pl.Binary, "path": pl.String})
    pl.DataFrame(
        [_published_row("1"), _published_row("2", letter="D")], schema_overrides={"images": image_type}
    ).write_parquet(folder / "train-00000-of-00001.parquet")
    config = {"ops": {"stvqa_asset": {"config": {"source": "published", "published_path": str(folder)}}}}
    result = dg.materialize([stvqa_asset], resources=_resources(tmp_path, small_world), run_config=config)
    assert result.success
    assert read_table(tmp_path, "stvqa").height == 1
    assert read_table(tmp_path, "stvqa_quarantine")["record_id"].to_list() == [
        "train-00000-of-00001.parquet:1"
    ]


def test_dataset_without_shards_explains(tmp_path, small_world):
    result = dg.materialize(
        DATASET_ASSETS,
        selection=[stvqa_asset],
        resources=_resources(tmp_path, small_world),
        raise_on_error=False,
    )
    assert not result.success
    failure = result.get_step_failure_events()[0].event_specific_data.error.to_string()
    assert "no stvqa_validated shard" in failure


def test_definitions_load():
    defs = dg.Definitions(
        assets=[sample_world, *SOURCE_ASSETS, *STVQA_ASSETS],
        resources={**_resources("/tmp/unused", "/tmp/unused")},
    )
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {
        "stvqa_candidates",
        "stvqa_validated",
        "stvqa_pass_at_2_attempts",
        "stvqa",
        "stvqa_quarantine",
    } <= keys
    groups = {
        defs.resolve_assets_def(key).group_names_by_key[dg.AssetKey(key)]
        for key in ("stvqa_candidates", "stvqa")
    }
    assert groups == {"stvqa"}
