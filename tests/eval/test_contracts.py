"""The eval_items and eval_report contracts accept valid rows and name the rule an invalid one breaks."""

import polars as pl
import pytest
from PIL import Image

from data_contracts.eval_items import EvalItems
from data_contracts.eval_report import EvalReport
from data_contracts.images import encode_image
from data_contracts.validation import polars_schema, split_valid

IMAGE = encode_image(Image.new("RGB", (8, 6), "red"), path="a.png")


def item(**overrides):
    row = {
        "benchmark": "omnispatial",
        "item_id": "q1",
        "images": [IMAGE],
        "image_width": 8,
        "image_height": 6,
        "question": "Which is closer?",
        "options": ["the mug", "the lamp"],
        "answer_format": "choice",
        "answer_index": 1,
        "answer": "B",
        "numeric_answer": None,
        "unit": None,
        "category": "Egocentric",
        "task_type": "Perspective_Taking",
        "source": "omnispatial",
        "question_key": "q1",
        "flipped": False,
        "circular_index": 0,
        "reference_boxes": [],
        "split": "test",
        "origin": "real",
    }
    row.update(overrides)
    return row


NUMERIC = {
    "options": [],
    "answer_format": "numeric",
    "answer_index": None,
    "answer": "1.5",
    "numeric_answer": 1.5,
    "unit": "m",
}


class TestEvalItems:
    cases = (
        (item(), None),  # a valid multiple-choice item
        (item(**NUMERIC), None),  # a valid numeric item
        (item(options=[], answer_index=3, answer="D"), None),  # options drawn in the image: A-D
        (item(options=[], answer_index=4, answer="E"), "letter_matches_index"),  # beyond A-D
        (item(answer="A"), "letter_matches_index"),  # letter disagrees with the index
        (item(answer_index=2, answer="C"), "letter_matches_index"),  # index past the options
        (item(numeric_answer=2.0), "choice_or_numeric"),  # a choice with a number
        (item(**{**NUMERIC, "options": ["a"]}), "choice_or_numeric"),  # numeric with options
        (
            item(reference_boxes=[{"bbox_2d": [10, 10, 5, 20], "label": "x", "validity": 1.0}]),
            "reference_boxes_are_ordered",
        ),
    )

    @pytest.mark.parametrize("row, broken_rule", cases)
    def test_rules(self, row, broken_rule):
        frame = pl.DataFrame([row], schema=polars_schema(EvalItems))
        valid, invalid, _ = split_valid(frame, EvalItems)
        if broken_rule is None:
            assert valid.height == 1
        else:
            assert valid.height == 0 and broken_rule in invalid["reason"][0]


def score(**overrides):
    row = {
        "run_name": "r",
        "benchmark": "omnispatial",
        "item_id": "q1",
        "model": "m",
        "adapter": None,
        "backend": "transformers",
        "prompt_format": "spatialcore",
        "category": "c",
        "task_type": "t",
        "source": "s",
        "question_key": "q1",
        "flipped": False,
        "circular_index": 0,
        "answer_format": "choice",
        "gold": "A",
        "completion": "</think>A",
        "finish_reason": "stop",
        "predicted": "A",
        "status": "correct",
        "score": 1.0,
        "n_boxes": 0,
        "box_uncertainty": None,
        "matched_iou": None,
    }
    row.update(overrides)
    return row


class TestEvalReport:
    cases = (
        (score(), None),  # correct
        (score(status="wrong", score=0.9, answer_format="numeric"), None),  # partial numeric credit
        (score(status="truncated", score=1.0), "only_answers_score"),  # a truncated completion cannot score
        (score(status="unparseable", score=1.0), "only_answers_score"),  # nor an unparseable one
        (score(status="correct", score=0.5), "correct_scores_one"),  # correct means 1
    )

    @pytest.mark.parametrize("row, broken_rule", cases)
    def test_rules(self, row, broken_rule):
        frame = pl.DataFrame([row], schema=polars_schema(EvalReport))
        valid, invalid, _ = split_valid(frame, EvalReport)
        if broken_rule is None:
            assert valid.height == 1
        else:
            assert valid.height == 0 and broken_rule in invalid["reason"][0]
