"""Scene graphs checked and filtered; ground-truth scenes by lemma matching; the count check."""

import pytest

from assets.stvqa.gt_scene import check_count, counted_noun, question_scene
from assets.stvqa.scene import build_scene, scene_graph_problems
from tests.stvqa.helpers import kitchen_row, scene_object, scene_row


class TestSceneGraphProblems:
    def test_good_row(self):
        assert scene_graph_problems(kitchen_row()) == []

    @pytest.mark.parametrize(
        ("row", "expected"),
        [
            # a relation whose object id is not an object of the graph
            (
                scene_row("d", [scene_object("1", "cup", [0, 0, 10, 10])], [("1", "on", "99")]),
                "relation 0 (1 on 99) names missing object 99",
            ),
            # a box without area
            (scene_row("z", [scene_object("1", "cup", [5, 5, 5, 10])], []), "zero-area pixel box"),
            # no image at all
            (scene_row("m", [scene_object("1", "cup", [0, 0, 10, 10])], [], image=None), "image is missing"),
            # bytes that are not an image
            (
                scene_row("b", [scene_object("1", "cup", [0, 0, 10, 10])], [], image=b"not an image"),
                "not a known image format",
            ),
            # the same object id twice
            (
                scene_row(
                    "t",
                    [scene_object("1", "cup", [0, 0, 10, 10]), scene_object("1", "mug", [20, 0, 30, 10])],
                    [],
                ),
                "object id 1 appears twice",
            ),
        ],
    )
    def test_bad_rows(self, row, expected):
        problems = scene_graph_problems(row)
        assert any(expected in problem for problem in problems), problems


class TestBuildScene:
    def test_duplicates_merged_and_relations_moved(self):
        scene = build_scene(kitchen_row())
        assert [obj.object_id for obj in scene.objects] == ["1", "2", "3", "5", "6", "7"]
        table = scene.get("3")
        assert table.merged_ids == ("4",)
        # "1 left of 4" now points at the surviving table
        assert [(r.subject_id, r.predicate, r.object_id) for r in scene.relations][1] == ("1", "left of", "3")

    def test_names_ids_and_references(self):
        scene = build_scene(kitchen_row())
        chairs = scene.objects_with_lemma("chair")
        assert [obj.scene_id for obj in chairs] == ["chair.1", "chair.2"]  # "Chairs" is named by its lemma
        assert [scene.referring_expression(obj) for obj in chairs] == ["the red chair", "the blue chair"]
        assert scene.referring_expression(scene.get("3")) == "the table"
        lights = scene.objects_with_lemma("traffic light")
        assert [scene.referring_expression(obj) for obj in lights] == [None, None]  # nothing tells them apart
        assert scene.resolve("the blue chair").object_id == "2"
        assert scene.resolve("chair") is None  # ambiguous
        assert scene.count("traffic light") == 2


class TestQuestionScene:
    def test_plural_and_multi_word_names(self):
        scene = build_scene(kitchen_row())
        gt = question_scene(scene, "How many traffic lights are above the cup?", ["1", "2"])
        assert [obj["id"] for obj in gt["objects"]] == ["cup.1", "traffic light.1", "traffic light.2"]
        assert gt["relationships"] == [
            {"subject": "traffic light.1", "predicate": "above", "object": "cup.1"}
        ]

    def test_attribute_narrows_and_options_count(self):
        scene = build_scene(kitchen_row())
        gt = question_scene(
            scene, "Where is the red chair with respect to the table?", ["left of", "right of"]
        )
        assert [obj["id"] for obj in gt["objects"]] == ["chair.1", "table.1"]
        assert gt["relationships"] == [{"subject": "chair.1", "predicate": "left of", "object": "table.1"}]
        both = question_scene(scene, "Which is closer to the camera?", ["the cup", "the chairs"])
        assert [obj["id"] for obj in both["objects"]] == ["chair.1", "chair.2", "cup.1"]

    def test_boxes_are_canonical(self):
        scene = build_scene(kitchen_row())
        gt = question_scene(scene, "Is there a cup?", ["yes", "no"])
        assert gt["objects"] == [{"id": "cup.1", "bbox_2d": [450, 400, 500, 500]}]


class TestCountCheck:
    def test_right_answer_kept(self):
        scene = build_scene(kitchen_row())
        check = check_count(scene, "How many tables are there in the image?", ["1", "2"], "A")
        assert (check.answer, check.note, check.counted) == ("A", None, 1)

    def test_filtered_scene_corrects_the_gold(self):
        # the raw graph lists the table twice; the filtered scene has one
        scene = build_scene(kitchen_row())
        check = check_count(scene, "How many tables are there in the image?", ["1", "2", "3"], "B")
        assert check.answer == "A" and "count corrected" in check.note and check.counted == 1

    def test_rejected_when_no_option_states_the_count(self):
        scene = build_scene(kitchen_row())
        check = check_count(scene, "How many chairs are there?", ["3", "4"], "A")
        assert check.rejected and "no option states that" in check.note

    def test_rejected_when_the_noun_is_absent(self):
        scene = build_scene(kitchen_row())
        check = check_count(scene, "How many dogs are in the picture?", ["0", "1"], "A")
        assert check.rejected and "does not contain" in check.note

    def test_attribute_in_the_counted_phrase(self):
        scene = build_scene(kitchen_row())
        assert check_count(scene, "How many red chairs are there?", ["1", "2"], "A").answer == "A"

    def test_counted_noun(self):
        assert counted_noun("how many Traffic Lights can you see?") == "Traffic Lights"
