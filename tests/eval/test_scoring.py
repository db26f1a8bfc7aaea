"""Strict scoring: case tables per output format, the reference evaluators' bugs as regressions, grouped metrics."""

import polars as pl
import pytest

from training.eval.scoring import (
    accuracy_summary,
    circular_scores,
    flip_scores,
    gold_letter,
    gold_option_text,
    output_format_for,
    score_prediction,
)

FOUR = {
    "item_id": "q",
    "options": ["a bit left", "0.9 m", "behind", "on top"],
    "answer_index": 1,
    "answer": "B",
    "answer_format": "choice",
}
TWO_GOLD_A = {
    "item_id": "q2",
    "options": ["yes", "no"],
    "answer_index": 0,
    "answer": "A",
    "answer_format": "choice",
}
DRAWN = {"item_id": "q3", "options": [], "answer_index": 2, "answer": "C", "answer_format": "choice"}
NUMERIC = {
    "item_id": "n",
    "options": [],
    "answer_index": None,
    "answer": "2.0",
    "numeric_answer": 2.0,
    "unit": "m",
    "answer_format": "numeric",
}

BOX = '{"bbox_2d": [100, 200, 300, 400], "label": "red chair"}\n'


class TestSpatialCore:
    CASES = (
        (FOUR, BOX + "The chair is left.</think>B", None, "correct", 1.0, "B"),  # well formed, right letter
        (FOUR, BOX + "reasoning</think>b", None, "correct", 1.0, "B"),  # either case, as the reward reads it
        (
            FOUR,
            BOX + "reasoning</think>(B)",
            None,
            "unparseable",
            0.0,
            None,
        ),  # not one letter alone: the reward gives no answer either
        (FOUR, BOX + "reasoning</think>B. 0.9 m", None, "unparseable", 0.0, None),  # letter then option text
        (FOUR, BOX + "reasoning</think>C", None, "wrong", 0.0, "C"),  # wrong letter
        (FOUR, BOX + "reasoning</think>E", None, "unparseable", 0.0, None),  # letter beyond the four options
        (
            FOUR,
            BOX + "reasoning</think>0.9 m",
            None,
            "unparseable",
            0.0,
            None,
        ),  # option text with a digit: never matched
        (
            FOUR,
            BOX + "reasoning</think>2",
            None,
            "unparseable",
            0.0,
            None,
        ),  # a digit is not an answer (1-based SpatiaLab habit)
        (
            FOUR,
            BOX + "reasoning</think>a bit left",
            None,
            "unparseable",
            0.0,
            None,
        ),  # "a" inside option text is not "A"
        (
            FOUR,
            BOX + "the answer is B",
            "stop",
            "unparseable",
            0.0,
            None,
        ),  # no </think> but a normal stop: a format error, not a truncation; B is never read
        (
            FOUR,
            BOX + "the answer is B",
            "length",
            "truncated",
            0.0,
            None,
        ),  # no </think> because the token limit cut it: truncated
        (
            FOUR,
            BOX + "reasoning</think>B",
            "length",
            "truncated",
            0.0,
            None,
        ),  # hit the token limit: no answer
        (FOUR, "r</think>x</think>B", None, "unparseable", 0.0, None),  # two </think>: no single answer
        (FOUR, None, "error", "error", 0.0, None),  # the backend returned nothing
        (
            TWO_GOLD_A,
            "I cannot tell</think>",
            None,
            "unparseable",
            0.0,
            None,
        ),  # empty answer is not "A" (gold A)
        (
            TWO_GOLD_A,
            "I cannot tell</think>maybe",
            None,
            "unparseable",
            0.0,
            None,
        ),  # no fallback letter when gold is A
        (TWO_GOLD_A, "r</think>C", None, "unparseable", 0.0, None),  # C does not exist among two options
        (DRAWN, "r</think>C", None, "correct", 1.0, "C"),  # options drawn in the image: letters A-D
        (DRAWN, "r</think>E", None, "unparseable", 0.0, None),  # beyond A-D
    )

    @pytest.mark.parametrize("item, completion, finish, status, score, predicted", CASES)
    def test_cases(self, item, completion, finish, status, score, predicted):
        scored = score_prediction(item, completion, "spatialcore", finish)
        assert (scored.status, scored.score, scored.predicted) == (status, score, predicted)


