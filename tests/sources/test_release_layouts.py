"""The multiple-choice sources on files laid out as the public releases are, locally and as Hub snapshots.

- SpatiaLab (``ciol-research/SpatiaLab``): ``data.json`` (``id, Category, Sub_Category, Question,
  Option_1..Option_4, Answer`` 1-based, ``Image_Filename``) and the images in ``img/``.
- OmniSpatial (``qizekun/OmniSpatial``): ``data.json`` (``id`` = ``<image>_<question>``, restarting in
  every task folder; ``answer`` 0-based) and ``<task_type>/<image>.<ext>``; unzipped releases keep it
  in ``OmniSpatial-test/``.
- Hub datasets as ``snapshot_download`` leaves them in the cache (see :mod:`tests.sources.hub_cache`).
"""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
from PIL import Image

from assets.resources import SourcesResource, StorageResource
from assets.sources.assets import SOURCE_ASSETS, with_origin
from data_contracts import mcq_questions
from data_contracts.storage import read_table
from data_contracts.validation import check_frame
from pipelines.io_manager import ParquetIOManager
from readers.common import (
    EmptySourceError,
    MissingInputError,
    parse_hub_location,
    require_rows,
    resolve_location,
)
from readers.mcq import read_omnispatial, read_spatialab
from tests.sources.hub_cache import COMMIT, add_to_hub_cache, hub_cache  # noqa: F401

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def _image(path: Path, fmt: str = "PNG", size: tuple[int, int] = (40, 30)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    Image.new("RGB", size, (120, 60, 30)).save(buffer, format=fmt)
    path.write_bytes(buffer.getvalue())


def _spatialab_release(folder: Path, image_folder: str | None = "img") -> list[dict]:
    """SpatiaLab as released: ``data.json`` + ``img/`` (``image_folder=None`` writes no images)."""
    records = [
        {
            "id": 1,
            "Category": "Depth & Occlusion",
            "Sub_Category": "Layer order",
            "Question": "Which object is closest to the camera?",
            "Option_1": "the mug",
            "Option_2": "the 2 books",
            "Option_3": "the lamp",
            "Option_4": "the chair",
            "Answer": 2,
            "Image_Filename": "depth_001.jpg",
        },
        {
            "id": 2,
            "Category": "Size & Scale",
            "Sub_Category": "Relative size",
            "Question": "Is the bottle taller than the cup?",
            "Option_1": "yes",
            "Option_2": "no",
            "Option_3": "",
            "Option_4": "",
            "Answer": 1,
            "Image_Filename": "size_001.png",
        },
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(records, indent=2))
    if image_folder is not None:
        _image(folder / image_folder / "depth_001.jpg", "JPEG")
        _image(folder / image_folder / "size_001.png")
    return records


def _omnispatial_release(folder: Path) -> list[dict]:
    """OmniSpatial as released: ids restart in every task folder (``0_0`` twice here)."""
    records = [
        {
            "id": "0_0",
            "question": "Will the knife fit into the slot?",
            "options": ["Yes", "No"],
            "answer": 0,
            "task_type": "Dynamic_Reasoning",
            "sub_task_type": "Manipulation",
        },
        {
            "id": "0_0",
            "question": "From the waiter's view, who is on his left?",
            "options": ["Jack", "Rose", "Tom", "Anna"],
            "answer": 3,
            "task_type": "Perspective_Taking",
            "sub_task_type": "Allocentric",
        },
        {
            "id": "0_1",
            "question": "Which option is marked in the picture?",
            "options": [],
            "answer": 1,
            "task_type": "Perspective_Taking",
            "sub_task_type": "Allocentric",
        },
    ]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(records))
    _image(folder / "Dynamic_Reasoning" / "0.png")
    _image(folder / "Perspective_Taking" / "0.jpg", "JPEG")
    return records


def _materialize_questions(root: Path, world: Path, **fields):
    resources = {
        "io_manager": ParquetIOManager(root=str(root / "storage")),
        "storage": StorageResource(root=str(root / "storage")),
        "sources": SourcesResource(sample_world_root=str(world), **fields),
    }
    return dg.materialize([SOURCE_ASSETS[0]], resources=resources)


