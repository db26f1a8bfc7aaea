"""JSON parsing and JSON-schema validation of model responses.

Models asked for structured output usually return a bare JSON document, but some wrap it in a
Markdown code fence or add a sentence around it (prompt-based JSON mode, local servers without
guided decoding). :func:`parse_json_text` accepts those shapes; :func:`validate_json` checks the
parsed value against its JSON Schema with the `jsonschema` library (the schema's ``$schema`` draft, Draft
2020-12 by default; local references ``#/$defs/...`` and ``#/definitions/...`` resolve), and words each
problem as a path to the failing field and what was expected there (``$.options[1]: expected string, got
integer``). Annotation keywords (``title``, ``description``, ``format``, ``default``...) are not checked.
Booleans are not integers, unlike in Python; an integral float such as ``7.0`` is an integer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator, ValidationError
from jsonschema.validators import validator_for
from referencing.exceptions import Unresolvable

__all__ = ["ResponseFormatError", "parse_and_validate", "parse_json_text", "validate_json"]

_FENCE_PATTERN = re.compile(r"^```[a-zA-Z0-9_-]*\s*\n?(?P<body>.*?)\n?```\s*$", re.DOTALL)
_MAX_REPORTED_ERRORS = 5


class ResponseFormatError(ValueError):
    """A response that is not JSON, or not JSON of the requested schema; the message says why."""


def parse_json_text(text: str) -> Any:
    """Parse a model's text answer as JSON, tolerating a code fence or prose around one object.

    Args:
        text (`str`): the raw text of the answer.

    Returns:
        The parsed JSON value.

    Raises:
        ResponseFormatError: when no JSON document can be read from the text.

    Example:
        >>> parse_json_text('```json\\n{"a": 1}\\n```')
        {'a': 1}
        >>> parse_json_text('Here it is: {"a": [1, 2]}')
        {'a': [1, 2]}
    """
    if text is None or not text.strip():
        raise ResponseFormatError("empty response text")
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as first_error:
        fence = _FENCE_PATTERN.match(stripped)
        if fence is not None:
            try:
                return json.loads(fence.group("body"))
            except json.JSONDecodeError:
                pass
        # Prose around one document: take the span from the first opening bracket to the last matching
        # closing one (never a fragment nested inside a broken outer document).
        openings = [position for position in (stripped.find("{"), stripped.find("[")) if position >= 0]
        if openings:
            start = min(openings)
            end = stripped.rfind("}" if stripped[start] == "{" else "]")
            if start < end:
                try:
                    return json.loads(stripped[start : end + 1])
                except json.JSONDecodeError:
                    pass
        raise ResponseFormatError(
            f"response is not valid JSON: {first_error.msg} at char {first_error.pos}"
        ) from None


def validate_json(instance: Any, schema: Mapping[str, Any] | None) -> list[str]:
    """Check a parsed JSON value against a JSON schema (the subset in the module docstring).

    Args:
        instance: the parsed value.
        schema (`dict` or `None`): the schema; `None` accepts anything.

    Returns:
        `list[str]`: the problems found, each prefixed by a JSON path (empty when valid).

    Example:
        >>> schema = {"type": "object", "required": ["phrases"],
        ...           "properties": {"phrases": {"type": "array", "items": {"type": "string"}}}}
        >>> validate_json({"phrases": ["red car"]}, schema)
        []
        >>> validate_json({"phrases": ["red car", 3]}, schema)
        ['$.phrases[1]: expected string, got integer']
    """
    if schema is None:
        return []
    validator = validator_for(schema, default=Draft202012Validator)(schema)
    problems: list[str] = []
    try:
        for error in validator.iter_errors(instance):
            for problem in _describe(error, validator):
                if problem not in problems:
                    problems.append(problem)
            if len(problems) >= _MAX_REPORTED_ERRORS:
                break
    except Unresolvable as error:
        raise ResponseFormatError(f"unresolvable schema reference {error.ref!r}") from None
    return problems[:_MAX_REPORTED_ERRORS]


def parse_and_validate(text: str, schema: Mapping[str, Any] | None) -> Any:
    """Parse `text` as JSON and validate it against `schema`.

    Args:
        text (`str`): the raw text of the answer.
        schema (`dict` or `None`): the JSON schema; `None` only requires valid JSON.

    Returns:
        The parsed value.

    Raises:
        ResponseFormatError: with the first few schema violations in its message.

    Example:
        >>> parse_and_validate('{"answer": "B"}', {"type": "object", "properties": {"answer": {"enum": ["A", "B"]}}})
        {'answer': 'B'}
    """
    value = parse_json_text(text)
    problems = validate_json(value, schema)
    if problems:
        raise ResponseFormatError("response does not match the schema: " + "; ".join(problems))
    return value


def json_path(error: ValidationError) -> str:
    """The JSON path of the failing value, ``$`` for the document itself.

    >>> json_path(ValidationError("bad", path=["boxes", 1, 0]))
    '$.boxes[1][0]'
    """
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _duplicate(items: list) -> Any:
    seen: set[str] = set()
    for item in items:
        encoded = json.dumps(item, sort_keys=True)
        if encoded in seen:
            return item
        seen.add(encoded)
    return None


def _unexpected_properties(value: dict, schema: Mapping[str, Any]) -> list[str]:
    patterns = [re.compile(pattern) for pattern in schema.get("patternProperties", {})]
    return [
        name
        for name in value
        if name not in schema.get("properties", {}) and not any(pattern.search(name) for pattern in patterns)
    ]


_WORDING: dict[str, Callable[[Any, Any], str]] = {
    "enum": lambda value, enum: f"{value!r} is not one of {enum!r}",
    "const": lambda value, const: f"expected {const!r}, got {value!r}",
    "minProperties": lambda value, limit: f"fewer than {limit} properties",
    "maxProperties": lambda value, limit: f"more than {limit} properties",
    "minItems": lambda value, limit: f"{len(value)} items, fewer than {limit}",
    "maxItems": lambda value, limit: f"{len(value)} items, more than {limit}",
    "uniqueItems": lambda value, _: f"duplicate item {_duplicate(value)!r}",
    "minLength": lambda value, limit: f"string shorter than {limit}",
    "maxLength": lambda value, limit: f"string longer than {limit}",
    "pattern": lambda value, pattern: f"{value!r} does not match {pattern!r}",
    "minimum": lambda value, limit: f"{value} is below the minimum {limit}",
    "maximum": lambda value, limit: f"{value} is above the maximum {limit}",
    "exclusiveMinimum": lambda value, limit: f"{value} is not above {limit}",
    "exclusiveMaximum": lambda value, limit: f"{value} is not below {limit}",
}
"""How a failed keyword is worded, from the failing value and the keyword's value in the schema."""


