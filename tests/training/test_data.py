"""Training tables -> datasets: columns unchanged, lazy images, quarantine, clear errors."""

from __future__ import annotations

import polars as pl
import pytest
from datasets import Image as ImageFeature
from PIL import Image

from data_contracts.dge_tasks import DgeTasks
from data_contracts.spatialcore_train import SpatialcoreTrain
from data_contracts.storage import MissingTableError, table_files
from data_contracts.stvqa import Stvqa
from training.data import MissingColumnError, MixedOriginError, load_training_data, write_quarantine
from training.testing import tiny_training_frames


@pytest.mark.parametrize(
    ("table", "prompt_format", "image_column"),
    [
        ("spatialcore_train", "spatialcore", "image"),
        ("stvqa", "spatialthinker", "images"),
        ("dge_tasks", "dge", "images"),
    ],
)
def test_columns_reach_the_dataset_unchanged(tiny_tables, table, prompt_format, image_column):
    frame = pl.read_parquet(tiny_tables / f"{table}.parquet")
    data = load_training_data(tiny_tables, table, prompt_format, "qwen3_vl")
    assert data.dataset.column_names == [*frame.columns, "prompt"]
    row = data.dataset[0]
    expected = frame.drop(image_column).row(0, named=True)
    assert {key: row[key] for key in expected} == expected
    assert row["prompt"][-1]["role"] == "user"
    image = row[image_column] if image_column == "image" else row[image_column][0]
    assert isinstance(image, Image.Image) and image.size == (64, 48)


def test_images_decode_lazily(tiny_tables):
    dataset = load_training_data(tiny_tables, "spatialcore_train", "spatialcore", "qwen3_vl").dataset
    assert isinstance(dataset.features["image"], ImageFeature)
    raw = dataset.with_format("arrow")[:1]["image"].to_pylist()[0]
    assert raw["bytes"].startswith(b"\x89PNG")  # stored encoded until a row is read


def test_bad_rows_are_quarantined_and_good_rows_kept(tmp_path):
    frame = tiny_training_frames(rows=5)["spatialcore_train"]
    broken = frame.with_columns(
        pl.when(pl.col("question_id") == "q1").then(pl.lit("E")).otherwise(pl.col("answer")).alias("answer")
    )
    images = broken["image"].to_list()
    images[2] = {"bytes": b"not an image", "path": "bad.png"}
    images[4] = None
    broken = broken.with_columns(pl.Series("image", images, dtype=frame.schema["image"]))
    broken.write_parquet(tmp_path / "spatialcore_train.parquet")
    data = load_training_data(tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl")
    assert data.dataset["question_id"] == ["q0", "q3"]
    reasons = dict(zip(data.quarantine["record_id"], data.quarantine["reason"], strict=True))
    assert "beyond the 4 options" in reasons["q1"]
    assert "not a known image format" in reasons["q2"]
    assert reasons["q4"] == "no image"
    assert set(data.quarantine["source_file"]) == {str(tmp_path / "spatialcore_train.parquet")}
    assert "pseudo_gt" in data.quarantine["payload_json"][0]
    assert write_quarantine(data.quarantine, tmp_path / "out", "spatialcore_train").is_file()


def test_split_task_type_and_sample_filters(tmp_path):
    frame = tiny_training_frames(rows=6)["spatialcore_train"]
    frame = frame.with_columns(
        pl.when(pl.col("question_id") == "q0").then(pl.lit("test")).otherwise(pl.lit("train")).alias("split")
    )
    frame.write_parquet(tmp_path / "spatialcore_train.parquet")
    data = load_training_data(
        tmp_path,
        "spatialcore_train",
        "spatialcore",
        "qwen3_vl",
        include_task_types=["Spatial_Interaction"],
        max_samples=1,
    )
    assert data.dataset["question_id"] == ["q2"]


def test_partitioned_table(tmp_path):
    frame = tiny_training_frames(rows=4)["spatialcore_train"]
    (tmp_path / "spatialcore_train").mkdir()
    frame[:2].write_parquet(tmp_path / "spatialcore_train" / "a.parquet")
    frame[2:].write_parquet(tmp_path / "spatialcore_train" / "b.parquet")
    assert len(table_files(tmp_path, "spatialcore_train")) == 2
    assert len(load_training_data(tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl").dataset) == 4


def test_a_table_mixing_sample_world_and_real_rows_is_refused_unless_allowed(tmp_path, caplog):
    frame = tiny_training_frames(rows=4)["spatialcore_train"]
    frame.write_parquet(tmp_path / "spatialcore_train.parquet")
    with caplog.at_level("WARNING", logger="training.data"):
        data = load_training_data(tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl")
    assert data.origins == {"sample_world": 4}
    assert "synthetic sample world (4 rows)" in caplog.text

    mixed = frame.with_columns(
        pl.when(pl.col("question_id").is_in(["q0", "q1"]))
        .then(pl.lit("real"))
        .otherwise(pl.col("origin"))
        .alias("origin")
    )
    mixed.write_parquet(tmp_path / "spatialcore_train.parquet")
    with pytest.raises(MixedOriginError, match=r"2 real, 2 sample_world|2 sample_world, 2 real"):
        load_training_data(tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl")
    allowed = load_training_data(
        tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl", allow_mixed_origins=True
    )
    assert allowed.origins == {"real": 2, "sample_world": 2}
    # Rows filtered out (another split) do not count: the real rows alone train without a flag.
    only_real = mixed.with_columns(
        pl.when(pl.col("origin") == "real").then(pl.lit("train")).otherwise(pl.lit("test")).alias("split")
    )
    only_real.write_parquet(tmp_path / "spatialcore_train.parquet")
    real = load_training_data(tmp_path, "spatialcore_train", "spatialcore", "qwen3_vl")
    assert real.origins == {"real": 2}


def test_missing_table_names_what_exists(tiny_tables):
    with pytest.raises(MissingTableError, match="tables in .*dge_tasks, spatialcore_train, stvqa"):
        load_training_data(tiny_tables, "sft_cold_start", "spatialcore", "qwen3_vl")


def test_missing_column_names_the_table_and_column(tiny_tables):
    with pytest.raises(MissingColumnError, match="'stvqa' lacks column\\(s\\) question_id"):
        load_training_data(tiny_tables, "stvqa", "spatialcore", "qwen3_vl")


@pytest.mark.parametrize(
    ("table", "schema"),
    [
        ("spatialcore_train", SpatialcoreTrain),
        ("stvqa", Stvqa),
        ("dge_tasks", DgeTasks),
    ],
)
def test_fixture_tables_satisfy_the_contracts(table, schema):
    frame = tiny_training_frames(rows=4)[table]
    valid, failure = schema.filter(frame, cast=True)
    assert valid.height == frame.height, failure.counts()