def _thinker(answer: str, close: bool = True) -> str:
    scene = '{"objects": [{"id": "chair.1", "bbox": [10, 20, 30, 40]}], "relationships": []}'
    tail = f"<answer>{answer}</answer>" if close else f"<answer>{answer}"
    return f"<observe>a room</observe><scene>{scene}</scene><think>left</think>{tail}"


class TestSpatialThinker:
    CASES = (
        (FOUR, _thinker("(B) 0.9 m"), "correct", 1.0, "B"),  # letter and option text
        (FOUR, _thinker("B"), "correct", 1.0, "B"),  # bare letter accepted, as in the reward
        (FOUR, _thinker("(B)"), "correct", 1.0, "B"),  # parenthesised letter
        (FOUR, _thinker("(B) behind"), "wrong", 0.0, "B"),  # right letter, wrong text: the reward says wrong
        (FOUR, _thinker("(C) behind"), "wrong", 0.0, "C"),  # wrong option
        (
            FOUR,
            _thinker("0.9 m"),
            "unparseable",
            0.0,
            None,
        ),  # option text without a letter: digits never matched
        (
            FOUR,
            _thinker("I don't know"),
            "unparseable",
            0.0,
            None,
        ),  # the reference evaluator counted this as "A"
        (
            TWO_GOLD_A,
            _thinker("not sure"),
            "unparseable",
            0.0,
            None,
        ),  # ... and would have scored it correct here
        (
            TWO_GOLD_A,
            _thinker("(A) yes", close=False),
            "unparseable",
            0.0,
            None,
        ),  # unclosed answer after a normal stop: no answer, labelled a format error
        (TWO_GOLD_A, "<observe>still looking", "unparseable", 0.0, None),  # no answer at all
        (FOUR, _thinker("B. 0.9 m"), "correct", 1.0, "B"),  # "X. text": the reward's grammar accepts it
        (FOUR, _thinker("B. behind"), "wrong", 0.0, "B"),  # the text of option C contradicts the letter
        (
            DRAWN,
            _thinker("(C) the third one"),
            "correct",
            1.0,
            "C",
        ),  # no option text to compare: the letter decides
    )

    @pytest.mark.parametrize("item, completion, status, score, predicted", CASES)
    def test_cases(self, item, completion, status, score, predicted):
        scored = score_prediction(item, completion, "spatialthinker")
        assert (scored.status, scored.score, scored.predicted) == (status, score, predicted)

    @pytest.mark.parametrize("completion", [_thinker("(A) yes", close=False), "<observe>still looking"])
    def test_length_stop_is_truncated(self, completion):
        scored = score_prediction(TWO_GOLD_A, completion, "spatialthinker", "length")
        assert (scored.status, scored.score, scored.predicted) == ("truncated", 0.0, None)
        # a complete, correct answer cut by the limit is still no answer
        assert (
            score_prediction(TWO_GOLD_A, _thinker("(A) yes"), "spatialthinker", "length").status
            == "truncated"
        )


class TestDgeFormat:
    CASES = (
        (NUMERIC, "<think>far</think><answer>2 m</answer>", "correct", 1.0, "2"),  # exact
        (
            NUMERIC,
            "<think>far</think><answer>210 cm</answer>",
            "wrong",
            0.9,
            "2.1",
        ),  # MRA partial credit after unit conversion
        (NUMERIC, "<think>far</think><answer>3 m</answer>", "wrong", 0.0, "3"),  # 50% off: no credit
        (
            NUMERIC,
            "<think>far</think><answer>2 m^2</answer>",
            "unparseable",
            0.0,
            None,
        ),  # area is not a length
        (NUMERIC, "<think>far</think><answer>quite far</answer>", "unparseable", 0.0, None),  # no number
        (NUMERIC, "<think>far</think><answer>2 m", "unparseable", 0.0, None),  # unclosed answer, normal stop
        (TWO_GOLD_A, "<think>x</think><answer>A</answer>", "correct", 1.0, "A"),  # letter in the dge format
        (
            TWO_GOLD_A,
            "<think>x</think><answer>maybe</answer>",
            "unparseable",
            0.0,
            None,
        ),  # no letter, no fallback
    )

    @pytest.mark.parametrize("item, completion, status, score, predicted", CASES)
    def test_cases(self, item, completion, status, score, predicted):
        prompt_format = "spatialcore" if item["answer_format"] == "numeric" else "dge"
        scored = score_prediction(item, completion, prompt_format)
        assert (scored.status, pytest.approx(scored.score), scored.predicted) == (status, score, predicted)


