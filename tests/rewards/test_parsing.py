"""Completion parsing: the SpatialCORE, SpatialThinker and think-answer grammars."""

from __future__ import annotations

import pytest

from tests.rewards.builders import box_line, spatialcore_completion, spatialthinker_completion
from training.rewards.parsing import (
    allowed_letters,
    completion_text,
    gold_option_letter,
    parse_option_letter,
    parse_scene_json,
    parse_spatialcore,
    parse_spatialthinker,
    parse_think_answer,
    scene_object_name,
)


class TestCompletionText:
    @pytest.mark.parametrize(
        ("completion", "expected"),
        [
            ("plain", "plain"),  # plain string
            ([{"role": "assistant", "content": "chat"}], "chat"),  # TRL conversational form
            (
                [
                    {
                        "role": "assistant",
                        "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                    }
                ],
                "ab",
            ),
            ({"role": "assistant", "content": "one message"}, "one message"),  # a bare message dict
            (None, ""),  # nothing
            (42, ""),  # not text
            ([{"role": "assistant"}], ""),  # message without content
        ],
    )
    def test_cases(self, completion, expected):
        assert completion_text(completion) == expected


class TestOptionLetters:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("B", "B"),  # bare letter
            ("  C \n", "C"),  # surrounding whitespace
            ("(D)", "D"),  # parenthesised
            ("B.", "B"),  # trailing period
            ("B. Go a bit right", "B"),  # letter then option text: the letter is the leading token
            ("(B) red car", "B"),  # SpatialThinker style
            ("a bit", None),  # never read a letter from inside text (the reference read "A" here)
            ("b", None),  # lower case is not an answer letter
            ("A or B", None),  # two candidates
            ("The answer is B", None),  # prose
            ("", None),  # empty
            (None, None),  # missing
            ("AB", None),  # two letters
        ],
    )
    def test_parse_option_letter(self, text, expected):
        assert parse_option_letter(text) == expected

    @pytest.mark.parametrize(
        ("answer", "n_options", "expected"),
        [
            ("B", 4, "B"),  # the gold letter column
            ("b", 4, "B"),  # lower-case gold letter
            (
                "B. Go a bit right",
                4,
                "B",
            ),  # a formatted gold cell is read from its first token, never "A" of "a bit"
            ("(C) blue", 3, "C"),  # parenthesised gold
            ("D", 0, "D"),  # options drawn in the image: A-D
        ],
    )
    def test_gold_option_letter(self, answer, n_options, expected):
        assert gold_option_letter(answer, n_options) == expected

    @pytest.mark.parametrize(
        ("answer", "n_options"), [("E", 4), ("C", 2), ("", 4), (None, 4), ("left", 4), (2, 4)]
    )
    def test_gold_option_letter_rejects(self, answer, n_options):
        with pytest.raises(ValueError):
            gold_option_letter(answer, n_options)

    def test_allowed_letters(self):
        assert allowed_letters(2) == "AB"
        assert allowed_letters(0) == "ABCD"


