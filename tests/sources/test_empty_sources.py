"""A source with no record, or no valid record, fails its asset with one sentence and keeps the previous tables.

The failing step raises before it yields any output, so the IO manager writes nothing and the tables of
the last good build stay as they were; the asset's contract check is then not executed (the UI shows
"execution failed"), never evaluated as failed. Only a source named in `allow_empty_sources` builds an
empty table, and that table loads with Hugging Face ``datasets`` only when streamed.
"""

import json

import dagster as dg
import polars as pl
import pytest

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import mcq_questions_asset, scene_graphs_asset
from assets.tables import CONTRACT_CHECK
from data_contracts import mcq_questions
from data_contracts.storage import read_table, table_path
from pipelines.io_manager import ParquetIOManager
from pipelines.signals import build_signal_checks


def _resources(root, world, **sources):
    return {
        "io_manager": ParquetIOManager(root=str(root)),
        "storage": StorageResource(root=str(root)),
        "sources": SourcesResource(sample_world_root=str(world), **sources),
    }


def _failure(result: dg.ExecuteInProcessResult):
    """The one failed step's ``dagster.Failure`` data (its description and metadata)."""
    (event,) = result.get_step_failure_events()
    return event.step_failure_data.user_failure_data


def test_an_emptied_source_fails_and_keeps_the_previous_table(tmp_path, world_copy):
    omnispatial = world_copy / "omnispatial"
    records = json.loads((omnispatial / "data.json").read_text())
    data = tmp_path / "data"
    resources = _resources(data, world_copy, omnispatial_root=str(omnispatial))
    instance = dg.DagsterInstance.ephemeral()
    selection = [mcq_questions_asset, *build_signal_checks([mcq_questions_asset])]
    assert dg.materialize(selection, resources=resources, instance=instance).success
    tables = [table_path(data, "mcq_questions"), table_path(data, "mcq_questions_quarantine")]
    before = {path: path.read_bytes() for path in tables}
    assert read_table(data, "mcq_questions").height == len(records)

    (omnispatial / "data.json").write_text("[]")
    failed = dg.materialize(selection, resources=resources, instance=instance, raise_on_error=False)

    assert not failed.success
    failure = _failure(failed)
    assert failure.description == (
        f"OmniSpatial at {omnispatial} holds no record: check the config field `omnispatial_root`, or add "
        "'omnispatial' to the config field `allow_empty_sources` to build an empty table on purpose."
    )
    assert failure.metadata["input_location"].value == str(omnispatial)
    assert failure.metadata["config_field"].value == "omnispatial_root"
    assert failure.metadata["quarantined"].value == 0
    assert {path: path.read_bytes() for path in tables} == before  # the last good tables are kept
    assert failed.get_asset_materialization_events() == []
    # No check was evaluated: neither the contract check (the body raised before yielding it) nor the
    # operator signals (their step is skipped). The contract check's latest execution is the planned one of
    # the failed run, which the UI shows as "execution failed", not as a failed check.
    assert failed.get_asset_check_evaluations() == []
    record = instance.get_latest_asset_check_evaluation_record(
        dg.AssetCheckKey(dg.AssetKey("mcq_questions"), CONTRACT_CHECK)
    )
    assert (record.run_id, record.status.value) == (failed.run_id, "PLANNED")


