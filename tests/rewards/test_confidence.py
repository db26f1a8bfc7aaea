"""Coordinate-token uncertainty (Eq. 5), its alignment with the scored boxes, and omega (Eq. 6)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.rewards.builders import LN10, box_line, char_tokens
from training.rewards.confidence import box_uncertainties, confidence_weights
from training.rewards.parsing import parse_spatialcore

NAN = float("nan")


def entropies_by_box(text: str, per_box: list[float], default: float = NAN) -> list[float]:
    """Per-character entropies: each box entry's digit characters get that box's value."""
    values = [default] * len(text)
    parse = parse_spatialcore(text)
    for box, value in zip(parse.boxes, per_box, strict=True):
        for start, end in box.coord_spans:
            for position in range(start, end):
                values[position] = value
    return values


class TestBoxUncertainties:
    def test_equation_5_per_coordinate_mean(self):
        # Coordinates "10", "20", "300", "450": digit entropies (nats) averaged per coordinate, then over
        # the 4 coordinates, divided by ln 10.
        text = box_line([10, 20, 300, 450], "cup") + "\nr</think>A"
        tokens = char_tokens(text)
        values = [NAN] * len(tokens)
        digit_values = {"10": [1.0, 0.0], "20": [0.3, 0.3], "300": [2.0, 2.0, 2.0], "450": [0.0, 0.4, 0.2]}
        for (start, end), coordinate in zip(
            parse_spatialcore(text).boxes[0].coord_spans, digit_values, strict=True
        ):
            assert text[start:end] == coordinate
            for position, value in zip(range(start, end), digit_values[coordinate], strict=True):
                values[position] = value
        expected = (0.5 + 0.3 + 2.0 + 0.2) / 4 / LN10  # = 0.3257
        assert box_uncertainties(tokens, values) == [pytest.approx(expected)]

    def test_clipped_to_unit_interval(self):
        text = box_line([1, 2, 3, 4], "cup") + "\n" + box_line([5, 6, 7, 8], "mug") + "\nr</think>A"
        values = entropies_by_box(text, [5.0 * LN10, -1.0])
        assert box_uncertainties(char_tokens(text), values) == [1.0, 0.0]

    def test_only_valid_reasoning_boxes_in_order(self):
        # valid, invalid (no area), valid, then a box after </think>: two values, for boxes 1 and 3.
        text = (
            box_line([1, 2, 3, 4], "cup")
            + "\n"
            + box_line([9, 9, 3, 4], "broken")
            + "\n"
            + box_line([5, 6, 7, 8], "mug")
            + "\nreasoning</think>A\n"
            + box_line([10, 20, 30, 40], "late")
        )
        values = entropies_by_box(text, [0.0, LN10, 0.5 * LN10, LN10])
        assert box_uncertainties(char_tokens(text), values) == [pytest.approx(0.0), pytest.approx(0.5)]

    def test_boxes_after_think_never_shift_alignment(self):
        before = box_line([1, 2, 3, 4], "cup") + "\n" + box_line([5, 6, 7, 8], "mug") + "\nr</think>A"
        after = before + "\n" + box_line([10, 20, 30, 40], "late")
        for text in (before, after):
            values = entropies_by_box(
                text, [0.2 * LN10, 0.7 * LN10, 0.0][: len(parse_spatialcore(text).boxes)]
            )
            assert box_uncertainties(char_tokens(text), values) == [pytest.approx(0.2), pytest.approx(0.7)]

    def test_multi_character_tokens(self):
        # A token holding a comma and a digit still counts as a digit token of that coordinate.
        tokens = [
            '{"bbox_2d": [',
            "1",
            "2",
            ", 3",
            "4",
            ", ",
            "5",
            "6",
            ", ",
            "7",
            "8",
            '], "label": "cup"}',
            "</think>",
            "B",
        ]
        values = [NAN, 0.0, 0.0, LN10, LN10, NAN, 0.0, 0.0, NAN, 0.0, 0.0, NAN, NAN, NAN]
        assert box_uncertainties(tokens, values) == [pytest.approx(0.25)]

    def test_missing_coordinate_entropy_gives_full_uncertainty(self):
        text = box_line([1, 2, 3, 4], "cup") + "\nr</think>A"
        assert box_uncertainties(char_tokens(text), [NAN] * len(text)) == [1.0]

    def test_truncated_completion_keeps_its_boxes(self):
        text = box_line([1, 2, 3, 4], "cup") + "\nreasoning that never ends"
        values = entropies_by_box(text, [0.5 * LN10])
        assert box_uncertainties(char_tokens(text), values) == [pytest.approx(0.5)]

    def test_no_boxes_and_errors(self):
        assert box_uncertainties([], []) == []
        assert box_uncertainties(["plain</think>A"], [0.3]) == []
        with pytest.raises(ValueError):
            box_uncertainties(["a", "b"], [0.1])

    def test_accepts_arrays(self):
        text = box_line([1, 2, 3, 4], "cup") + "\nr</think>A"
        values = np.asarray(entropies_by_box(text, [0.0]), dtype=np.float32)
        assert box_uncertainties(char_tokens(text), values) == [0.0]


class TestConfidenceWeights:
    @pytest.mark.parametrize(
        ("uncertainty", "floor", "expected"),
        [
            (0.0, 0.1, 1.0),  # certain box: full weight
            (1.0, 0.1, 0.1),  # maximally uncertain: the floor beta
            (0.5, 0.1, 0.55),  # beta + (1 - beta) * 0.5
            (math.nan, 0.1, 0.1),  # unknown counts as uncertain
            (2.0, 0.1, 0.1),  # clipped
        ],
    )
    def test_equation_6(self, uncertainty, floor, expected):
        assert confidence_weights([uncertainty], floor)[0] == pytest.approx(expected)
