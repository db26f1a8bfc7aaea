"""JSON parsing and schema validation of model answers (model_clients/schema.py)."""

from __future__ import annotations

import pytest

from model_clients.schema import ResponseFormatError, parse_and_validate, parse_json_text, validate_json

QUESTION_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["question", "options", "answer", "rating"],
    "properties": {
        "question": {"type": "string", "minLength": 5},
        "options": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 2,
            "maxItems": 4,
            "uniqueItems": True,
        },
        "answer": {"enum": ["A", "B", "C", "D"]},
        "rating": {"type": "integer", "minimum": 1, "maximum": 10},
        "level": {"$ref": "#/$defs/level"},
    },
    "$defs": {"level": {"type": "string", "enum": ["easy", "medium", "hard"]}},
}
VALID_ITEM = {
    "question": "Is the cup left of the laptop?",
    "options": ["yes", "no"],
    "answer": "A",
    "rating": 7,
}


class TestParseJsonText:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ('{"a": 1}', {"a": 1}),  # bare JSON
            ("  [1, 2]\n", [1, 2]),  # whitespace around an array
            ('```json\n{"a": 1}\n```', {"a": 1}),  # Markdown fence with a language tag
            ('```\n{"a": 1}\n```', {"a": 1}),  # fence without a tag
            ('Sure! {"a": {"b": 2}} Hope this helps.', {"a": {"b": 2}}),  # prose around one object
        ],
    )
    def test_accepted_shapes(self, text, expected):
        assert parse_json_text(text) == expected

    @pytest.mark.parametrize(
        "text",
        [
            "",  # empty
            "   ",  # blank
            "not json at all",  # prose only
            '{"a": 1',  # truncated object
        ],
    )
    def test_rejected_shapes(self, text):
        with pytest.raises(ResponseFormatError):
            parse_json_text(text)


class TestValidateJson:
    def test_valid_item(self):
        assert validate_json(VALID_ITEM, QUESTION_SCHEMA) == []

    def test_no_schema_accepts_anything(self):
        assert validate_json({"anything": [1, "x"]}, None) == []

    @pytest.mark.parametrize(
        ("changes", "expected_fragment"),
        [
            ({"answer": "E"}, "$.answer: 'E' is not one of"),  # gold letter outside the options
            ({"options": ["yes"]}, "fewer than 2"),  # too few options
            ({"options": ["yes", "yes"]}, "duplicate item"),  # duplicate options
            ({"rating": 11}, "above the maximum"),  # rating out of range
            ({"rating": True}, "expected integer, got boolean"),  # booleans are not integers
            ({"rating": 7.5}, "expected integer, got number"),  # fractional rating
            ({"question": "Why"}, "shorter than 5"),  # too short
            ({"extra": 1}, "unexpected property 'extra'"),  # additionalProperties false
            ({"level": "extreme"}, "$.level: 'extreme' is not one of"),  # $ref to $defs
        ],
    )
    def test_violations(self, changes, expected_fragment):
        errors = validate_json({**VALID_ITEM, **changes}, QUESTION_SCHEMA)
        assert any(expected_fragment in error for error in errors), errors

    def test_missing_required_property(self):
        item = {key: value for key, value in VALID_ITEM.items() if key != "answer"}
        assert validate_json(item, QUESTION_SCHEMA) == ["$: missing required property 'answer'"]

    def test_integral_float_is_an_integer(self):
        assert validate_json({**VALID_ITEM, "rating": 7.0}, QUESTION_SCHEMA) == []

    @pytest.mark.parametrize(
        ("value", "valid"),
        [
            ("a", True),  # matches the first alternative
            (3, True),  # matches the second
            (None, False),  # matches neither
        ],
    )
    def test_any_of(self, value, valid):
        schema = {"anyOf": [{"type": "string"}, {"type": "integer"}]}
        assert (validate_json(value, schema) == []) is valid

    def test_nested_paths_are_reported(self):
        schema = {
            "type": "object",
            "properties": {
                "boxes": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}
            },
        }
        assert validate_json({"boxes": [[1, 2], [3, "x"]]}, schema) == [
            "$.boxes[1][1]: expected integer, got string"
        ]

    def test_parse_and_validate_raises_with_reasons(self):
        with pytest.raises(ResponseFormatError, match="missing required property 'rating'"):
            parse_and_validate(
                '{"question": "Is it big?", "options": ["a", "b"], "answer": "A"}', QUESTION_SCHEMA
            )

    @pytest.mark.parametrize(
        ("value", "schema", "expected"),
        [
            (
                None,
                {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "string"}], "$defs": {"n": {"type": "integer"}}},
                ["$: matches 0 of the anyOf alternatives"],
            ),  # alternatives through a reference
            (
                3,
                {"oneOf": [{"type": "integer"}, {"type": "number"}]},
                ["$: matches 2 of the oneOf alternatives"],
            ),  # one alternative exactly, not two
            (
                {"a": {"b": 1}},
                {
                    "definitions": {"s": {"type": "string"}},
                    "properties": {"a": {"properties": {"b": {"$ref": "#/definitions/s"}}}},
                },
                ["$.a.b: expected string, got integer"],
            ),  # draft-07 style definitions
            (1, False, ["$: no value is allowed here"]),  # the false schema
            ("ab", {"pattern": "^x"}, ["$: 'ab' does not match '^x'"]),
            (5, {"exclusiveMaximum": 5}, ["$: 5 is not below 5"]),
            (
                {"x": 1, "y": 2},
                {"additionalProperties": False, "patternProperties": {"^y": {}}},
                ["$: unexpected property 'x'"],
            ),  # a property a pattern allows is expected
            (
                {"a": [1, 2]},
                {"properties": {"a": {"type": ["string", "null"]}}},
                ["$.a: expected string or null, got array"],
            ),  # a list of types
        ],
    )
    def test_wording_of_other_keywords(self, value, schema, expected):
        assert validate_json(value, schema) == expected

    def test_every_missing_property_and_at_most_five_problems(self):
        schema = {"type": "object", "required": [f"p{n}" for n in range(8)]}
        assert validate_json({}, schema) == [f"$: missing required property 'p{n}'" for n in range(5)]

    def test_an_unresolvable_reference_is_a_format_error(self):
        with pytest.raises(ResponseFormatError, match=r"unresolvable schema reference '.*defs/nope'"):
            validate_json(1, {"$ref": "#/$defs/nope"})
