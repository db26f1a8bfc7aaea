"""The eval assets materialised with Dagster into a temporary storage root."""

import dagster as dg
import polars as pl
import pydantic
import pytest

from assets.eval import EVAL_ASSETS
from assets.eval.assets import EmptyBenchmarkError, EvalItemsConfig, EvalReportConfig, build_eval_items
from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import SOURCE_ASSETS, mcq_questions_asset
from assets.sources.sample_world import sample_world
from data_contracts.storage import read_table, table_path
from pipelines.definitions import build_resources
from pipelines.io_manager import ParquetIOManager
from training.eval.benchmarks import BENCHMARK_LOCATION_FIELDS, BenchmarkLocations


def _resources(root, world, omnispatial_split="test"):
    return {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "sources": SourcesResource(sample_world_root=str(world), omnispatial_split=omnispatial_split),
    }


def _metadata(result, key):
    event = next(m for m in result.get_asset_materialization_events() if m.asset_key.path == [key])
    return event.materialization.metadata


def test_default_build_makes_the_items_and_evaluates_nothing(tmp_path, small_world):
    result = dg.materialize([mcq_questions_asset, *EVAL_ASSETS], resources=_resources(tmp_path, small_world))
    assert result.success
    questions = read_table(tmp_path, "mcq_questions")
    items = read_table(tmp_path, "eval_items")
    assert (
        items.height == questions.height > 0
    )  # OmniSpatial test split (the whole small world here) and SpatiaLab
    assert set(items["benchmark"]) == {"omnispatial", "spatialab"}
    assert read_table(tmp_path, "eval_report").height == 0
    checks = {c.asset_key.to_user_string(): c.passed for c in result.get_asset_check_evaluations()}
    assert checks["eval_items"] and checks["eval_report"]
    report_metadata = _metadata(result, "eval_report")
    assert "none configured" in report_metadata["model"].value
    assert "SpatialCORE-8B" in report_metadata["published_tables"].value
    assert _metadata(result, "eval_items")["items_by_benchmark"].value == {
        name: int(count) for name, count in items.group_by("benchmark").len().iter_rows()
    }


def test_configured_model_fills_the_report(tmp_path, small_world, tiny_model_dir):
    run_config = dg.RunConfig(
        ops={
            "eval_report_asset": {
                "config": {
                    "model": str(tiny_model_dir),
                    "limit": 1,
                    "generation": {"max_new_tokens": 4},
                    "backend_options": {"device": "cpu"},
                    "grounding_analysis": True,
                }
            }
        }
    )
    result = dg.materialize(
        [mcq_questions_asset, *EVAL_ASSETS],
        resources=_resources(tmp_path, small_world),
        run_config=run_config,
    )
    assert result.success
    scores = read_table(tmp_path, "eval_report")
    assert scores.height == 2 and set(scores["benchmark"]) == {
        "omnispatial",
        "spatialab",
    }  # one question of each
    metadata = _metadata(result, "eval_report")
    assert "Evaluated runs" in metadata["paper_tables"].value
    assert set(metadata["accuracy_by_benchmark"].value) == {"omnispatial", "spatialab"}
    assert "data:image/jpeg;base64" in metadata["figure4_iou_by_entropy_quartile"].value
    assert (tmp_path / "eval" / "report.md").is_file()


def test_definitions_with_the_eval_assets_load():
    defs = dg.Definitions(assets=[sample_world, *SOURCE_ASSETS, *EVAL_ASSETS], resources=build_resources())
    dg.Definitions.validate_loadable(defs)
    assert {key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys()} >= {
        "eval_items",
        "eval_report",
    }


def test_eval_items_config_names_locations_in_the_benchmark_entries():
    locations = set(BENCHMARK_LOCATION_FIELDS.values())
    others = set(BenchmarkLocations.model_fields) - locations
    assert set(EvalItemsConfig.model_fields) == {"benchmarks"} | others
    for name in others:  # written once, in training.eval
        assert (
            EvalItemsConfig.model_fields[name].description
            == BenchmarkLocations.model_fields[name].description
        )
    assert EvalItemsConfig().model_dump(exclude={"benchmarks"}) == BenchmarkLocations().model_dump(
        include=others
    )


def test_a_benchmark_with_a_location_is_read_from_it(tmp_path, small_world):
    result = dg.materialize([mcq_questions_asset], resources=_resources(tmp_path, small_world))
    assert result.success
    questions = read_table(tmp_path, "mcq_questions")  # every OmniSpatial question is a test question here
    images = table_path(tmp_path, "mcq_images")  # the questions name their images; the items embed them
    from_table, _ = build_eval_items(EvalItemsConfig(benchmarks=["omnispatial"]), questions, tmp_path, images)
    folder = small_world / "omnispatial"
    config = EvalItemsConfig(benchmarks=[f"omnispatial={folder}"], omnispatial_split="all")
    from_folder, log = build_eval_items(config, questions.clear(), tmp_path)  # not from mcq_questions
    assert from_folder.height == from_table.height > 0 and not log.rows
    assert sorted(from_folder["question"]) == sorted(from_table["question"])


def test_backend_options_are_checked_against_the_backend():
    assert EvalReportConfig(backend="vllm", backend_options={"adapter_mode": "merge"}).backend_options == {
        "adapter_mode": "merge"
    }
    with pytest.raises(pydantic.ValidationError, match="not options of the openai backend"):
        EvalReportConfig(backend="openai", backend_options={"device": "cpu"})


def test_a_requested_benchmark_without_items_fails_with_the_reason(tmp_path, small_world):
    """Every OmniSpatial question in the train split (as a stable hash can put a small set): eval_items fails and
    says so, rather than evaluating 0 OmniSpatial items."""
    result = dg.materialize(
        [mcq_questions_asset, *EVAL_ASSETS],
        resources=_resources(tmp_path, small_world, omnispatial_split="train"),
        raise_on_error=False,
    )
    assert not result.success
    failure = next(event for event in result.all_events if event.is_step_failure)
    description = failure.step_failure_data.user_failure_data.description
    assert "omnispatial: mcq_questions has" in description and "none in the test split" in description
    assert "omnispatial_split" in description
    questions = read_table(tmp_path, "mcq_questions")
    with pytest.raises(EmptyBenchmarkError, match="spatialab: mcq_questions has no spatialab question"):
        build_eval_items(
            EvalItemsConfig(benchmarks=["spatialab"]),
            questions.filter(pl.col("source") != "spatialab"),
            tmp_path,
        )
