"""The answer grammars: one case per row of the tables in `training/rewards/README.md`.

Every row is checked against the training reward and against the evaluator (`spatial-eval`'s
strict scoring), which must agree; a last test checks that the README tables list exactly these
forms, in this order, so the documentation cannot drift from the code.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.rewards.builders import spatialthinker_completion
from training.eval.scoring import score_prediction
from training.rewards.dge import score_dge
from training.rewards.spatialcore import score_spatialcore
from training.rewards.spatialthinker import answer_matches, score_spatialthinker

README = Path(__file__).resolve().parents[2] / "training" / "rewards" / "README.md"

SPATIALCORE_OPTIONS = ["left", "0.9 m", "behind", "on top"]
SPATIALCORE_ITEM = {
    "item_id": "q",
    "options": SPATIALCORE_OPTIONS,
    "answer_index": 1,
    "answer": "B",
    "answer_format": "choice",
}

CHOICE_OPTIONS = ["Go straight", "Turn a bit to the right", "Turn a bit to the left", "Stop"]
CHOICE_GOLD = "(C) Turn a bit to the left"
CHOICE_ITEM = {
    "item_id": "q",
    "options": CHOICE_OPTIONS,
    "answer_index": 2,
    "answer": "C",
    "answer_format": "choice",
}
GT_SCENE = {"objects": [{"id": "car.1", "bbox_2d": [100, 100, 300, 300]}], "relationships": []}
CAR = ("car.1", [64, 48, 192, 144])


class TestSpatialCoreAnswerGrammar:
    # (completion, letter read or None) -- gold B among four listed options
    CASES = (
        ("r</think>B", "B"),  # the form the prompt asks for
        ("r</think>\n\n B \n", "B"),  # whitespace around the letter is ignored
        ("r</think>b", "B"),  # either case, as the public reference (re.I)
        ("<think>r</think>B", "B"),  # a leading <think> is tolerated
        ("r</think>C", "C"),  # another option: wrong
        ("r</think>(B)", None),  # not one letter alone
        ("r</think>B.", None),  # not one letter alone
        ("r</think>B)", None),  # not one letter alone
        ("r</think>B. 0.9 m", None),  # a letter with option text is not the single answer token
        ("r</think>The answer is B", None),  # prose
        ("r</think>a bit left", None),  # never "A" from "a bit"
        ("r</think>E", None),  # beyond the four options
        ("r</think>2", None),  # a digit is not a letter
        ("r</think>", None),  # nothing after </think>
        ("r</think>A</think>B", None),  # two </think>: no single answer (the reference reads B)
        ("r: the answer is B", None),  # no </think>: the rollout did not finish
    )

    @pytest.mark.parametrize(("completion", "letter"), CASES)
    def test_reward(self, completion, letter):
        score = score_spatialcore(
            completion, answer="B", options=SPATIALCORE_OPTIONS, question="Where?", pseudo_gt=[]
        )
        assert score.predicted_letter == letter
        assert score.answer == (1.0 if letter == "B" else 0.0)
        assert score.format == (1.0 if letter is not None else 0.0)  # the same reading decides the format

    @pytest.mark.parametrize(("completion", "letter"), CASES)
    def test_evaluator(self, completion, letter):
        scored = score_prediction(SPATIALCORE_ITEM, completion, "spatialcore", "stop")
        assert scored.predicted == letter
        expected = {"B": "correct", None: "unparseable"}.get(letter, "wrong")
        assert scored.status == expected


class TestChoiceAnswerGrammar:
    # (<answer> content, verdict: "correct", "wrong" or None for no answer) -- gold C of four options
    CASES = (
        ("(C) Turn a bit to the left", "correct"),  # the trained form
        ("(c) turn a bit  to the left.", "correct"),  # case, spaces and a final period ignored
        ("C. Turn a bit to the left", "correct"),  # OmniSpatial-style "X. text" (scored wrong before)
        ("C) Turn a bit to the left", "correct"),  # "X)" before the text
        ("C: Turn a bit to the left", "correct"),  # "X:" before the text
        ("(C)", "correct"),  # the letter alone
        ("C", "correct"),  # the letter alone
        ("C.", "correct"),  # the letter alone
        ("c", "correct"),  # either case
        ("(C) Turn a bit to the right", "wrong"),  # another option's text contradicts the letter
        ("(B) Turn a bit to the left", "wrong"),  # another option's letter, whatever the text
        ("B", "wrong"),  # another letter
        ("Turn a bit to the left", None),  # option text without its letter
        ("A bit to the left", None),  # no delimiter after a letter: never "A" from "a bit"
        ("The answer is C", None),  # prose
        ("C or D", None),  # two candidates
        ("E", None),  # beyond the four options
        ("", None),  # empty
    )

    @pytest.mark.parametrize(("answer", "verdict"), CASES)
    def test_spatialthinker_reward(self, answer, verdict):
        assert answer_matches(answer, CHOICE_GOLD) is (verdict == "correct")
        completion = spatialthinker_completion([CAR], [], answer)
        score = score_spatialthinker(
            completion, answer_option_text=CHOICE_GOLD, gt_scene=GT_SCENE, image_size=(640, 480)
        )
        assert score.format == 1.0 and score.accuracy == (1.0 if verdict == "correct" else 0.0)

    @pytest.mark.parametrize(("answer", "verdict"), CASES)
    def test_dge_reward(self, answer, verdict):
        score = score_dge(f"<think>r</think><answer>{answer}</answer>", answer="C", options=CHOICE_OPTIONS)
        assert score.accuracy == (1.0 if verdict == "correct" else 0.0)
        assert score.has_answer is (verdict is not None)

    @pytest.mark.parametrize(("answer", "verdict"), CASES)
    @pytest.mark.parametrize("prompt_format", ["spatialthinker", "dge"])
    def test_evaluator(self, answer, verdict, prompt_format):
        if prompt_format == "spatialthinker":
            completion = spatialthinker_completion([CAR], [], answer)
        else:
            completion = f"<think>r</think><answer>{answer}</answer>"
        scored = score_prediction(CHOICE_ITEM, completion, prompt_format, "stop")
        assert scored.status == (verdict or "unparseable")

    def test_options_in_the_image_let_the_letter_decide(self):
        drawn = {**CHOICE_ITEM, "options": []}
        completion = spatialthinker_completion([CAR], [], "(C) the third arrow")
        assert score_prediction(drawn, completion, "spatialthinker").status == "correct"
        assert answer_matches("(C) the third arrow", "(C)")

    def test_letter_only_switch(self):
        assert not answer_matches("C", CHOICE_GOLD, accept_letter_only=False)
        assert answer_matches("C. Turn a bit to the left", CHOICE_GOLD, accept_letter_only=False)


def _readme_table(heading: str) -> list[tuple[str, str]]:
    """(form, second column) of the first table after the paragraph starting with ``heading``."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    rows = []
    for line in section.splitlines():
        if not line.startswith('| `"'):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip("|").split(" | ")]
        form = re.fullmatch(r"`(.*)`", cells[0]).group(1)
        rows.append((ast.literal_eval(form), cells[1]))
    return rows


def test_readme_tables_list_the_tested_forms():
    spatialcore = _readme_table("**SpatialCORE** (`parsing.read_spatialcore_answer`")
    assert spatialcore == [
        (completion, f"`{letter}`" if letter else "–")
        for completion, letter in TestSpatialCoreAnswerGrammar.CASES
    ]
    choice = _readme_table("**SpatialThinker `<answer>` and DGE multiple choice**")
    assert choice == [(answer, verdict or "no answer") for answer, verdict in TestChoiceAnswerGrammar.CASES]