class TestParseSpatialCore:
    def test_well_formed(self):
        text = spatialcore_completion(
            [([10, 20, 30, 40], "black sedan"), ([50, 60, 70, 80], "traffic light")], answer="B"
        )
        parse = parse_spatialcore(text)
        assert parse.has_valid_structure
        assert parse.answer_letter == "B"
        assert [box.label for box in parse.grounding_boxes] == ["black sedan", "traffic light"]
        assert parse.grounding_boxes[0].coords == (10, 20, 30, 40)
        assert parse.problems == ()
        first = parse.grounding_boxes[0]
        assert [text[start:end] for start, end in first.coord_spans] == ["10", "20", "30", "40"]

    @pytest.mark.parametrize(
        ("text", "truncated", "answer", "single"),
        [
            ("reasoning without end", True, None, False),  # truncated: no </think>, no answer
            ("r</think>A", False, "A", True),  # minimal
            ("<think>r</think>A", False, "A", True),  # a leading <think> is tolerated
            ("r</think>A</think>B", False, None, False),  # two </think>: no answer
            ("r</think>", False, None, False),  # nothing after </think>
            ("r</think>\n\n C \n", False, "C", True),  # whitespace around the letter
            ("r</think>C. option text", False, None, False),  # letter with option text: no single answer
            ("r</think>c", False, "C", True),  # either case, upper-cased
            ("r</think>The answer is C", False, None, False),  # prose after </think>
        ],
    )
    def test_answer_cases(self, text, truncated, answer, single):
        parse = parse_spatialcore(text)
        assert parse.truncated is truncated
        assert parse.answer_letter == answer
        assert parse.answer_is_single_letter is single

    def test_stray_think_open_breaks_structure(self):
        parse = parse_spatialcore("r <think> more</think>A")
        assert parse.stray_think_open
        assert not parse.has_valid_structure

    def test_boxes_after_think_are_not_grounding(self):
        text = box_line([1, 2, 3, 4], "cup") + "\nr</think>A\n" + box_line([5, 6, 7, 8], "mug")
        parse = parse_spatialcore(text)
        assert [box.label for box in parse.grounding_boxes] == ["cup"]
        assert parse.boxes_after_reasoning == 1
        assert not parse.boxes[1].in_reasoning

    @pytest.mark.parametrize(
        ("entry", "problem_fragment"),
        [
            ('{"bbox_2d": [10, 20, 5, 40], "label": "cup"}', "no area"),  # x2 <= x1
            ('{"bbox_2d": [10, 20, 30, 1001], "label": "cup"}', "0..1000"),  # off the grid
            ('{"bbox_2d": [10, 20, 30], "label": "cup"}', "3 coordinates"),  # three numbers
            ('{"bbox_2d": [10.5, 20, 30, 40], "label": "cup"}', "integer"),  # not an integer
            ('{"bbox_2d": [-10, 20, 30, 40], "label": "cup"}', "integer"),  # negative
            ('{"bbox_2d": [10, 20, 30, 40], "label": "!!"}', "no words"),  # empty label
            ('{"bbox_2d": [1, 2, 3, 9999999999999999999999], "label": "cup"}', "0..1000"),  # huge number
        ],
    )
    def test_invalid_boxes(self, entry, problem_fragment):
        parse = parse_spatialcore(entry + "\nr</think>A")
        assert len(parse.boxes) == 1
        assert not parse.boxes[0].is_valid
        assert problem_fragment in parse.boxes[0].problem
        assert parse.grounding_boxes == ()

    def test_malformed_entries_are_counted(self):
        text = '{"bbox_2d": [1, 2, 3, 4] "label": "cup"}\n{"label": "x", "bbox_2d": [1, 2, 3, 4]}\nr</think>A'
        parse = parse_spatialcore(text)
        assert parse.malformed_box_entries == 2
        assert parse.grounding_boxes == ()

    def test_escaped_label(self):
        parse = parse_spatialcore('{"bbox_2d": [1, 2, 3, 4], "label": "the \\"big\\" cup"}\nr</think>A')
        assert parse.grounding_boxes[0].label == 'the "big" cup'

    def test_label_containing_think_close(self):
        text = '{"bbox_2d": [1, 2, 3, 4], "label": "x</think>B"}\nr</think>A'
        parse = parse_spatialcore(text)
        assert parse.n_think_close == 2
        assert parse.answer_letter is None
        assert parse.grounding_boxes == ()  # the entry crosses the end of the reasoning segment


