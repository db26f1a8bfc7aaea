"""The grounding assets materialised with Dagster on the sample world, offline backends, temporary storage."""

from __future__ import annotations

import csv

import dagster as dg
import polars as pl
import pytest

from assets.grounding.assets import GROUNDING_ASSETS
from assets.grounding.shards import SHARD_KEYS
from assets.partitions import grounding_shard_partitions
from assets.sources.assets import SOURCE_ASSETS
from data_contracts.storage import read_table, table_path
from tests.grounding.conftest import asset_metadata, grounding_resources

ALL_ASSETS = [*SOURCE_ASSETS, *GROUNDING_ASSETS]
UPSTREAM = [
    "mcq_questions",
    "mcq_images",
    "mcq_questions_quarantine",
    "object_phrases",
    "object_phrases_quarantine",
]
DOWNSTREAM = [
    name
    for table in (
        "spatialcore_train",
        "spatialcore_train_corrupted",
        "pseudo_gt_audit",
        "pseudo_gt_audit_precision",
        "sft_cold_start",
    )
    for name in (table, f"{table}_quarantine")
]
NO_SKIP = {"ops": {"object_phrases_asset": {"config": {"skip_task_types": []}}}}


def _materialize(selection, resources, run_config=None, partition_key=None) -> dg.ExecuteInProcessResult:
    result = dg.materialize(
        ALL_ASSETS,
        selection=selection,
        resources=resources,
        run_config=run_config or {},
        partition_key=partition_key,
    )
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    return result


@pytest.fixture(scope="module")
def built_chain(tmp_path_factory, small_world):
    """The whole chain: sources and phrases, every shard, then the tables downstream."""
    root = tmp_path_factory.mktemp("grounding_store")
    resources = grounding_resources(root, small_world)
    first = _materialize(UPSTREAM, resources, NO_SKIP)
    shards = [
        _materialize(["pseudo_gt_boxes", "pseudo_gt_boxes_quarantine"], resources, partition_key=key)
        for key in SHARD_KEYS
    ]
    last = _materialize(DOWNSTREAM, resources)
    return root, resources, first, shards, last


def test_every_table_is_written_and_passes_its_checks(built_chain):
    root, _, first, shards, last = built_chain
    for name in (
        "object_phrases",
        "spatialcore_train",
        "spatialcore_train_corrupted",
        "pseudo_gt_audit",
        "pseudo_gt_audit_precision",
        "sft_cold_start",
    ):
        assert table_path(root, name).is_file(), name
        assert table_path(root, f"{name}_quarantine").is_file(), name
    assert sorted(path.stem for path in (root / "pseudo_gt_boxes").glob("*.parquet")) == SHARD_KEYS
    checked = {
        check.asset_key.to_user_string()
        for result in (first, *shards, last)
        for check in result.get_asset_check_evaluations()
    }
    assert checked - {"mcq_questions", "mcq_images"} == {
        "object_phrases",
        "pseudo_gt_boxes",
        "spatialcore_train",
        "spatialcore_train_corrupted",
        "pseudo_gt_audit",
        "pseudo_gt_audit_precision",
        "sft_cold_start",
    }


def test_training_table_holds_every_omnispatial_question_with_true_boxes(built_chain, small_world):
    from tests.grounding.test_annotations import _expected_boxes

    root, *_ = built_chain
    train = read_table(root, "spatialcore_train")
    questions = read_table(root, "mcq_questions").filter(pl.col("source") == "omnispatial")
    assert sorted(train["question_id"]) == sorted(questions["question_id"])
    expected = _expected_boxes(small_world)
    phrases = read_table(root, "object_phrases")
    for row in train.join(phrases.select("question_id"), on="question_id").iter_rows(named=True):
        assert {tuple(item["bbox_2d"]) for item in row["pseudo_gt"]} == expected[row["question_id"]]


def test_coverage_is_reported_in_the_metadata(built_chain):
    _, _, first, shards, last = built_chain
    metadata = asset_metadata(last, "spatialcore_train")
    phrases = asset_metadata(first, "object_phrases")
    assert metadata["samples"] == phrases["dagster/row_count"]
    assert (
        metadata["samples_with_valid_box"]
        <= metadata["samples_with_queries"]
        <= metadata["localizable_samples"]
    )
    assert metadata["coverage_of_queried"] == 1.0  # human boxes ground every phrase of the sample world
    assert "data:image/jpeg;base64" in metadata["preview_image"] and "validity_histogram_plot" in metadata
    assert sum(metadata["validity_histogram"].values()) == metadata["boxes"]
    shard_samples = sum(asset_metadata(result, "pseudo_gt_boxes")["samples"] for result in shards)
    assert shard_samples == metadata["samples"]


