"""SpatialCORE reward: case tables (paper examples, reference bugs) and an independent oracle."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rewards.builders import box_line, spatialcore_completion
from training.rewards.confidence import BoxAlignmentError
from training.rewards.spatialcore import SpatialCoreConfig, f_alpha_score, read_pseudo_gt, score_spatialcore

QUESTION = "Is the black sedan to the left of the traffic light?"
OPTIONS = ["Yes", "No"]
SEDAN = ([100, 100, 300, 300], "black sedan")
LIGHT = ([600, 100, 700, 400], "traffic light")
TREE = ([800, 800, 900, 900], "tree")
PSEUDO_GT = [
    {"bbox_2d": [100, 100, 300, 300], "label": "black sedan", "validity": 0.8},
    {"bbox_2d": [600, 100, 700, 400], "label": "traffic light", "validity": 0.6},
]
# Perfect grounding of both objects: R = 0.8 * v -> precision (0.64 + 0.48) / 2 = 0.56,
# recall (0.64 + 0.48) / 1.4 = 0.8, F2 = 5 * 0.56 * 0.8 / (4 * 0.56 + 0.8) = 0.736842.
PERFECT_F2 = 5 * 0.56 * 0.8 / (4 * 0.56 + 0.8)


def score(completion, *, answer="A", options=OPTIONS, question=QUESTION, pseudo_gt=PSEUDO_GT, **kwargs):
    return score_spatialcore(
        completion, answer=answer, options=options, question=question, pseudo_gt=pseudo_gt, **kwargs
    )


class TestSpatialCoreReward:
    @pytest.mark.parametrize(
        ("completion", "pseudo_gt", "expected_total"),
        [
            # both objects grounded exactly, right answer: 1 + 0.2 + 0.05 bonus + F2
            (spatialcore_completion([SEDAN, LIGHT], "A"), PSEUDO_GT, 1.25 + PERFECT_F2),
            # same grounding, wrong answer: the positive spatial reward is gated by 0.3
            (spatialcore_completion([SEDAN, LIGHT], "B"), PSEUDO_GT, 0.25 + 0.3 * PERFECT_F2),
            # empty scene, right answer: missing-box penalty 0.3 x (0.8 + 0.6)
            (spatialcore_completion([], "A"), PSEUDO_GT, 1.2 - 0.42),
            # empty scene, wrong answer: a negative spatial reward is never softened
            (spatialcore_completion([], "B"), PSEUDO_GT, 0.2 - 0.42),
            # truncated (no </think>): no answer and no format reward; its boxes still count, gated
            (
                "\n".join([box_line(*SEDAN), box_line(*LIGHT), "still thinking A"]),
                PSEUDO_GT,
                0.3 * PERFECT_F2,
            ),
            # truncated without boxes: the missing-box penalty (no escape by truncating)
            ("I was thinking about A and", PSEUDO_GT, -0.42),
            # an extra unmatched box: over-prediction penalty 0.3
            (spatialcore_completion([SEDAN, LIGHT, TREE], "A"), PSEUDO_GT, 1.25 + PERFECT_F2 - 0.3),
            # no pseudo-GT: boxes neither rewarded nor penalised, no attempt bonus
            (spatialcore_completion([SEDAN], "A"), [], 1.2),
            # an off-topic label on the right place: R = 0.6 * 0.8, no bonus (label not in the question)
            (
                spatialcore_completion([(SEDAN[0], "zebra")], "A"),
                PSEUDO_GT,
                1.2 + f_alpha_score(0.48, 0.48 / 1.4, 2.0),
            ),
            # the same box twice: repeated label (-0.25) and repeated coordinates (-0.5) in R_fmt, and the
            # copy is matched to the traffic light with score 0
            (
                spatialcore_completion([SEDAN, SEDAN], "A"),
                PSEUDO_GT,
                1.0 + 0.2 * 0.25 + 0.05 + f_alpha_score(0.32, 0.64 / 1.4, 2.0),
            ),
            # an invalid box among the good ones: -0.25 in R_fmt
            (
                spatialcore_completion([SEDAN, ([5, 5, 1, 1], "cup"), LIGHT], "A"),
                PSEUDO_GT,
                1.15 + 0.05 + PERFECT_F2,
            ),
            # answer letter with option text: not the single answer token, so no answer and no format
            (spatialcore_completion([SEDAN, LIGHT], "A. Yes"), PSEUDO_GT, 0.3 * PERFECT_F2),
            # a lower-case letter alone is the answer (the reference reads it case-insensitively)
            (spatialcore_completion([SEDAN, LIGHT], "a"), PSEUDO_GT, 1.25 + PERFECT_F2),
            # a letter beyond the options is no answer
            (spatialcore_completion([SEDAN, LIGHT], "C"), PSEUDO_GT, 0.3 * PERFECT_F2),
            # two </think>: no answer, no format
            (spatialcore_completion([SEDAN, LIGHT], "A</think>A"), PSEUDO_GT, 0.3 * PERFECT_F2),
            # a box after </think> breaks the single-letter answer and earns nothing
            (
                spatialcore_completion([SEDAN], "A\n" + box_line(*LIGHT)),
                PSEUDO_GT,
                0.3 * f_alpha_score(0.64, 0.64 / 1.4, 2.0),
            ),
        ],
    )
    def test_totals(self, completion, pseudo_gt, expected_total):
        assert score(completion, pseudo_gt=pseudo_gt).total == pytest.approx(expected_total, abs=1e-9)

    def test_terms_of_the_perfect_case(self):
        result = score(spatialcore_completion([SEDAN, LIGHT], "A"))
        assert (result.answer, result.format, result.attempt_bonus) == (1.0, 1.0, 0.05)
        assert result.precision == pytest.approx(0.56)
        assert result.recall == pytest.approx(0.8)
        assert result.spatial == pytest.approx(PERFECT_F2)
        assert (result.n_pred, result.n_pseudo_gt, result.n_matched, result.n_unmatched_pred) == (2, 2, 2, 0)
        assert result.mean_matched_iou == pytest.approx(1.0)
        assert not result.truncated and result.has_answer and result.predicted_letter == "A"

    def test_paper_label_example(self):
        # "black sedan ahead" vs "black sedan": Sim = 2 / sqrt(6) (A.4); IoU 1 -> R = (0.6 + 0.2 Sim) * 0.8
        result = score(
            spatialcore_completion([(SEDAN[0], "black sedan ahead")], "A"), pseudo_gt=PSEUDO_GT[:1]
        )
        pair = (0.6 + 0.2 * 2 / math.sqrt(6)) * 0.8
        assert result.precision == pytest.approx(pair)
        assert result.recall == pytest.approx(pair / 0.8)

    def test_gold_comes_from_the_answer_letter_never_from_option_text(self):
        options = ["Go left", "Go a bit right", "Stop"]
        assert score("r</think>B", answer="B", options=options, pseudo_gt=[]).answer == 1.0
        assert score("r</think>A", answer="B", options=options, pseudo_gt=[]).answer == 0.0
        # a formatted gold cell "B. Go a bit right" is B (the reference's regex read "A" from "a bit")
        assert score("r</think>B", answer="B. Go a bit right", options=options, pseudo_gt=[]).answer == 1.0
        assert score("r</think>A", answer="B. Go a bit right", options=options, pseudo_gt=[]).answer == 0.0

    def test_truncated_completion_earns_no_answer(self):
        result = score("{long reasoning} the answer is A", pseudo_gt=[])
        assert result.truncated and not result.has_answer
        assert result.answer == 0.0 and result.format == 0.0 and result.total == 0.0

    def test_empty_scene_scores_below_grounded(self):
        empty = score(spatialcore_completion([], "A"))
        one_object = score(spatialcore_completion([SEDAN], "A"))
        both = score(spatialcore_completion([SEDAN, LIGHT], "A"))
        assert empty.total < one_object.total < both.total

    def test_duplicated_box_cannot_match_two_ground_truths(self):
        single_gt = PSEUDO_GT[:1]
        once = score(spatialcore_completion([SEDAN], "A"), pseudo_gt=single_gt)
        twice = score(spatialcore_completion([SEDAN, SEDAN], "A"), pseudo_gt=single_gt)
        assert twice.n_matched == 1 and twice.n_unmatched_pred == 1
        assert twice.spatial == pytest.approx(once.spatial - 0.3)
        assert twice.total < once.total
        # with two ground truths the copy takes the other one at score 0 and lowers precision
        copies = score(spatialcore_completion([SEDAN, SEDAN], "A"))
        assert copies.recall == pytest.approx(0.64 / 1.4)
        assert copies.precision == pytest.approx(0.32)

    @pytest.mark.parametrize(
        ("uncertainty", "config", "expected_spatial"),
        [
            # omega = [0.55, 1.0]: precision (0.55 * 0.64 + 0.48) / 2 = 0.416
            ([0.5, 0.0], SpatialCoreConfig(), f_alpha_score(0.416, 0.8, 2.0)),
            # fully certain boxes: same as no weighting
            ([0.0, 0.0], SpatialCoreConfig(), PERFECT_F2),
            # ablation without confidence: uncertainties ignored
            ([1.0, 1.0], SpatialCoreConfig(use_confidence=False), PERFECT_F2),
            # no uncertainties: no weighting
            (None, SpatialCoreConfig(), PERFECT_F2),
            # ablation without validity: every v = 1, R = 0.8 for both pairs
            (None, SpatialCoreConfig(use_validity=False), 0.8),
        ],
    )
    def test_confidence_and_validity(self, uncertainty, config, expected_spatial):
        result = score(
            spatialcore_completion([SEDAN, LIGHT], "A"), box_uncertainty=uncertainty, config=config
        )
        assert result.spatial == pytest.approx(expected_spatial)

    def test_answer_gate_ablation(self):
        completion = spatialcore_completion([SEDAN, LIGHT], "B")
        gated = score(completion)
        ungated = score(completion, config=SpatialCoreConfig(use_answer_gate=False))
        assert gated.gated_spatial == pytest.approx(0.3 * PERFECT_F2)
        assert ungated.gated_spatial == pytest.approx(PERFECT_F2)

    def test_missing_box_penalty_floor(self):
        many = [{"bbox_2d": [0, 0, 10 + i, 10], "label": f"thing {i}", "validity": 0.8} for i in range(5)]
        assert score(spatialcore_completion([], "A"), pseudo_gt=many).spatial == -1.0

    def test_truncated_grounding_switch(self):
        truncated = "\n".join([box_line(*SEDAN), "thinking"])
        neutral = score(truncated, config=SpatialCoreConfig(score_truncated_grounding=False))
        assert neutral.total == 0.0 and neutral.n_pred == 0

    def test_attempt_bonus_rules(self):
        # on-topic label, valid structure, pseudo-GT present -> bonus
        assert score(spatialcore_completion([(TREE[0], "sedan")], "A")).attempt_bonus == 0.05
        # stop words do not make a label on-topic
        assert score(spatialcore_completion([(TREE[0], "the thing")], "A")).attempt_bonus == 0.0
        # no bonus when the structure is broken
        assert score(spatialcore_completion([SEDAN], "A and B")).attempt_bonus == 0.0
        # no bonus without pseudo-GT
        assert score(spatialcore_completion([SEDAN], "A"), pseudo_gt=[]).attempt_bonus == 0.0

    def test_box_uncertainty_must_align(self):
        with pytest.raises(BoxAlignmentError):
            score(spatialcore_completion([SEDAN, LIGHT], "A"), box_uncertainty=[0.1])

    @pytest.mark.parametrize("gold", ["", "C", "Yes", None])
    def test_bad_gold_raises(self, gold):
        with pytest.raises(ValueError):
            score("r</think>A", answer=gold)

    def test_pseudo_gt_forms(self):
        as_json = '[{"bbox_2d": [100, 100, 300, 300], "label": "black sedan", "validity": 0.8}]'
        assert score(spatialcore_completion([SEDAN], "A"), pseudo_gt=as_json).n_pseudo_gt == 1
        messy = [
            {"bbox_2d": [1, 2, 3], "label": "short"},  # 3 numbers: skipped
            {"bbox_2d": [10, 10, 5, 5], "label": "inverted"},  # no area: skipped
            {"bbox_2d": [0, 0, 10, 10], "label": "nan", "validity": float("nan")},  # skipped
            {"bbox_2d": [0, 0, 10, 10], "label": "zero", "validity": 0.0},  # no weight: skipped
            {"bbox_2d": [0, 0, 10, 10], "label": "clipped", "validity": 3.0},  # clipped to 1
            "not a mapping",
            {"bbox_2d": "garbage", "label": "x"},
        ]
        reference = read_pseudo_gt(messy)
        assert reference.labels == ("clipped",) and reference.validities.tolist() == [1.0]
        assert len(read_pseudo_gt("{not json")) == 0 and len(read_pseudo_gt(None)) == 0

    def test_options_drawn_in_the_image(self):
        assert score("r</think>D", answer="D", options=[], pseudo_gt=[]).answer == 1.0

    def test_configuration_is_validated(self):
        with pytest.raises(ValueError):
            SpatialCoreConfig(answer_gate=1.5)
        with pytest.raises(ValueError):
            SpatialCoreConfig(iou_weight=-0.1)
        assert SpatialCoreConfig().total_range == (pytest.approx(-1.0), pytest.approx(2.05))


# ------------------------------------------------------------------------------------------------
# Independent oracle: Eq. 3-8 in plain Python with brute-force matching.
# ------------------------------------------------------------------------------------------------


def oracle_iou(a, b):
    iw = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def oracle_sim(a, b):
    import re

    wa, wb = set(re.findall(r"[a-z0-9]+", a.lower())), set(re.findall(r"[a-z0-9]+", b.lower()))
    return len(wa & wb) / math.sqrt(len(wa) * len(wb)) if wa and wb else 0.0


def oracle_spatial(preds, gts, uncertainties):
    if not gts:
        return 0.0, 0.0, 0.0
    v_sum = sum(v for _, _, v in gts)
    if not preds:
        return max(-1.0, -0.3 * v_sum), 0.0, 0.0
    pair = [
        [(0.8 * max(0.0, oracle_iou(pb, gb) - 0.25) + 0.2 * oracle_sim(pl, gl)) * v for gb, gl, v in gts]
        for pb, pl in preds
    ]
    omega = [1.0] * len(preds) if uncertainties is None else [0.1 + 0.9 * (1 - h) for h in uncertainties]
    n = min(len(preds), len(gts))
    best, best_assignment = -1.0, None
    for pred_rows in itertools.permutations(range(len(preds)), n):
        for gt_cols in itertools.permutations(range(len(gts)), n):
            total = sum(pair[r][c] for r, c in zip(pred_rows, gt_cols, strict=True))
            if total > best + 1e-12:
                best, best_assignment = total, list(zip(pred_rows, gt_cols, strict=True))
    precision = sum(omega[r] * pair[r][c] for r, c in best_assignment) / n
    recall = sum(max(pair[j][k] for j in range(len(preds))) for k in range(len(gts))) / v_sum
    spatial = f_alpha_score(precision, recall, 2.0) - 0.3 * (len(preds) - n)
    return max(-1.0, spatial), precision, recall


WORDS = ["red", "car", "black", "sedan", "light", "cup", "chair", "table"]


@st.composite
def box(draw):
    x1 = draw(st.integers(0, 990))
    y1 = draw(st.integers(0, 990))
    return [x1, y1, draw(st.integers(x1 + 1, 1000)), draw(st.integers(y1 + 1, 1000))]


label = st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True).map(" ".join)


class TestSpatialCoreOracle:
    @settings(max_examples=150, deadline=None, database=None)
    @given(
        preds=st.lists(st.tuples(box(), label), max_size=3),
        gts=st.lists(st.tuples(box(), label, st.sampled_from([0.35, 0.6, 0.8, 1.0])), max_size=3),
        uncertainty=st.one_of(st.none(), st.lists(st.floats(0, 1), min_size=3, max_size=3)),
    )
    def test_matches_oracle(self, preds, gts, uncertainty):
        completion = spatialcore_completion(preds, "A")
        pseudo_gt = [{"bbox_2d": b, "label": lab, "validity": v} for b, lab, v in gts]
        h = None if uncertainty is None else uncertainty[: len(preds)]
        result = score(completion, pseudo_gt=pseudo_gt, box_uncertainty=h)
        spatial, precision, recall = oracle_spatial(preds, gts, h)
        # the matched set can differ between equally good assignments only if omega differs; the
        # assignment total (uniform omega) and the recall never do
        assert result.recall == pytest.approx(recall, abs=1e-9)
        if h is None:
            assert result.precision == pytest.approx(precision, abs=1e-9)
            assert result.spatial == pytest.approx(spatial, abs=1e-9)