class TestSpatiaLabRelease:
    def test_data_json_with_img_folder(self, tmp_path):
        records = _spatialab_release(tmp_path / "SpatiaLab")
        for location in (tmp_path / "SpatiaLab", tmp_path / "SpatiaLab" / "data.json"):  # folder or table
            frame, log = read_spatialab(location)
            assert len(log) == 0 and frame.height == len(records)
            assert check_frame(with_origin(frame, "real"), mcq_questions.McqQuestionsWithImage).passed
        first = frame.filter(pl.col("question_id") == "spatialab/1").row(0, named=True)
        assert (first["answer"], first["options"][first["answer_index"]]) == ("B", "the 2 books")

    def test_images_folder_alternatives(self, tmp_path):
        _spatialab_release(tmp_path / "a", image_folder="images")  # older copies use images/
        assert read_spatialab(tmp_path / "a")[0].height == 2
        _spatialab_release(tmp_path / "b", image_folder=None)
        _spatialab_release(tmp_path / "pictures", image_folder=".")  # images elsewhere, configured
        assert read_spatialab(tmp_path / "b", images_dir=tmp_path / "pictures")[0].height == 2
        with pytest.raises(MissingInputError, match="spatialab_images_dir"):
            read_spatialab(tmp_path / "b", images_dir=tmp_path / "nowhere")

    def test_source_asset_fails_when_every_question_is_quarantined(self, small_world, tmp_path):
        _spatialab_release(tmp_path / "SpatiaLab", image_folder="photos")  # not a folder the reader knows
        with pytest.raises(
            Exception,
            match=r"SpatiaLab at .* gave no valid row: all 2 records.*missing image.*spatialab_images_dir",
        ):
            _materialize_questions(tmp_path, small_world, spatialab_path=str(tmp_path / "SpatiaLab"))

    def test_source_asset_reads_the_release(self, small_world, tmp_path):
        records = _spatialab_release(tmp_path / "SpatiaLab")
        result = _materialize_questions(tmp_path, small_world, spatialab_path=str(tmp_path / "SpatiaLab"))
        assert result.success
        questions = read_table(tmp_path / "storage", "mcq_questions")
        assert questions.filter(pl.col("source") == "spatialab").height == len(records)

    def test_parquet_with_wrong_columns_names_the_missing_ones(self, tmp_path):
        path = tmp_path / "spatialab.parquet"
        pl.DataFrame({"question": ["Which?"], "image": [b"\x89PNG"]}).write_parquet(path)
        frame, log = read_spatialab(path)
        assert frame.height == 0 and log.rows[0]["record_id"] == "spatialab.parquet"
        assert log.rows[0]["reason"].startswith(
            "wrong columns: missing ['Question', 'Answer', 'Image_Filename']"
        )


class TestOmniSpatialRelease:
    def test_ids_repeating_across_task_folders_stay_unique(self, tmp_path):
        records = _omnispatial_release(tmp_path / "OmniSpatial-test")
        frame, log = read_omnispatial(tmp_path / "OmniSpatial-test", split="test")
        assert len(log) == 0 and frame.height == len(records)
        assert sorted(frame["question_id"]) == [
            "omnispatial/Dynamic_Reasoning/0_0",
            "omnispatial/Perspective_Taking/0_0",
            "omnispatial/Perspective_Taking/0_1",
        ]
        assert check_frame(
            with_origin(frame, "real"), mcq_questions.McqQuestionsWithImage
        ).passed  # question_id is the primary key

    def test_source_asset_keeps_both_questions(self, small_world, tmp_path):
        records = _omnispatial_release(tmp_path / "OmniSpatial-test")
        result = _materialize_questions(
            tmp_path,
            small_world,
            omnispatial_root=str(tmp_path / "OmniSpatial-test"),
            omnispatial_split="test",
        )
        assert result.success
        questions = read_table(tmp_path / "storage", "mcq_questions")
        assert questions.filter(pl.col("source") == "omnispatial").height == len(records)
        assert read_table(tmp_path / "storage", "mcq_questions_quarantine").height == 0

    def test_unzipped_release_folder_and_zip_hint(self, tmp_path):
        _omnispatial_release(tmp_path / "snapshot" / "OmniSpatial-test")
        assert read_omnispatial(tmp_path / "snapshot")[0].height == 3  # data.json one level down
        (tmp_path / "zipped").mkdir()
        (tmp_path / "zipped" / "OmniSpatial-test.zip").write_bytes(b"PK\x05\x06" + bytes(18))
        with pytest.raises(MissingInputError, match=r"omnispatial_root.*unzip OmniSpatial-test.zip"):
            read_omnispatial(tmp_path / "zipped")


