"""Contracts accept valid rows and explain invalid ones."""

import polars as pl
import pytest
from PIL import Image

from data_contracts import mcq_questions, rgbd_frames, rgbd_scenes, scene_graphs
from data_contracts.images import IMAGE_DTYPE, decode_image, encode_image, sniff_format, to_huggingface_arrow
from data_contracts.validation import check_frame, polars_schema, split_valid

IMAGE = encode_image(Image.new("RGB", (8, 6), "red"), path="a.png")


def mcq_row(**overrides):
    row = {
        "question_id": "q1",
        "image_sha256": "0" * 64,
        "image_width": 8,
        "image_height": 6,
        "question": "Which is closer?",
        "options": ["the mug", "the lamp"],
        "answer_index": 1,
        "answer": "B",
        "task_type": "Perspective_Taking",
        "sub_task_type": "Egocentric",
        "split": "train",
        "source": "omnispatial",
        "origin": "real",
    }
    row.update(overrides)
    return row


def frame_of(contract, rows):
    return pl.DataFrame(rows, schema=polars_schema(contract))


class TestMcqQuestions:
    cases = [
        (mcq_row(), None),  # a valid row
        (
            mcq_row(question_id="q2", answer_index=2, answer="C"),
            "answer_index_in_options",
        ),  # index past the options
        (mcq_row(question_id="q3", answer="A"), "letter_matches_index"),  # letter disagrees with the index
        (
            mcq_row(question_id="q4", options=[], answer_index=0, answer="A"),
            None,
        ),  # options drawn in the image
    ]

    @pytest.mark.parametrize("row, broken_rule", cases)
    def test_rules(self, row, broken_rule):
        valid, invalid, counts = split_valid(
            frame_of(mcq_questions.McqQuestions, [row]), mcq_questions.McqQuestions
        )
        if broken_rule is None:
            assert valid.height == 1 and invalid.height == 0
        else:
            assert valid.height == 0
            assert broken_rule in invalid["reason"][0]
            assert counts[broken_rule] == 1

    def test_primary_key_unique(self):
        report = check_frame(
            frame_of(mcq_questions.McqQuestions, [mcq_row(), mcq_row()]), mcq_questions.McqQuestions
        )
        assert not report.passed and report.num_valid == 0

    def test_origin_is_sample_world_or_real(self):
        rows = [mcq_row(question_id="a", origin="sample_world"), mcq_row(question_id="b", origin="synthetic")]
        valid, invalid, _ = split_valid(
            frame_of(mcq_questions.McqQuestions, rows), mcq_questions.McqQuestions
        )
        assert valid["question_id"].to_list() == ["a"] and invalid["question_id"].to_list() == ["b"]
        assert "origin" in invalid["reason"][0]

    def test_missing_column_is_reported(self):
        frame = frame_of(mcq_questions.McqQuestions, [mcq_row()]).drop("split")
        report = check_frame(frame, mcq_questions.McqQuestions)
        assert report.missing_columns == ["split"] and not report.passed


def test_scene_graph_rules():
    obj = lambda oid, box: {  # noqa: E731
        "object_id": oid,
        "name": "mug",
        "names": ["mug"],
        "attributes": ["red"],
        "bbox": box,
        "bbox_px": [0.0, 0.0, 1.0, 1.0],
    }
    good = {
        "image_id": "1",
        "image": IMAGE,
        "image_width": 8,
        "image_height": 6,
        "source": "vg",
        "origin": "real",
        "split": "train",
        "objects": [obj("a", [0, 0, 10, 10]), obj("b", [5, 5, 20, 20])],
        "relationships": [{"subject_id": "a", "predicate": "left of", "object_id": "b"}],
    }
    dangling = {
        **good,
        "image_id": "2",
        "relationships": [{"subject_id": "a", "predicate": "on", "object_id": "zzz"}],
    }
    flat_box = {**good, "image_id": "3", "objects": [obj("a", [10, 0, 10, 10]), obj("b", [5, 5, 20, 20])]}
    valid, invalid, counts = split_valid(
        frame_of(scene_graphs.SceneGraphs, [good, dangling, flat_box]), scene_graphs.SceneGraphs
    )
    assert valid["image_id"].to_list() == ["1"]
    assert counts == {"relations_reference_objects": 1, "object_boxes_are_ordered": 1}


def test_rgbd_rules():
    row = {
        "scene_id": "s",
        "frame_index": 0,
        "color_path": "c.jpg",
        "depth_path": "d.png",
        "instance_path": None,
        "depth_scale": 1000.0,
        "color_width": 8,
        "color_height": 6,
        "depth_width": 4,
        "depth_height": 3,
        "color_intrinsics": [5.0, 0, 4, 0, 5.0, 3, 0, 0, 1],
        "depth_intrinsics": [2.5, 0, 2, 0, 2.5, 1.5, 0, 0, 1],
        "pose": [1.0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1],
        "source": "scannet",
        "origin": "sample_world",
    }
    projective = {**row, "frame_index": 1, "pose": [1.0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0.5, 1]}
    valid, _, counts = split_valid(
        frame_of(rgbd_frames.RgbdFrames, [row, projective]), rgbd_frames.RgbdFrames
    )
    assert valid.height == 1 and counts == {"pose_bottom_row_is_homogeneous": 1}
    scene = {
        "scene_id": "s",
        "scene_dir": "/x",
        "mesh_path": None,
        "segs_path": None,
        "aggregation_path": None,
        "objects": [{"object_id": 0, "label": "chair"}, {"object_id": 0, "label": "mug"}],
        "num_frames": 1,
        "source": "x",
        "origin": "sample_world",
    }
    _, _, counts = split_valid(frame_of(rgbd_scenes.RgbdScenes, [scene]), rgbd_scenes.RgbdScenes)
    assert counts == {"object_ids_unique": 1}


def test_images_load_with_datasets(tmp_path):
    import datasets
    import pyarrow.parquet as pq

    frame = frame_of(mcq_questions.McqQuestionsWithImage, [mcq_row(image=IMAGE)])
    pq.write_table(to_huggingface_arrow(frame), tmp_path / "t.parquet")
    loaded = datasets.load_dataset("parquet", data_files=str(tmp_path / "t.parquet"), split="train")
    assert loaded[0]["image"].size == (8, 6)
    assert pl.read_parquet(tmp_path / "t.parquet").schema["image"] == IMAGE_DTYPE
    assert decode_image(IMAGE).size == (8, 6)


def test_sniff_format_ignores_file_name():
    jpeg = encode_image(Image.new("RGB", (4, 4)), path="looks_like.png", fmt="JPEG")
    assert sniff_format(jpeg["bytes"]) == "jpeg"
