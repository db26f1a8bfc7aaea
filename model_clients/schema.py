"""JSON parsing and JSON-schema validation of model responses.

Models asked for structured output usually return a bare JSON document, but some wrap it in a
Markdown code fence or add a sentence around it (prompt-based JSON mode, local servers without
guided decoding). :func:`parse_json_text` accepts those shapes; :func:`validate_json` checks the
parsed value against the subset of JSON Schema that structured-output APIs accept:

- ``type`` (a name or a list of names), ``enum``, ``const``;
- objects: ``properties``, ``required``, ``additionalProperties`` (a bool or a schema),
  ``minProperties``, ``maxProperties``;
- arrays: ``items``, ``minItems``, ``maxItems``, ``uniqueItems``;
- strings: ``minLength``, ``maxLength``, ``pattern``;
- numbers: ``minimum``, ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``;
- combinators ``anyOf``, ``oneOf``, ``allOf``, and local references ``#/$defs/...`` /
  ``#/definitions/...``.

Annotation keywords (``title``, ``description``, ``format``, ``default``...) are ignored. Booleans are
not integers here, unlike in Python.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

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
    errors: list[str] = []
    _validate(instance, schema, "$", schema, errors)
    return errors


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


def _matches_type(value: Any, type_name: str) -> bool:
    actual = _json_type_name(value)
    if type_name == "number":
        return actual in ("integer", "number")
    if type_name == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == type_name


def _resolve_reference(reference: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not reference.startswith("#/"):
        raise ResponseFormatError(f"only local schema references are supported, got {reference!r}")
    node: Any = root
    for part in reference[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise ResponseFormatError(f"unresolvable schema reference {reference!r}")
        node = node[part]
    return node


def _validate(value: Any, schema: Any, path: str, root: Mapping[str, Any], errors: list[str]) -> None:
    if len(errors) >= _MAX_REPORTED_ERRORS:
        return
    if schema is True or schema is None:
        return
    if schema is False:
        errors.append(f"{path}: no value is allowed here")
        return
    if "$ref" in schema:
        _validate(value, _resolve_reference(schema["$ref"], root), path, root, errors)
        return

    expected_type = schema.get("type")
    if expected_type is not None:
        allowed = [expected_type] if isinstance(expected_type, str) else list(expected_type)
        if not any(_matches_type(value, name) for name in allowed):
            errors.append(f"{path}: expected {' or '.join(allowed)}, got {_json_type_name(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']!r}")
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: expected {schema['const']!r}, got {value!r}")

    if isinstance(value, dict):
        _validate_object(value, schema, path, root, errors)
    elif isinstance(value, list):
        _validate_array(value, schema, path, root, errors)
    elif isinstance(value, str):
        _validate_string(value, schema, path, errors)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        _validate_number(value, schema, path, errors)

    for sub_schema in schema.get("allOf", ()):
        _validate(value, sub_schema, path, root, errors)
    for keyword, needed in (("anyOf", "any"), ("oneOf", "one")):
        options = schema.get(keyword)
        if not options:
            continue
        matching = sum(1 for option in options if not _collect(value, option, path, root))
        if (needed == "any" and matching == 0) or (needed == "one" and matching != 1):
            errors.append(f"{path}: matches {matching} of the {keyword} alternatives")


def _collect(value: Any, schema: Any, path: str, root: Mapping[str, Any]) -> list[str]:
    found: list[str] = []
    _validate(value, schema, path, root, found)
    return found


def _validate_object(value: dict, schema: Mapping[str, Any], path: str, root, errors: list[str]) -> None:
    properties = schema.get("properties", {})
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{path}: missing required property {name!r}")
    additional = schema.get("additionalProperties", True)
    for name, item in value.items():
        item_path = f"{path}.{name}"
        if name in properties:
            _validate(item, properties[name], item_path, root, errors)
        elif additional is False:
            errors.append(f"{path}: unexpected property {name!r}")
        elif isinstance(additional, Mapping):
            _validate(item, additional, item_path, root, errors)
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        errors.append(f"{path}: fewer than {schema['minProperties']} properties")
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        errors.append(f"{path}: more than {schema['maxProperties']} properties")


def _validate_array(value: list, schema: Mapping[str, Any], path: str, root, errors: list[str]) -> None:
    if "minItems" in schema and len(value) < schema["minItems"]:
        errors.append(f"{path}: {len(value)} items, fewer than {schema['minItems']}")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errors.append(f"{path}: {len(value)} items, more than {schema['maxItems']}")
    if schema.get("uniqueItems"):
        seen: list[str] = []
        for item in value:
            encoded = json.dumps(item, sort_keys=True)
            if encoded in seen:
                errors.append(f"{path}: duplicate item {item!r}")
                break
            seen.append(encoded)
    item_schema = schema.get("items")
    if isinstance(item_schema, Mapping):
        for index, item in enumerate(value):
            _validate(item, item_schema, f"{path}[{index}]", root, errors)


def _validate_string(value: str, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{path}: string shorter than {schema['minLength']}")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{path}: string longer than {schema['maxLength']}")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        errors.append(f"{path}: {value!r} does not match {schema['pattern']!r}")


def _validate_number(value: float, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        errors.append(f"{path}: {value} is below the minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        errors.append(f"{path}: {value} is above the maximum {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errors.append(f"{path}: {value} is not above {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        errors.append(f"{path}: {value} is not below {schema['exclusiveMaximum']}")