class TestHubLocations:
    def test_parse(self):
        assert parse_hub_location("hf://datasets/qizekun/OmniSpatial").repo_id == "qizekun/OmniSpatial"
        location = parse_hub_location("hf://datasets/ccvl/3DSRBench@refs%2Fpr%2F3/data/test.tsv")
        assert (location.revision, location.path_in_repo) == ("refs/pr/3", "data/test.tsv")
        assert parse_hub_location("/data/hf://datasets/x/y") is None
        with pytest.raises(MissingInputError, match="OWNER/NAME"):
            parse_hub_location("hf://datasets/onlyowner")

    def test_resolves_offline_from_the_cache(self, tmp_path, hub_cache):  # noqa: F811
        _spatialab_release(tmp_path / "release")
        snapshot = add_to_hub_cache(hub_cache, "ciol-research/SpatiaLab", tmp_path / "release")
        assert resolve_location("hf://datasets/ciol-research/SpatiaLab", "spatialab_path") == snapshot
        by_commit = resolve_location(
            f"hf://datasets/ciol-research/SpatiaLab@{COMMIT}/data.json", "spatialab_path"
        )
        assert by_commit == snapshot / "data.json" and by_commit.is_symlink()  # as huggingface_hub stores it
        frame, log = read_spatialab("hf://datasets/ciol-research/SpatiaLab")
        assert frame.height == 2 and len(log) == 0
        with pytest.raises(MissingInputError, match=r"ciol-research/SpatiaLab@v9 .*`spatialab_path`"):
            resolve_location("hf://datasets/ciol-research/SpatiaLab@v9", "spatialab_path")
        with pytest.raises(MissingInputError, match=r"nobody/nothing.*`omnispatial_root`"):
            read_omnispatial("hf://datasets/nobody/nothing")
        with pytest.raises(MissingInputError, match=r"img/absent.png is not in Hub dataset"):
            resolve_location("hf://datasets/ciol-research/SpatiaLab/img/absent.png", "spatialab_images_dir")

    def test_source_asset_reads_hub_datasets(self, small_world, tmp_path, hub_cache):  # noqa: F811
        _spatialab_release(tmp_path / "spatialab")
        add_to_hub_cache(hub_cache, "ciol-research/SpatiaLab", tmp_path / "spatialab")
        _omnispatial_release(tmp_path / "omnispatial" / "OmniSpatial-test")
        add_to_hub_cache(hub_cache, "qizekun/OmniSpatial", tmp_path / "omnispatial", revision="v1.0")
        result = _materialize_questions(
            tmp_path,
            small_world,
            omnispatial_root="hf://datasets/qizekun/OmniSpatial@v1.0",
            omnispatial_split="test",
            spatialab_path="hf://datasets/ciol-research/SpatiaLab",
        )
        assert result.success
        counts = dict(read_table(tmp_path / "storage", "mcq_questions").group_by("source").len().iter_rows())
        assert counts == {"omnispatial": 3, "spatialab": 2}

    def test_hf_home_is_honoured(self, tmp_path):
        _spatialab_release(tmp_path / "release")
        snapshot = add_to_hub_cache(
            tmp_path / "hf_home" / "hub", "ciol-research/SpatiaLab", tmp_path / "release"
        )
        environment = {**os.environ, "HF_HOME": str(tmp_path / "hf_home"), "HF_HUB_OFFLINE": "1"}
        environment.pop("HF_HUB_CACHE", None)
        script = "from readers.common import resolve_location; print(resolve_location('hf://datasets/ciol-research/SpatiaLab', 'spatialab_path'))"
        output = subprocess.run(
            [sys.executable, "-c", script],
            env=environment,
            cwd=REPOSITORY_ROOT,
            capture_output=True,
            text=True,
        )
        assert output.returncode == 0, output.stderr
        assert output.stdout.strip() == str(snapshot)


def test_require_rows_fails_empty_inputs_unless_allowed_and_fails_all_quarantined():
    from data_contracts.quarantine import QuarantineLog

    log = QuarantineLog("mcq_questions")
    with pytest.raises(EmptySourceError) as empty:  # an input with no record at all
        require_rows(
            0,
            log,
            what="SpatiaLab",
            location="/data/SpatiaLab",
            config_field="spatialab_path",
            allow_empty_switch="add 'spatialab' to the config field `allow_empty_sources`",
        )
    assert str(empty.value) == (
        "SpatiaLab at /data/SpatiaLab holds no record: check the config field `spatialab_path`, or add "
        "'spatialab' to the config field `allow_empty_sources` to build an empty table on purpose."
    )
    assert (empty.value.location, empty.value.config_field, empty.value.quarantined) == (
        "/data/SpatiaLab",
        "spatialab_path",
        0,
    )
    require_rows(0, log, what="SpatiaLab", location="x", config_field="spatialab_path", allow_empty=True)
    for index in range(5):
        log.add(str(index), f"missing image: img/{index}.png")
    require_rows(3, log, what="SpatiaLab", location="x", config_field="spatialab_path")  # some rows kept
    for allow_empty in (False, True):  # the switch lets only an input with no record through
        with pytest.raises(EmptySourceError) as error:
            require_rows(
                0, log, what="SpatiaLab", location="x", config_field="spatialab_path", allow_empty=allow_empty
            )
        message = str(error.value)
        assert "img/0.png" in message and "img/2.png" in message and "img/3.png" not in message
        assert message.count(".") >= 1 and "\n" not in message  # one sentence, one line
        assert error.value.quarantined == 5
        assert error.value.first_reasons == [f"{index}: missing image: img/{index}.png" for index in range(3)]