def test_audit_loop_through_the_assets(built_chain):
    root, resources, *_ = built_chain
    verdicts = root / "audit" / "pseudo_gt" / "verdicts.csv"
    rows = list(csv.DictReader(verdicts.open()))
    assert len(rows) == read_table(root, "pseudo_gt_audit").height > 0
    for row in rows:
        row["correct"] = "1"
    rows[0]["correct"] = "perhaps"
    with verdicts.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = _materialize(["pseudo_gt_audit_precision", "pseudo_gt_audit_precision_quarantine"], resources)
    precision = read_table(root, "pseudo_gt_audit_precision").filter(pl.col("confidence_bin") == "all")
    assert precision["audited"][0] == len(rows) - 1 and precision["precision"][0] == 1.0
    assert read_table(root, "pseudo_gt_audit_precision_quarantine")["record_id"].to_list() == [
        rows[0]["audit_id"]
    ]
    assert asset_metadata(result, "pseudo_gt_audit_precision")["reviewed_boxes"] == len(rows) - 1


def test_sft_and_corrupted_tables(built_chain):
    root, *_ = built_chain
    sft = read_table(root, "sft_cold_start")
    train = read_table(root, "spatialcore_train").filter(pl.col("split") == "train")
    assert sft.height == train.height and set(sft["reasoning_backend"]) == {"template"}
    corrupted = read_table(root, "spatialcore_train_corrupted")
    assert corrupted.drop("pseudo_gt").equals(read_table(root, "spatialcore_train").drop("pseudo_gt"))


def test_a_shard_with_grounding_dino(built_chain, tiny_grounding_dino):
    root, resources, *_ = built_chain
    config = {
        "ops": {
            "pseudo_gt_boxes_asset": {
                "config": {
                    "backend": "grounding_dino",
                    "model": str(tiny_grounding_dino),
                    "device": "cpu",
                    "batch_size": 4,
                }
            }
        }
    }
    phrases = read_table(root, "object_phrases")
    shard = next(
        key
        for key in SHARD_KEYS
        if (read_table(root, "pseudo_gt_boxes", [key])["phrases"].list.len() > 0).any()
    )
    result = _materialize(
        ["pseudo_gt_boxes", "pseudo_gt_boxes_quarantine"], resources, config, partition_key=shard
    )
    boxes = read_table(root, "pseudo_gt_boxes", [shard])
    assert set(boxes["backend"]) == {"grounding_dino"} and set(boxes["detector"]) == {
        str(tiny_grounding_dino)
    }
    for row in boxes.iter_rows(named=True):
        assert {item["label"] for item in row["pseudo_gt"]} <= set(row["phrases"])
        assert all(item["validity"] >= 0.3 for item in row["pseudo_gt"])
    assert asset_metadata(result, "pseudo_gt_boxes")["shard"] == shard
    assert phrases.height > 0


def test_definitions_load_with_the_grounding_assets(tmp_path, small_world):
    definitions = dg.Definitions(assets=ALL_ASSETS, resources=grounding_resources(tmp_path, small_world))
    graph = definitions.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {"object_phrases", "pseudo_gt_boxes", "spatialcore_train", "sft_cold_start"} <= keys
    assert graph.get(dg.AssetKey("pseudo_gt_boxes")).partitions_def == grounding_shard_partitions
    assert {graph.get(dg.AssetKey(name)).group_name for name in ("object_phrases", "spatialcore_train")} == {
        "grounding"
    }


def test_spatialcore_train_names_missing_shards(tmp_path, small_world):
    resources = grounding_resources(tmp_path, small_world)
    _materialize(UPSTREAM, resources, NO_SKIP)
    _materialize(["pseudo_gt_boxes", "pseudo_gt_boxes_quarantine"], resources, partition_key=SHARD_KEYS[0])
    with pytest.raises(FileNotFoundError, match="materialise the asset first"):
        dg.materialize(
            ALL_ASSETS, selection=["spatialcore_train", "spatialcore_train_quarantine"], resources=resources
        )
