"""DGE answer reward: letters, mean relative accuracy and unit conversion."""

from __future__ import annotations

import pytest

from training.rewards.dge import (
    UNITS,
    DgeConfig,
    convert,
    mean_relative_accuracy,
    parse_quantity,
    parse_unit,
    score_dge,
)


def numeric(answer_text: str, gold: float, unit: str | None, **kwargs):
    completion = f"<think>measuring</think><answer>{answer_text}</answer>"
    return score_dge(completion, answer=str(gold), options=[], numeric_answer=gold, unit=unit, **kwargs)


class TestDgeReward:
    @pytest.mark.parametrize(
        ("completion", "answer", "options", "expected_total"),
        [
            # right letter: 1 + 0.1 format
            ("<think>r</think><answer>B</answer>", "B", ["left", "right"], 1.1),
            # parenthesised letter
            ("<think>r</think><answer>(B)</answer>", "B", ["left", "right"], 1.1),
            # letter with option text
            ("<think>r</think><answer>B. right</answer>", "B", ["left", "right"], 1.1),
            # wrong letter: format only
            ("<think>r</think><answer>A</answer>", "B", ["left", "right"], 0.1),
            # letter beyond the options: no answer, no format
            ("<think>r</think><answer>C</answer>", "B", ["left", "right"], 0.0),
            # unclosed answer (truncated): nothing
            ("<think>r</think><answer>B", "B", ["left", "right"], 0.0),
            # a letter read from inside the text is never an answer
            ("<think>r</think><answer>a bit to the right</answer>", "A", ["a bit to the right", "left"], 0.0),
            # answer without reasoning block: answer counts, format does not
            ("<answer>B</answer>", "B", ["left", "right"], 1.0),
        ],
    )
    def test_multiple_choice(self, completion, answer, options, expected_total):
        assert score_dge(completion, answer=answer, options=options).total == pytest.approx(expected_total)

    @pytest.mark.parametrize(
        ("answer_text", "gold", "unit", "expected_accuracy"),
        [
            ("2.0", 2.0, "m", 1.0),  # exact, no unit: the row's unit
            ("2.0 m", 2.0, "m", 1.0),  # exact with unit
            ("200 cm", 2.0, "m", 1.0),  # converted to the row's unit
            ("2000mm", 2.0, "m", 1.0),  # no space before the unit
            ("2.1 m", 2.0, "m", 0.9),  # 5% error: passes thresholds 0.50..0.90
            ("2.5 m", 2.0, "m", 0.5),  # 25% error: passes 0.50..0.70
            ("3 m", 2.0, "m", 0.0),  # 50% error: fails all (strict <)
            ("6.56 ft", 2.0, "m", 1.0),  # feet: 1.9995 m
            ("6 ft 7 in", 2.0, "m", 1.0),  # feet and inches: 2.007 m
            ("20 sq m", 20.0, "m^2", 1.0),  # area
            ("215 ft^2", 20.0, "m^2", 1.0),  # square feet: 19.97 m^2
            ("20 m", 20.0, "m^2", 0.0),  # a length for an area: other dimension
            ("90 degrees", 90.0, "degrees", 1.0),  # angles
            ("1.5708 rad", 90.0, "degrees", 1.0),  # radians
            ("3", 3.0, None, 1.0),  # counts have no unit
            ("three", 3.0, None, 1.0),  # number words for counts
            ("about 3 chairs", 3.0, None, 1.0),  # words around the number
            ("1,250", 1250.0, None, 1.0),  # thousands separator
            ("no idea", 2.0, "m", 0.0),  # no number
            ("-2 m", 2.0, "m", 0.0),  # wrong sign
        ],
    )
    def test_numeric(self, answer_text, gold, unit, expected_accuracy):
        assert numeric(answer_text, gold, unit).accuracy == pytest.approx(expected_accuracy)

    def test_numeric_format_and_total(self):
        result = numeric("2.1 m", 2.0, "m")
        assert (result.kind, result.format, result.has_answer) == ("numeric", 1.0, True)
        assert result.predicted_value == pytest.approx(2.1)
        assert result.total == pytest.approx(0.9 + 0.1)

    def test_gold_value_from_answer_text_when_numeric_answer_missing(self):
        completion = "<think>r</think><answer>4</answer>"
        assert score_dge(completion, answer="4", options=None, numeric_answer=None, unit=None).accuracy == 1.0

    @pytest.mark.parametrize(
        ("answer", "options", "numeric_answer"),
        [("Z", ["a", "b"], None), (None, [], None), ("n/a", [], None), ("1", [], "not a number")],
    )
    def test_bad_rows_raise(self, answer, options, numeric_answer):
        with pytest.raises(ValueError):
            score_dge(
                "<think>r</think><answer>1</answer>",
                answer=answer,
                options=options,
                numeric_answer=numeric_answer,
                unit=None,
            )

    def test_weights(self):
        result = score_dge(
            "<think>r</think><answer>B</answer>",
            answer="B",
            options=["x", "y"],
            config=DgeConfig(format_weight=0.0),
        )
        assert result.total == 1.0
        with pytest.raises(ValueError):
            DgeConfig(answer_weight=-1.0)


class TestMeanRelativeAccuracy:
    @pytest.mark.parametrize(
        ("predicted", "target", "expected"),
        [
            (10.0, 10.0, 1.0),  # exact
            (10.4, 10.0, 1.0),  # 4% < 5%
            (10.5, 10.0, 0.9),  # 5% is not < 5%
            (14.9, 10.0, 0.1),  # 49%: only theta = 0.50
            (15.0, 10.0, 0.0),  # 50%: none
            (5.1, 10.0, 0.1),  # 49% below
            (0.0, 0.0, 1.0),  # zero target, exact
            (0.1, 0.0, 0.0),  # zero target, anything else
            (float("inf"), 1.0, 0.0),  # non-finite
        ],
    )
    def test_vsi_bench_rule(self, predicted, target, expected):
        assert mean_relative_accuracy(predicted, target) == pytest.approx(expected)

    def test_closer_is_never_worse(self):
        target = 3.7
        errors = [0.0, 0.01, 0.06, 0.12, 0.2, 0.33, 0.45, 0.49, 0.6, 2.0]
        scores = [mean_relative_accuracy(target * (1 + error), target) for error in errors]
        assert scores == sorted(scores, reverse=True)


class TestUnits:
    def test_parse_unit(self):
        assert parse_unit("m").name == "m"
        assert parse_unit("Square Meters").name == "m^2"
        assert parse_unit("°").dimension == "angle"
        assert parse_unit("parsecs") is None and parse_unit(None) is None

    def test_parse_quantity(self):
        assert parse_quantity("1.5e1 m") == (15.0, UNITS["m"])
        assert parse_quantity("x2.5") is None
        assert parse_quantity(None) is None

    def test_convert(self):
        assert convert(3.0, UNITS["ft"], UNITS["in"]) == pytest.approx(36.0)
        assert convert(3.0, None, UNITS["m"]) == 3.0
        assert convert(3.0, UNITS["deg"], UNITS["m"]) is None
