"""SpatialThinker reward: format -> count -> accuracy -> spatial, with pixel boxes."""

from __future__ import annotations

import json

import pytest

from tests.rewards.builders import scalar_ciou, spatialthinker_completion
from training.rewards.spatialthinker import SpatialThinkerConfig, answer_matches, score_spatialthinker

IMAGE_SIZE = (640, 480)
GT_SCENE = {
    "objects": [
        {"id": "mug.1", "bbox_2d": [100, 100, 200, 200]},  # pixels [64, 48, 128, 96]
        {"id": "dining table.1", "bbox_2d": [0, 500, 1000, 1000]},  # pixels [0, 240, 640, 480]
    ],
    "relationships": [{"subject": "mug.1", "predicate": "on", "object": "dining table.1"}],
}
MUG = ("mug.1", [64, 48, 128, 96])
TABLE = ("dining table.1", [0, 240, 640, 480])
ON = ("mug.1", "on", "dining table.1")
SHIFTED_MUG_CIOU = (scalar_ciou([74, 48, 138, 96], [64, 48, 128, 96]) + 1) / 2


def score(completion, answer="(A) left", gt_scene=GT_SCENE, image_size=IMAGE_SIZE, **kwargs):
    return score_spatialthinker(
        completion, answer_option_text=answer, gt_scene=gt_scene, image_size=image_size, **kwargs
    )


class TestSpatialThinkerReward:
    @pytest.mark.parametrize(
        ("completion", "expected_total"),
        [
            # everything right: 0.1 + 0.2 + 0.5 + 0.2
            (spatialthinker_completion([MUG, TABLE], [ON], "(A) left"), 1.0),
            # right scene, wrong answer: no accuracy and no spatial credit
            (spatialthinker_completion([MUG, TABLE], [ON], "(B) right"), 0.3),
            # empty scene graph with the right answer: count 0, spatial 0 (below the grounded 1.0)
            (spatialthinker_completion([], [], "(A) left"), 0.6),
            # one object, no relation: count 0.7 * 0.5 + 0.3 * 0, spatial 1/2
            (spatialthinker_completion([MUG], [], "(A) left"), 0.1 + 0.2 * 0.35 + 0.5 + 0.2 * 0.5),
            # bare letter answer accepted
            (spatialthinker_completion([MUG, TABLE], [ON], "A"), 1.0),
            # case, spaces and the final period do not matter
            (spatialthinker_completion([MUG, TABLE], [ON], "(a)   LEFT."), 1.0),
            # a mug box shifted 10 px: spatial = ((CIoU + 1) / 2 + 1) / 2
            (
                spatialthinker_completion([("mug.1", [74, 48, 138, 96]), TABLE], [ON], "(A) left"),
                0.8 + 0.2 * (SHIFTED_MUG_CIOU + 1) / 2,
            ),
            # repeated ids: format 0 zeroes everything
            (spatialthinker_completion([MUG, MUG], [ON], "(A) left"), 0.0),
            # missing <observe>: format 0
            (spatialthinker_completion([MUG, TABLE], [ON], "(A) left").replace("<observe>", ""), 0.0),
            # tags out of order: format 0
            (
                '<observe>x</observe><think>t</think><scene>{"objects": []}</scene><answer>(A) left</answer>',
                0.0,
            ),
            # unclosed answer: no answer
            (spatialthinker_completion([MUG, TABLE], [ON], "(A) left").replace("</answer>", ""), 0.0),
            # two extra objects: object count 1 - 2/2 = 0; relation count 1
            (
                spatialthinker_completion(
                    [MUG, TABLE, ("cup.1", [1, 1, 5, 5]), ("cup.2", [6, 6, 9, 9])], [ON], "(A) left"
                ),
                0.1 + 0.2 * 0.3 + 0.5 + 0.2 * 1.0,
            ),
        ],
    )
    def test_totals(self, completion, expected_total):
        assert score(completion).total == pytest.approx(expected_total, abs=1e-9)

    def test_terms(self):
        result = score(spatialthinker_completion([MUG, TABLE], [ON], "(A) left"))
        assert (result.format, result.count, result.accuracy, result.spatial) == (
            1.0,
            1.0,
            1.0,
            pytest.approx(1.0),
        )
        assert result.answer_correct and result.has_answer
        assert (result.n_pred_objects, result.n_gt_objects) == (2, 2)
        assert result.mean_matched_ciou == pytest.approx(1.0)

    def test_format_failure_keeps_raw_correctness_for_logging(self):
        result = score(spatialthinker_completion([MUG, MUG], [], "(A) left"))
        assert result.total == 0.0 and result.answer_correct

    def test_matching_prefers_labels(self):
        # boxes swapped between the labels: each label keeps its own object (cost 2 x label mismatch)
        swapped = spatialthinker_completion(
            [("mug.1", TABLE[1]), ("dining table.1", MUG[1])], [ON], "(A) left"
        )
        result = score(swapped)
        expected = (scalar_ciou(TABLE[1], MUG[1]) + 1) / 2
        assert result.spatial == pytest.approx(max(0.0, expected))

    def test_gt_scene_as_json_and_without_objects(self):
        perfect = spatialthinker_completion([MUG, TABLE], [ON], "(A) left")
        assert score(perfect, gt_scene=json.dumps(GT_SCENE)).total == pytest.approx(1.0)
        # no ground-truth objects and none predicted: full spatial credit
        assert score(
            spatialthinker_completion([], [], "(A) left"), gt_scene={"objects": []}
        ).total == pytest.approx(1.0)
        # unreadable ground truth is treated as empty
        assert score(perfect, gt_scene="{oops").n_gt_objects == 0

    def test_boxes_compared_in_pixels(self):
        # the grid box [100,100,200,200] of a 640x480 image is [64,48,128,96] in pixels, not grid units
        grid_units = spatialthinker_completion([("mug.1", [100, 100, 200, 200]), TABLE], [ON], "(A) left")
        assert score(grid_units).spatial < 0.99

    def test_normalized_frame_option(self):
        shifted = spatialthinker_completion([("mug.1", [74, 48, 138, 96]), TABLE], [ON], "(A) left")
        pixels = score(shifted).spatial
        normalized = score(shifted, config=SpatialThinkerConfig(normalize_boxes=True)).spatial
        assert pixels != pytest.approx(normalized)
        assert 0.0 <= normalized <= 1.0

    @pytest.mark.parametrize("image_size", [(0, 480), (640,), None, ("a", "b"), (float("nan"), 3)])
    def test_bad_image_size_raises(self, image_size):
        with pytest.raises(ValueError):
            score("x", image_size=image_size)

    @pytest.mark.parametrize("gold", [None, "", "  "])
    def test_missing_gold_raises(self, gold):
        with pytest.raises(ValueError):
            score("x", answer=gold)

    @pytest.mark.parametrize(
        ("predicted", "gold", "expected"),
        [
            ("(B) red car", "(B) red car", True),  # exact
            ("(B)", "(B) red car", True),  # bare letter
            ("B.", "(B) red car", True),  # letter with a period
            ("(C)", "(B) red car", False),  # other letter
            ("(B) blue car", "(B) red car", False),  # right letter, wrong text
            ("", "", False),  # nothing is never right
            (None, "(B) x", False),  # no answer
        ],
    )
    def test_answer_matches(self, predicted, gold, expected):
        assert answer_matches(predicted, gold) is expected

    def test_letter_only_switch(self):
        completion = spatialthinker_completion([MUG, TABLE], [ON], "A")
        assert score(completion, config=SpatialThinkerConfig(accept_letter_only=False)).accuracy == 0.0
