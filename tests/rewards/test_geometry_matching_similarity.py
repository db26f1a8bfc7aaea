"""Box overlaps, Hungarian assignment and label similarity."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.rewards.builders import scalar_ciou
from training.rewards.geometry import as_boxes, pairwise_ciou, pairwise_giou, pairwise_iou
from training.rewards.matching import hungarian_max, hungarian_min
from training.rewards.similarity import LabelSimilarity, bag_of_words_cosine, singular

coordinate = st.integers(min_value=0, max_value=1000)


@st.composite
def grid_boxes(draw):
    x1, x2 = sorted(draw(st.lists(coordinate, min_size=2, max_size=2, unique=True)))
    y1, y2 = sorted(draw(st.lists(coordinate, min_size=2, max_size=2, unique=True)))
    return [x1, y1, x2, y2]


class TestGeometry:
    @pytest.mark.parametrize(
        ("a", "b", "iou", "giou"),
        [
            ([0, 0, 10, 10], [0, 0, 10, 10], 1.0, 1.0),  # identical
            ([0, 0, 10, 10], [5, 0, 15, 10], 1 / 3, 1 / 3),  # half overlap, enclosing box = union
            ([0, 0, 1, 1], [2, 0, 3, 1], 0.0, -1 / 3),  # disjoint: GIoU penalises the gap
            ([0, 0, 10, 10], [2, 2, 4, 4], 0.04, 0.04),  # nested
            ([0, 0, 0, 0], [0, 0, 0, 0], 0.0, 0.0),  # degenerate boxes stay finite
        ],
    )
    def test_known_values(self, a, b, iou, giou):
        assert pairwise_iou([a], [b])[0, 0] == pytest.approx(iou)
        assert pairwise_giou([a], [b])[0, 0] == pytest.approx(giou)

    def test_shapes_and_empty(self):
        assert pairwise_iou([], [[0, 0, 1, 1]]).shape == (0, 1)
        assert pairwise_ciou([[0, 0, 1, 1]] * 3, [[0, 0, 1, 1]] * 2).shape == (3, 2)
        assert as_boxes([]).shape == (0, 4)

    @settings(max_examples=200, deadline=None, database=None)
    @given(st.lists(grid_boxes(), min_size=1, max_size=4), st.lists(grid_boxes(), min_size=1, max_size=4))
    def test_vectorised_matches_scalar(self, boxes_a, boxes_b):
        iou = pairwise_iou(boxes_a, boxes_b)
        giou = pairwise_giou(boxes_a, boxes_b)
        ciou = pairwise_ciou(boxes_a, boxes_b)
        for i, j in itertools.product(range(len(boxes_a)), range(len(boxes_b))):
            assert ciou[i, j] == pytest.approx(scalar_ciou(boxes_a[i], boxes_b[j]), abs=1e-9)
        assert np.all((iou >= 0) & (iou <= 1))
        assert np.all((giou >= -1 - 1e-12) & (giou <= iou + 1e-12))
        assert np.all((ciou > -1.5) & (ciou <= iou + 1e-12))
        np.testing.assert_allclose(iou, pairwise_iou(boxes_b, boxes_a).T)


class TestMatching:
    @settings(max_examples=150, deadline=None, database=None)
    @given(
        st.integers(min_value=1, max_value=4),
        st.integers(min_value=1, max_value=4),
        st.lists(st.floats(min_value=0, max_value=1), min_size=16, max_size=16),
    )
    def test_maximum_equals_brute_force(self, n_rows, n_cols, values):
        score = np.array(values[: n_rows * n_cols]).reshape(n_rows, n_cols)
        rows, cols = hungarian_max(score)
        assert len(rows) == min(n_rows, n_cols)
        assert len(set(rows.tolist())) == len(rows) and len(set(cols.tolist())) == len(cols)
        if n_rows <= n_cols:
            candidates = (
                sum(score[r, c] for r, c in enumerate(perm))
                for perm in itertools.permutations(range(n_cols), n_rows)
            )
        else:
            candidates = (
                sum(score[r, c] for c, r in enumerate(perm))
                for perm in itertools.permutations(range(n_rows), n_cols)
            )
        best = max(candidates)
        assert score[rows, cols].sum() == pytest.approx(best)

    def test_empty_and_invalid(self):
        assert [len(x) for x in hungarian_max(np.zeros((0, 3)))] == [0, 0]
        assert [len(x) for x in hungarian_min([])] == [0, 0]
        with pytest.raises(ValueError):
            hungarian_max([[np.nan, 1.0]])

    def test_minimum(self):
        rows, cols = hungarian_min([[5.0, 1.0], [1.0, 5.0]])
        assert list(zip(rows.tolist(), cols.tolist(), strict=True)) == [(0, 1), (1, 0)]


class TestLabelSimilarity:
    @pytest.mark.parametrize(
        ("a", "b", "expected"),
        [
            ("black sedan ahead", "black sedan", 2 / math.sqrt(6)),  # the paper's example (A.4)
            ("traffic sign", "traffic light", 0.5),  # shares only "traffic"
            ("Black Sedan", "black sedan", 1.0),  # case is ignored
            ("red red car", "red car", 1.0),  # binary word presence (Eq. 13), not counts
            ("cup", "", 0.0),  # empty label
            ("cup", None, 0.0),  # not a string
            ("chairs", "chair", 0.0),  # exact words by default
        ],
    )
    def test_exact_words(self, a, b, expected):
        assert LabelSimilarity()(a, b) == pytest.approx(expected)

    def test_singular_and_suffix(self):
        similarity = LabelSimilarity(word_normalizer="singular", strip_instance_suffix=True)
        assert similarity("chairs.2", "chair.1") == 1.0
        assert similarity("traffic_light.1", "traffic-light.4") == 1.0
        assert singular("boxes") == "box" and singular("bus") == "bus"

    def test_matrix(self):
        matrix = LabelSimilarity().matrix(["cup", "red cup"], ["cup", "plate"])
        np.testing.assert_allclose(matrix, [[1.0, 0.0], [1 / math.sqrt(2), 0.0]])
        assert LabelSimilarity().matrix([], ["cup"]).shape == (0, 1)

    def test_bag_of_words_cosine(self):
        assert bag_of_words_cosine(frozenset(), frozenset({"a"})) == 0.0

    def test_spacy_lemmas_from_a_local_pipeline(self, tmp_path):
        import spacy

        nlp = spacy.blank("en")
        ruler = nlp.add_pipe("attribute_ruler")
        ruler.add([[{"LOWER": "chairs"}]], {"LEMMA": "chair"})
        nlp.to_disk(tmp_path / "pipeline")
        similarity = LabelSimilarity(spacy_pipeline=str(tmp_path / "pipeline"))
        assert similarity("two chairs", "two chair") == 1.0
        assert similarity("cars", "car") == 0.0  # no lemma rule: the word itself

    def test_configuration_errors(self, tmp_path):
        with pytest.raises(ValueError, match="word_normalizer"):
            LabelSimilarity(word_normalizer="stem")
        with pytest.raises(ValueError, match="cannot be loaded"):
            LabelSimilarity(spacy_pipeline=str(tmp_path / "missing"))