class TestParseSpatialThinker:
    def test_well_formed(self):
        text = spatialthinker_completion(
            objects=[("traffic light.1", [10, 20, 30, 40]), ("car.2", [50, 60, 90, 100])],
            relations=[("car.2", "left of", "traffic light.1")],
            answer="(B) red car",
        )
        parse = parse_spatialthinker(text)
        assert parse.format_ok
        assert parse.answer_text == "(B) red car"
        assert [obj.name for obj in parse.objects] == ["traffic light", "car"]
        assert parse.relations[0].predicate == "left of"

    @pytest.mark.parametrize(
        ("mutation", "tags_ok", "has_answer"),
        [
            (lambda t: t.replace("<observe>", "", 1), False, True),  # missing tag
            (lambda t: t + "<think>again</think>", False, True),  # repeated tags
            (lambda t: t.replace("</answer>", ""), False, False),  # unclosed answer: no answer
            (
                lambda t: t.split("<think>")[0] + "<answer>(A) left</answer><think>x</think>",
                False,
                True,
            ),  # order
            (lambda t: t + "<answer>(B) two</answer>", False, False),  # two answers: none
        ],
    )
    def test_tag_rules(self, mutation, tags_ok, has_answer):
        parse = parse_spatialthinker(mutation(spatialthinker_completion(objects=[("cup.1", [1, 2, 3, 4])])))
        assert parse.tags_ok is tags_ok
        assert (parse.answer_text is not None) is has_answer
        assert not parse.format_ok

    @pytest.mark.parametrize(
        "scene",
        [
            "not json",  # not JSON
            "[1, 2]",  # not an object
            '{"objects": {"id": "cup.1"}}',  # objects not a list
            '{"objects": [{"id": "cup", "bbox": [1, 2, 3, 4]}]}',  # id without .N
            '{"objects": [{"id": "cup.1", "bbox": [1, 2, 3]}]}',  # 3 numbers
            '{"objects": [{"id": "cup.1", "bbox": [1, 2, 3, 4], "extra": 1}]}',  # extra key
            '{"objects": [{"id": "cup.1", "bbox": [5, 2, 3, 4]}]}',  # no area
            '{"objects": [{"id": "cup.1", "bbox": [true, 2, 3, 4]}]}',  # boolean coordinate
            '{"objects": [{"id": "cup.1", "bbox": [1, 2, 3, 4]}, {"id": "cup.1", "bbox": [1, 2, 3, 4]}]}',  # repeat
            '{"objects": [], "relationships": [{"subject": "a.1", "predicate": "on"}]}',  # incomplete relation
            '{"objects": [], "relationships": [{"subject": "a", "predicate": "on", "object": "b.1"}]}',  # bad id
            "[" * 100000,  # deep nesting must not crash
            '{"objects": [{"id": "cup.1", "bbox": [1e999, 2, 3, 4]}]}',  # infinite number
        ],
    )
    def test_invalid_scenes(self, scene):
        objects, relations, problems = parse_scene_json(scene)
        assert problems
        assert objects == () and relations == ()

    def test_multi_word_ids(self):
        assert scene_object_name("traffic light.1") == "traffic light"
        assert scene_object_name("t-shirt.12") == "t-shirt"
        objects, _, problems = parse_scene_json('{"objects": [{"id": "man\'s hat.3", "bbox": [1, 2, 3, 4]}]}')
        assert problems == [] and objects[0].name == "man's hat"


class TestParseThinkAnswer:
    @pytest.mark.parametrize(
        ("text", "format_ok", "answer"),
        [
            ("<think>r</think><answer>3 m</answer>", True, "3 m"),  # canonical
            ("r</think>\n<answer>B</answer>\n", True, "B"),  # <think> opened by the template
            ("<think>r</think><answer>3 m", False, None),  # unclosed answer: no answer
            ("<think>r<answer>3</answer></think>", False, None),  # answer inside the reasoning
            ("<answer>3</answer>", False, "3"),  # no reasoning: answer read, format fails
            ("<think>r</think><answer>1</answer><answer>2</answer>", False, None),  # two answers
            ("<think>r</think>so<answer>3</answer>", False, "3"),  # text between blocks
            ("<think>r</think><think>s</think><answer>3</answer>", False, None),  # two reasoning blocks
        ],
    )
    def test_cases(self, text, format_ok, answer):
        parse = parse_think_answer(text)
        assert parse.format_ok is format_ok
        assert parse.answer_text == answer
