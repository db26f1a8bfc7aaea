"""The ``annotations`` backend: phrases grounded in COCO-style human boxes (annotations.py, pseudo_gt.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from assets.grounding.annotations import (
    CocoInstances,
    Instance,
    PhraseQuery,
    decode_segmentation,
    ground_phrases,
    matching_categories,
    name_pixel_colours,
    rle_counts_from_string,
)
from assets.grounding.phrases import PhraseSettings, extract_object_phrases
from assets.grounding.pseudo_gt import PseudoGtSettings, build_pseudo_gt
from data_contracts.boxes import pixels_to_grid
from data_contracts.pseudo_gt_boxes import PseudoGtBoxes
from data_contracts.validation import check_frame
from readers.mcq import omnispatial_question_id


def _expected_boxes(world: Path) -> dict[str, set[tuple[int, ...]]]:
    """Per OmniSpatial question, the true grid boxes of the objects it names (from the world's truth file).

    An object is named when its full name ("green box") is in the question or an option; a count
    question names every counted object ("How many boxes", "How many orange objects").
    """
    truth = json.loads((world / "truth" / "world.json").read_text())
    records = {
        record["id"]: record for record in json.loads((world / "omnispatial" / "data.json").read_text())
    }
    views = {}
    for scene in truth["scenes"]:
        objects = {item["object_id"]: item for item in scene["objects"]}
        for view in scene["views"]:
            views[(scene["scene_id"], view["frame_index"])] = (view, objects)
    expected = {}
    for question in truth["questions"]:
        if question["dataset"] != "omnispatial":
            continue
        view, objects = views[(question["scene_id"], question["frame_index"])]
        record = records[question["id"]]
        text = " ".join([record["question"], *record["options"]]).lower()
        width, height = view["width"], view["height"]
        boxes = set()
        for seen in view["objects"]:
            scene_object = objects[seen["object_id"]]
            counted = (
                question["template"].startswith("count_") and seen["object_id"] in question["object_ids"]
            )
            named = f"{scene_object['colour']} {scene_object['category']}" in text
            if seen["coco_annotation_id"] is not None and (named or counted):
                boxes.add(tuple(pixels_to_grid(seen["bbox_px"], width, height)))
        expected[omnispatial_question_id("omnispatial", record["task_type"], question["id"])] = boxes
    return expected


def test_pseudo_gt_equals_the_true_boxes_on_the_sample_world(small_world, world_questions):
    phrases = extract_object_phrases(
        world_questions, PhraseSettings(spacy_model="rules", skip_task_types=[]), progress=False
    ).frame
    coco = CocoInstances.load(
        small_world / "coco" / "instances.json", images_root=small_world / "omnispatial"
    )
    frame, log = build_pseudo_gt(
        world_questions, phrases, "shard-00", PseudoGtSettings(), coco=coco, progress=False
    )
    assert len(log) == 0 and frame.height == world_questions.height
    assert check_frame(frame, PseudoGtBoxes).passed
    expected = _expected_boxes(small_world)
    for row in frame.iter_rows(named=True):
        assert {tuple(item["bbox_2d"]) for item in row["pseudo_gt"]} == expected[row["question_id"]], row
        assert all(item["validity"] == 1.0 for item in row["pseudo_gt"])
        assert row["unmatched_phrases"] == []
    assert sum(len(boxes) for boxes in expected.values()) > len(expected)  # questions name several objects


def test_questions_without_an_annotated_image_are_quarantined(small_world, world_questions):
    phrases = extract_object_phrases(
        world_questions, PhraseSettings(spacy_model="rules", skip_task_types=[]), progress=False
    ).frame
    coco = CocoInstances.load(small_world / "coco" / "instances.json")
    renamed = world_questions.with_columns(
        pl.when(pl.col("question_id") == world_questions["question_id"][0])
        .then(pl.struct(pl.col("image").struct.field("bytes"), pl.lit("missing.png").alias("path")))
        .otherwise(pl.col("image"))
        .alias("image")
    )
    frame, log = build_pseudo_gt(renamed, phrases, "shard-00", PseudoGtSettings(), coco=coco, progress=False)
    assert frame.height == world_questions.height - 1
    assert log.to_frame()["reason"][0].startswith("image 'missing.png' is not in the COCO instances file")


def test_questions_without_phrases_cost_nothing_and_need_no_annotations(world_questions):
    phrases = extract_object_phrases(
        world_questions,
        PhraseSettings(
            spacy_model="rules",
            skip_task_types=[
                "Dynamic_Reasoning",
                "Spatial_Interaction",
                "Complex_Logic",
                "Perspective_Taking",
            ],
        ),
        progress=False,
    ).frame
    frame, log = build_pseudo_gt(
        world_questions, phrases, "shard-03", PseudoGtSettings(), coco=None, progress=False
    )
    assert frame.height == world_questions.height and len(log) == 0
    assert frame["pseudo_gt"].list.len().sum() == 0 and set(frame["shard"]) == {"shard-03"}


def test_the_grounding_dino_backend_fills_the_same_table(tiny_grounding_dino, world_questions):
    phrases = extract_object_phrases(
        world_questions, PhraseSettings(spacy_model="rules", skip_task_types=[]), progress=False
    ).frame
    settings = PseudoGtSettings(
        backend="grounding_dino", model=str(tiny_grounding_dino), device="cpu", batch_size=4
    )
    frame, log = build_pseudo_gt(world_questions, phrases, "shard-01", settings, progress=False)
    assert len(log) == 0 and frame.height == world_questions.height
    assert check_frame(frame, PseudoGtBoxes).passed
    for row in frame.iter_rows(named=True):
        assert {item["label"] for item in row["pseudo_gt"]} <= set(row["phrases"])
        assert all(item["validity"] >= 0.3 for item in row["pseudo_gt"])
    assert set(frame["detector"]) == {str(tiny_grounding_dino)}


def test_an_image_that_does_not_decode_is_quarantined(tiny_grounding_dino, world_questions):
    phrases = extract_object_phrases(
        world_questions, PhraseSettings(spacy_model="rules", skip_task_types=[]), progress=False
    ).frame
    broken_id = world_questions["question_id"][0]
    broken = world_questions.with_columns(
        pl.when(pl.col("question_id") == broken_id)
        .then(pl.struct(pl.lit(b"not an image").alias("bytes"), pl.lit("0.png").alias("path")))
        .otherwise(pl.col("image"))
        .alias("image")
    )
    settings = PseudoGtSettings(backend="grounding_dino", model=str(tiny_grounding_dino), device="cpu")
    frame, log = build_pseudo_gt(broken, phrases, "shard-00", settings, progress=False)
    assert broken_id not in frame["question_id"].to_list() and frame.height == world_questions.height - 1
    assert log.to_frame()["record_id"].to_list() == [broken_id]
    assert "does not decode" in log.to_frame()["reason"][0]


BOX, CHAIR, RED_BOX = (
    Instance(1, "box", (10, 10, 50, 40)),
    Instance(2, "chair", (60, 20, 90, 70)),
    Instance(3, "box", (0, 50, 30, 80), attributes=("red",)),
)


class TestMatching:
    @pytest.mark.parametrize(
        ("phrase", "categories", "supercategories", "expected"),
        [
            ("trash can", ["trash can", "can"], {}, {"trash can"}),  # the full name wins over the head
            ("table", ["dining table", "chair"], {}, {"dining table"}),  # head of a two-word category
            ("man in orange clothes", ["person", "car"], {}, {"person"}),  # synonym; appearance words ignored
            ("sofa", ["couch"], {}, {"couch"}),  # synonym group
            (
                "gray vehicle",
                ["car", "bus", "dog"],
                {"car": "vehicle", "bus": "vehicle", "dog": "animal"},
                {"car", "bus"},
            ),  # supercategory
            ("orange objects", ["box", "chair"], {}, {"box", "chair"}),  # generic head: every category
            ("lamp", ["box", "chair"], {}, set()),  # nothing
        ],
    )
    def test_categories(self, phrase, categories, supercategories, expected):
        assert matching_categories(PhraseQuery.parse(phrase), categories, supercategories) == expected

    def test_singular_ambiguity_stays_unmatched(self):
        other_box = Instance(4, "box", (60, 60, 70, 70))
        matched, unmatched = ground_phrases(["box"], [BOX, other_box], width=100, height=100)
        assert matched == [] and unmatched == ["box: ambiguous: 2 instances of box"]

    def test_plural_takes_every_instance_with_singular_labels(self):
        matched, _ = ground_phrases(["boxes"], [BOX, CHAIR, RED_BOX], width=100, height=100)
        assert [(item["label"], item["bbox_2d"]) for item in matched] == [
            ("box", [100, 100, 500, 400]),
            ("box", [0, 500, 300, 800]),
        ]

    def test_size_word_picks_the_largest(self):
        matched, _ = ground_phrases(["large box"], [BOX, RED_BOX], width=100, height=100)
        assert matched[0]["bbox_2d"] == [100, 100, 500, 400]

    def test_attributes_of_the_file_decide(self):
        matched, _ = ground_phrases(["red box"], [BOX, RED_BOX], width=100, height=100)
        assert matched[0]["bbox_2d"] == [0, 500, 300, 800]

    def test_colour_of_the_pixels_decides(self):
        image = np.zeros((100, 100, 3))
        image[10:40, 10:50] = (0.9, 0.9, 0.9)  # a white box
        image[50:80, 0:30] = (0.1, 0.2, 0.7)  # a blue box
        blue_box = Instance(3, "box", (0, 50, 30, 80))
        matched, _ = ground_phrases(
            ["blue box", "white box"], [BOX, blue_box], width=100, height=100, image=image
        )
        assert [(item["label"], item["bbox_2d"]) for item in matched] == [
            ("blue box", [0, 500, 300, 800]),
            ("white box", [100, 100, 500, 400]),
        ]

    def test_a_later_phrase_settles_an_earlier_ambiguous_one(self):
        image = np.zeros((100, 100, 3))
        image[10:40, 10:50] = (0.45, 0.45, 0.45)  # gray or white in the shade: undecidable alone
        image[50:80, 0:30] = (0.1, 0.7, 0.1)  # a green box
        green_box = Instance(3, "box", (0, 50, 30, 80))
        matched, unmatched = ground_phrases(
            ["gray box", "green box"], [BOX, green_box], width=100, height=100, image=image
        )
        assert unmatched == [] and {item["label"] for item in matched} == {"gray box", "green box"}

    def test_an_instance_is_used_once(self):
        matched, unmatched = ground_phrases(["chair", "red chair"], [CHAIR], width=100, height=100)
        assert len(matched) == 1 and unmatched == []


def test_pixel_colour_names():
    pixels = np.array(
        [[0.78, 0.16, 0.14], [0.39, 0.08, 0.07], [0.35, 0.35, 0.36], [0.93, 0.5, 0.12], [0.03, 0.03, 0.03]]
    )
    assert name_pixel_colours(pixels).tolist() == [
        "red",
        "red",
        "gray",
        "orange",
        "black",
    ]  # shading keeps the hue


def _rle_to_string(counts: list[int]) -> str:
    """COCO's compressed RLE encoder (pycocotools' rleToString), to check the decoder against."""
    characters = []
    for index, value in enumerate(counts):
        if index > 2:
            value -= counts[index - 2]
        more = True
        while more:
            code = value & 0x1F
            value >>= 5
            more = value != -1 if code & 0x10 else value != 0
            if more:
                code |= 0x20
            characters.append(chr(code + 48))
    return "".join(characters)


@pytest.mark.parametrize("counts", [[0, 5, 10], [13, 40, 15, 39, 1000, 3], [3, 1, 1, 1, 500000, 7]])
def test_compressed_rle_round_trip(counts):
    assert rle_counts_from_string(_rle_to_string(counts)) == counts


def test_polygon_and_rle_masks_agree():
    polygon = [[2.0, 1.0, 6.0, 1.0, 6.0, 4.0, 2.0, 4.0]]
    mask = decode_segmentation(polygon, 8, 6)
    column_major = mask.T.ravel()
    runs, value, length = [], False, 0
    for pixel in column_major:
        if pixel != value:
            runs.append(length)
            value, length = pixel, 0
        length += 1
    runs.append(length)
    assert np.array_equal(decode_segmentation({"counts": runs, "size": [6, 8]}, 8, 6), mask)
    assert np.array_equal(decode_segmentation({"counts": _rle_to_string(runs), "size": [6, 8]}, 8, 6), mask)
    assert mask.sum() > 0 and decode_segmentation(None, 8, 6) is None


def test_missing_instances_file_names_the_config_field(tmp_path):
    with pytest.raises(FileNotFoundError, match="coco_instances_path"):
        CocoInstances.load(tmp_path / "absent.json")