def _describe(error: ValidationError, validator: Any) -> list[str]:
    """One error of `jsonschema` as problems ``"<path>: <what was expected>"``; keywords not worded here keep
    the library's message."""
    # An error that a validator reports carries the failing value, the keyword's value and the schema;
    # jsonschema types them with its `Unset` sentinel too, which only an error built by hand holds.
    path = json_path(error)
    value: Any = error.instance
    expected: Any = error.validator_value
    schema: Any = error.schema
    keyword = error.validator
    if keyword is None:  # the schema is `false`
        return [f"{path}: no value is allowed here"]
    if keyword == "type":
        allowed = [expected] if isinstance(expected, str) else list(expected)
        return [f"{path}: expected {' or '.join(allowed)}, got {_json_type_name(value)}"]
    if keyword == "required":
        return [f"{path}: missing required property {name!r}" for name in expected if name not in value]
    if keyword == "additionalProperties" and expected is False:
        return [f"{path}: unexpected property {name!r}" for name in _unexpected_properties(value, schema)]
    if keyword in ("anyOf", "oneOf"):
        matching = sum(1 for option in expected if validator.evolve(schema=option).is_valid(value))
        return [f"{path}: matches {matching} of the {keyword} alternatives"]
    wording = _WORDING.get(str(keyword))
    return [f"{path}: {wording(value, expected) if wording else error.message}"]