def test_an_allowed_empty_source_builds_an_empty_table_that_datasets_loads_only_streamed(
    tmp_path, world_copy
):
    import datasets

    omnispatial = world_copy / "omnispatial"
    (omnispatial / "data.json").write_text("[]")
    data = tmp_path / "data"
    resources = _resources(
        data, world_copy, omnispatial_root=str(omnispatial), allow_empty_sources=["omnispatial"]
    )
    result = dg.materialize([mcq_questions_asset], resources=resources)
    assert result.success
    assert all(check.passed for check in result.get_asset_check_evaluations())
    table = read_table(data, "mcq_questions")
    assert table.height == 0 and set(mcq_questions.McqQuestions.column_names()) <= set(table.columns)

    assert read_table(data, "mcq_images").height == 0
    path = str(table_path(data, "mcq_images"))  # the empty table with an image column
    with pytest.raises(ValueError, match="corresponds to no data"):  # map-style loading refuses 0 rows
        datasets.load_dataset("parquet", data_files=path, split="train", cache_dir=str(tmp_path / "hf"))
    streamed = datasets.load_dataset("parquet", data_files=path, split="train", streaming=True)
    assert list(streamed) == []
    assert isinstance(streamed.features["image"], datasets.Image)  # the features survive an empty file


def test_allow_empty_sources_names_known_sources_only():
    with pytest.raises(ValueError, match=r"unknown sources \['scanet'\]"):
        SourcesResource(allow_empty_sources=["scanet"])


def test_an_empty_visual_genome_fails_naming_its_field(tmp_path, world_copy):
    vg = world_copy / "visual_genome"
    (vg / "image_data.json").write_text("[]")
    resources = _resources(tmp_path / "data", world_copy, visual_genome_root=str(vg))
    failed = dg.materialize([scene_graphs_asset], resources=resources, raise_on_error=False)
    assert not failed.success
    assert _failure(failed).description == (
        f"Visual Genome (raw layout) at {vg} holds no record: check the config field `visual_genome_root` / "
        "`visual_genome_images_dir`, or add 'visual_genome' to the config field `allow_empty_sources` to "
        "build an empty table on purpose."
    )
    assert not table_path(tmp_path / "data", "scene_graphs").exists()


def test_a_zero_row_spatialab_parquet_fails(tmp_path, world_copy):
    table = tmp_path / "spatialab.parquet"
    pl.DataFrame(
        schema={"id": pl.Int64, "Question": pl.String, "Answer": pl.Int64, "Image_Filename": pl.String}
    ).write_parquet(table)
    resources = _resources(tmp_path / "data", world_copy, spatialab_path=str(table))
    failed = dg.materialize([mcq_questions_asset], resources=resources, raise_on_error=False)
    assert _failure(failed).description.startswith(f"SpatiaLab at {table} holds no record:")


def test_a_source_whose_every_record_is_quarantined_fails_with_its_reasons(tmp_path, world_copy):
    vg = world_copy / "visual_genome"
    image_ids = [str(info["image_id"]) for info in json.loads((vg / "image_data.json").read_text())]
    for image in (vg / "VG_100K").iterdir():
        image.unlink()
    resources = _resources(
        tmp_path / "data", world_copy, visual_genome_root=str(vg), allow_empty_sources=["visual_genome"]
    )
    failed = dg.materialize([scene_graphs_asset], resources=resources, raise_on_error=False)
    failure = _failure(failed)
    assert failure.description.startswith(
        f"Visual Genome (raw layout) at {vg} gave no valid row: all {len(image_ids)} records were quarantined"
    )
    assert failure.metadata["quarantined"].value == len(image_ids)
    assert failure.metadata["first_reasons"].value == [
        f"{image_id}: missing image: no file for {image_id}" for image_id in image_ids[:3]
    ]
    assert failure.metadata["config_field"].value == "visual_genome_root / visual_genome_images_dir"


def test_a_missing_folder_fails_with_its_sentence_and_field(tmp_path, world_copy):
    absent = tmp_path / "absent"
    resources = _resources(tmp_path / "data", world_copy, omnispatial_root=str(absent))
    failure = _failure(dg.materialize([mcq_questions_asset], resources=resources, raise_on_error=False))
    assert failure.description == (
        f"OmniSpatial folder not found at {absent}: set the config field `omnispatial_root` to an existing path."
    )
    assert failure.metadata["input_location"].value == str(absent)
    assert failure.metadata["config_field"].value == "omnispatial_root"
