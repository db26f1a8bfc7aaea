"""Properties of every reward: total on any input, finite and in range, monotone where promised.

The slow test fuzzes at least 10^5 mutated completions through every parser and reward.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.rewards.builders import box_line, spatialcore_completion, spatialthinker_completion
from training.rewards.confidence import box_uncertainties
from training.rewards.dge import DgeConfig, score_dge
from training.rewards.geometry import pairwise_ciou, pairwise_iou
from training.rewards.parsing import parse_spatialcore, parse_spatialthinker, parse_think_answer
from training.rewards.spatialcore import SpatialCoreConfig, score_spatialcore
from training.rewards.spatialthinker import SpatialThinkerConfig, score_spatialthinker

SPATIALCORE_RANGE = SpatialCoreConfig().total_range
SPATIALTHINKER_RANGE = SpatialThinkerConfig().total_range
DGE_RANGE = DgeConfig().total_range
PSEUDO_GT = [
    {"bbox_2d": [100, 100, 300, 300], "label": "black sedan", "validity": 0.8},
    {"bbox_2d": [600, 100, 700, 400], "label": "traffic light", "validity": 0.6},
]
GT_SCENE = {
    "objects": [
        {"id": "mug.1", "bbox_2d": [100, 100, 200, 200]},
        {"id": "table.1", "bbox_2d": [0, 500, 1000, 1000]},
    ],
    "relationships": [{"subject": "mug.1", "predicate": "on", "object": "table.1"}],
}
FRAGMENTS = [
    "</think>",
    "<think>",
    "A",
    "B",
    "C",
    "(B)",
    " ",
    "\n",
    '{"bbox_2d": [',
    "]",
    ", ",
    '"label": "',
    '"}',
    "}",
    "100",
    "1000",
    "1001",
    "-5",
    "3.5",
    "9" * 40,
    "<observe>",
    "</observe>",
    "<scene>",
    "</scene>",
    "<answer>",
    "</answer>",
    '{"objects": [',
    '{"id": "cup.1", "bbox": [1, 2, 30, 40]}',
    '"relationships": []',
    "[" * 50,
    "1e999",
    "NaN",
    "\\",
    '"',
    "é",
    "\x00",
    "m",
    " cm",
    " sq ft",
    "°",
    "three",
    "black sedan",
    "traffic light",
]
TEMPLATES = [
    spatialcore_completion(
        [([100, 100, 300, 300], "black sedan"), ([600, 100, 700, 400], "traffic light")], "A"
    ),
    spatialcore_completion([([10, 10, 20, 20], "cup")], "B", reasoning="short"),
    spatialthinker_completion(
        [("mug.1", [64, 48, 128, 96]), ("table.1", [0, 240, 640, 480])],
        [("mug.1", "on", "table.1")],
        "(A) left",
    ),
    "<think>measure</think><answer>2.5 m</answer>",
    "<think>pick</think><answer>B</answer>",
]


def score_everything(text: str, rng: random.Random | None = None) -> None:
    """Run every parser and reward on ``text`` and check the documented ranges."""
    parse_spatialcore(text)
    parse_spatialthinker(text)
    parse_think_answer(text)
    core = score_spatialcore(
        text, answer="A", options=["Yes", "No"], question="Is the black sedan left?", pseudo_gt=PSEUDO_GT
    )
    assert (
        math.isfinite(core.total) and SPATIALCORE_RANGE[0] - 1e-9 <= core.total <= SPATIALCORE_RANGE[1] + 1e-9
    )
    assert 0.0 <= core.format <= 1.0 and core.answer in (0.0, 1.0)
    thinker = score_spatialthinker(
        text, answer_option_text="(A) left", gt_scene=GT_SCENE, image_size=(640, 480)
    )
    assert (
        math.isfinite(thinker.total)
        and SPATIALTHINKER_RANGE[0] <= thinker.total <= SPATIALTHINKER_RANGE[1] + 1e-9
    )
    for row in (
        {"answer": "B", "options": ["x", "y"]},
        {"answer": "2.5", "options": [], "numeric_answer": 2.5, "unit": "m"},
    ):
        dge = score_dge(text, **row)
        assert math.isfinite(dge.total) and DGE_RANGE[0] <= dge.total <= DGE_RANGE[1] + 1e-9
    if rng is not None:
        cut_points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 40))))
        tokens = [text[a:b] for a, b in zip([0, *cut_points], [*cut_points, len(text)], strict=True) if b > a]
        entropies = [rng.choice([float("nan"), float("inf"), -1.0, 0.0, rng.uniform(0, 20)]) for _ in tokens]
        uncertainties = box_uncertainties(tokens, entropies)
        assert len(uncertainties) == len(parse_spatialcore("".join(tokens)).grounding_boxes)
        assert all(0.0 <= value <= 1.0 for value in uncertainties)
        with_confidence = score_spatialcore(
            "".join(tokens),
            answer="A",
            options=["Yes", "No"],
            question="q",
            pseudo_gt=PSEUDO_GT,
            box_uncertainty=uncertainties,
        )
        assert SPATIALCORE_RANGE[0] - 1e-9 <= with_confidence.total <= SPATIALCORE_RANGE[1] + 1e-9


def mutate(text: str, rng: random.Random) -> str:
    """Apply 1-4 random edits: insert a fragment, delete, duplicate or swap a slice, truncate, garble."""
    for _ in range(rng.randint(1, 4)):
        position = rng.randint(0, len(text))
        other = rng.randint(0, len(text))
        low, high = min(position, other), max(position, other)
        operation = rng.randrange(6)
        if operation == 0:
            text = text[:position] + rng.choice(FRAGMENTS) + text[position:]
        elif operation == 1:
            text = text[:low] + text[high:]
        elif operation == 2:
            text = text[:high] + text[low:high] + text[high:]
        elif operation == 3:
            text = text[:position]
        elif operation == 4:
            middle = rng.randint(low, high)
            text = text[:low] + text[middle:high] + text[low:middle] + text[high:]
        else:
            text = text[:position] + chr(rng.randrange(32, 0x2FFF)) + text[position + 1 :]
    return text


class TestNoInputCrashes:
    @settings(max_examples=300, deadline=None, database=None)
    @given(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=30).map("".join))
    def test_structured_garbage(self, text):
        score_everything(text)

    @settings(max_examples=100, deadline=None, database=None)
    @given(st.text(max_size=300))
    def test_arbitrary_text(self, text):
        score_everything(text)

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.integers(min_value=0, max_value=2**32 - 1), st.sampled_from(TEMPLATES))
    def test_mutated_templates(self, seed, template):
        rng = random.Random(seed)
        for _ in range(10):
            score_everything(mutate(template, rng), rng)

    @pytest.mark.parametrize(
        "completion",
        [
            None,
            17,
            [{"role": "assistant", "content": None}],
            [{"nope": 1}],
            b"bytes",
            "x" * 200_000,
            "{" * 50_000 + "</think>A",
            "1" * 100_000,
            '{"bbox_2d": [' * 10_000,
        ],
    )
    def test_odd_objects_and_huge_inputs(self, completion):
        score_everything(completion if isinstance(completion, str) else "")
        for scorer in (
            lambda c: score_spatialcore(c, answer="A", options=["a", "b"], question=None, pseudo_gt=None),
            lambda c: score_spatialthinker(c, answer_option_text="(A) a", gt_scene=None, image_size=(10, 10)),
            lambda c: score_dge(c, answer="A", options=["a", "b"]),
        ):
            assert math.isfinite(scorer(completion).total)


coordinate = st.integers(0, 1000)


@st.composite
def grid_box(draw):
    x1, x2 = sorted(draw(st.lists(coordinate, min_size=2, max_size=2, unique=True)))
    y1, y2 = sorted(draw(st.lists(coordinate, min_size=2, max_size=2, unique=True)))
    return [x1, y1, x2, y2]


labels = st.sampled_from(["black sedan", "sedan", "traffic light", "cup", "red cup", "tree"])


class TestMonotonicity:
    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.filter_too_much]
    )
    @given(
        gts=st.lists(st.tuples(grid_box(), labels, st.sampled_from([0.4, 0.7, 1.0])), min_size=1, max_size=2),
        others=st.lists(st.tuples(grid_box(), labels), max_size=2),
        label=labels,
        worse=grid_box(),
        better=st.one_of(grid_box(), st.just(None)),
        answer=st.sampled_from(["A", "B"]),
        uniform_uncertainty=st.one_of(st.none(), st.floats(0, 1)),
    )
    def test_better_box_never_lowers_spatialcore(
        self, gts, others, label, worse, better, answer, uniform_uncertainty
    ):
        better = gts[0][0] if better is None else better
        gt_boxes = [gt[0] for gt in gts]
        assume(np.all(pairwise_iou([better], gt_boxes) >= pairwise_iou([worse], gt_boxes)))
        assume(all(box != candidate for box, _ in others for candidate in (worse, better)))
        pseudo_gt = [{"bbox_2d": b, "label": lab, "validity": v} for b, lab, v in gts]
        totals = []
        for candidate in (worse, better):
            boxes = [*others, (candidate, label)]
            uncertainty = None if uniform_uncertainty is None else [uniform_uncertainty] * len(boxes)
            totals.append(
                score_spatialcore(
                    spatialcore_completion(boxes, answer),
                    answer="A",
                    options=["x", "y"],
                    question="sedan light cup tree",
                    pseudo_gt=pseudo_gt,
                    box_uncertainty=uncertainty,
                ).total
            )
        assert totals[1] >= totals[0] - 1e-12

    @settings(max_examples=150, deadline=None, database=None)
    @given(
        gts=st.lists(st.tuples(grid_box(), labels, st.sampled_from([0.4, 0.7, 1.0])), min_size=1, max_size=3),
        preds=st.lists(st.tuples(grid_box(), labels), min_size=1, max_size=3),
        uncertainties=st.lists(st.floats(0, 1), min_size=3, max_size=3),
        index=st.integers(0, 2),
        drop=st.floats(0, 1),
        answer=st.sampled_from(["A", "B"]),
    )
    def test_lower_uncertainty_never_lowers_spatialcore(self, gts, preds, uncertainties, index, drop, answer):
        pseudo_gt = [{"bbox_2d": b, "label": lab, "validity": v} for b, lab, v in gts]
        completion = spatialcore_completion(preds, answer)
        n_boxes = len(parse_spatialcore(completion).grounding_boxes)
        high = uncertainties[:n_boxes]
        low = list(high)
        if n_boxes:
            low[index % n_boxes] = max(0.0, low[index % n_boxes] - drop)
        totals = [
            score_spatialcore(
                completion,
                answer="A",
                options=["x", "y"],
                question="q",
                pseudo_gt=pseudo_gt,
                box_uncertainty=values,
            ).total
            for values in (high, low)
        ]
        assert totals[1] >= totals[0] - 1e-12

    @settings(
        max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.filter_too_much]
    )
    @given(
        gt_boxes=st.lists(grid_box(), min_size=1, max_size=2),
        other_boxes=st.lists(grid_box(), max_size=2),
        worse=grid_box(),
        better=st.one_of(grid_box(), st.just(None)),
    )
    def test_better_box_never_lowers_spatialthinker(self, gt_boxes, other_boxes, worse, better):
        # same label everywhere, so the matching cost is the box term only; image 1000 x 1000 (grid = pixels)
        better = gt_boxes[0] if better is None else better
        assume(np.all(pairwise_ciou([better], gt_boxes) >= pairwise_ciou([worse], gt_boxes)))
        gt_scene = {
            "objects": [{"id": f"cup.{i}", "bbox_2d": b} for i, b in enumerate(gt_boxes)],
            "relationships": [],
        }
        totals = []
        for candidate in (worse, better):
            objects = [(f"cup.{10 + i}", b) for i, b in enumerate([*other_boxes, candidate])]
            totals.append(
                score_spatialthinker(
                    spatialthinker_completion(objects, [], "(A) yes"),
                    answer_option_text="(A) yes",
                    gt_scene=gt_scene,
                    image_size=(1000, 1000),
                ).total
            )
        assert totals[1] >= totals[0] - 1e-12


class TestUncertaintyAlignment:
    @settings(max_examples=150, deadline=None, database=None)
    @given(
        boxes=st.lists(
            st.tuples(st.one_of(grid_box(), st.lists(coordinate, min_size=4, max_size=4)), labels), max_size=4
        ),
        after=st.lists(st.tuples(grid_box(), labels), max_size=2),
        per_box=st.lists(st.floats(0, 5), min_size=6, max_size=6),
        seed=st.integers(0, 2**32 - 1),
    )
    def test_token_boundaries_outside_digits_do_not_matter(self, boxes, after, per_box, seed):
        text = "\n".join(box_line(b, lab) for b, lab in boxes) + "\nreasoning</think>A\n"
        text += "\n".join(box_line(b, lab) for b, lab in after)
        parse = parse_spatialcore(text)
        digit_value = {}
        for box, value in zip(parse.boxes, per_box, strict=False):
            for start, end in box.coord_spans:
                for position in range(start, end):
                    digit_value[position] = value
        rng = random.Random(seed)
        # one token per digit; non-digit text cut at random places, with junk entropies
        tokens, entropies, position = [], [], 0
        while position < len(text):
            if text[position].isdigit():
                length = 1
            else:
                length = 1
                while (
                    position + length < len(text)
                    and not text[position + length].isdigit()
                    and rng.random() < 0.7
                ):
                    length += 1
            tokens.append(text[position : position + length])
            entropies.append(digit_value.get(position, rng.choice([float("nan"), 99.0, -3.0])))
            position += length
        char_entropies = [digit_value.get(i, float("nan")) for i in range(len(text))]
        expected = box_uncertainties(list(text), char_entropies)
        assert box_uncertainties(tokens, entropies) == pytest.approx(expected)
        assert len(expected) == len(parse.grounding_boxes)


@pytest.mark.slow
class TestFuzz:
    COMPLETIONS_PER_EXAMPLE = 100
    EXAMPLES = 1000  # 1000 x 100 = 10^5 mutated completions

    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.integers(min_value=0, max_value=2**63 - 1), st.sampled_from(TEMPLATES))
    def test_hundred_thousand_mutated_completions(self, seed, template):
        rng = random.Random(seed)
        text = template
        for step in range(self.COMPLETIONS_PER_EXAMPLE):
            # chains of mutations drift far from the template; restart now and then
            text = mutate(template if step % 10 == 0 else text, rng)
            score_everything(text, rng if step % 5 == 0 else None)