def test_numeric_items_are_always_dge():
    assert output_format_for(NUMERIC, "spatialthinker") == "dge"
    with pytest.raises(ValueError, match="unknown output format"):
        output_format_for(FOUR, "plain")


def test_gold_comes_from_the_index_not_the_option_text():
    # The reference recovered the gold letter from "B. a bit right" and read "A" from "a bit".
    item = {"item_id": "x", "options": ["Go a bit right", "a bit left"], "answer_index": 1, "answer": "B"}
    assert gold_letter(item) == "B"
    assert gold_option_text(item) == "(B) a bit left"
    with pytest.raises(ValueError, match="disagrees"):
        gold_letter({**item, "answer": "A"})


def _scores(rows):
    return pl.DataFrame(
        rows,
        schema={
            "run_name": pl.String,
            "benchmark": pl.String,
            "question_key": pl.String,
            "flipped": pl.Boolean,
            "circular_index": pl.Int64,
            "status": pl.String,
            "score": pl.Float64,
            "category": pl.String,
        },
        orient="row",
    )


def test_circular_and_flip_eval():
    frame = _scores(
        [
            # q1: every rotation of the original right, flipped rotation 1 wrong
            ("r", "3dsrbench", "q1", False, 0, "correct", 1.0, "height"),
            ("r", "3dsrbench", "q1", False, 1, "correct", 1.0, "height"),
            ("r", "3dsrbench", "q1", True, 0, "correct", 1.0, "height"),
            ("r", "3dsrbench", "q1", True, 1, "wrong", 0.0, "height"),
            # q2: one rotation unparseable, the flipped question fully right
            ("r", "3dsrbench", "q2", False, 0, "correct", 1.0, "location"),
            ("r", "3dsrbench", "q2", False, 1, "unparseable", 0.0, "location"),
            ("r", "3dsrbench", "q2", True, 0, "correct", 1.0, "location"),
            ("r", "3dsrbench", "q2", True, 1, "correct", 1.0, "location"),
            # q3: no flipped counterpart, both rotations right, one of them failed to come back
            ("r", "3dsrbench", "q3", False, 0, "correct", 1.0, "height"),
            ("r", "3dsrbench", "q3", False, 1, "error", 0.0, "height"),
        ]
    )
    # CircularEval (3DSRBench's script strips only "-N"): the flipped question is a question of its own
    circular = circular_scores(frame).sort("question_key", "flipped")
    assert circular["score"].to_list() == [1.0, 0.0, 0.0, 1.0, 0.0]
    assert circular["status"].to_list() == ["correct", "wrong", "unparseable", "correct", "error"]
    assert circular["category"].to_list() == ["height", "height", "location", "location", "height"]
    assert accuracy_summary(circular)["accuracy"] == 40.0 and accuracy_summary(circular)["error"] == 1
    # FlipEval: every rotation of the question and of its flipped counterpart
    flip = flip_scores(frame).sort("question_key")
    assert flip["score"].to_list() == [0.0, 0.0, 0.0]
    assert flip["variants"].to_list() == [4, 4, 2]


def test_flip_eval_without_a_flipped_counterpart_uses_the_rotations():
    frame = _scores(
        [("r", "b", "q1", False, 0, "correct", 1.0, "c"), ("r", "b", "q1", False, 1, "correct", 1.0, "c")]
    )
    assert flip_scores(frame)["score"].to_list() == [1.0]
