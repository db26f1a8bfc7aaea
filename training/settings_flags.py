"""Command-line flags derived from a settings model: one name, type, default and help per setting.

A CLI whose settings are a pydantic model adds one flag per field with :func:`add_settings_flags` and reads
the model back with :func:`settings_from_args`, so a setting is written once (the model) and the flag,
its default and its help follow it.

- ``some_field`` becomes ``--some-field`` (``renamed`` gives another flag; the parsed value keeps the
  field's name);
- ``str``, ``int``, ``float`` (or ``None``-able) take a value of that type; a ``Literal`` offers its values
  as choices; ``bool`` is a switch (``--x`` / ``--no-x`` when it defaults to true); ``list[str]`` takes a
  comma-separated value;
- a field without a default is a required flag; the help is the field's description.

>>> from typing import Literal
>>> from pydantic import BaseModel, Field
>>> class Settings(BaseModel):
...     mode: Literal["fast", "exact"] = Field(default="fast", description="How to run.")
...     subsets: list[str] = Field(default_factory=lambda: ["a", "b"], description="Subsets to read.")
...     limit: int | None = Field(default=None, description="Only the first N.")
>>> parser = argparse.ArgumentParser()
>>> add_settings_flags(parser, Settings, renamed={"limit": "--max"})
>>> settings_from_args(parser.parse_args(["--mode", "exact", "--max", "3", "--subsets", "c, d"]), Settings)
Settings(mode='exact', subsets=['c', 'd'], limit=3)
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Protocol

from pydantic import BaseModel
from pydantic.fields import FieldInfo


def comma_separated(text: str) -> list[str]:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _without_none(annotation: Any) -> Any:
    """``X`` of ``X | None`` (``Optional[X]``), else ``annotation``."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        others = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(others) == 1:
            return others[0]
    return annotation


def _flag_options(field: FieldInfo) -> dict[str, Any]:
    """The ``add_argument`` keywords of ``field`` (type or action, choices, default or required, help)."""
    annotation = _without_none(field.annotation)
    options: dict[str, Any] = {"help": field.description}
    if field.is_required():
        options["required"] = True
    else:
        options["default"] = field.get_default(call_default_factory=True)
    if annotation is bool:
        options["action"] = argparse.BooleanOptionalAction if options.get("default") else "store_true"
    elif typing.get_origin(annotation) is Literal:
        options["choices"] = typing.get_args(annotation)
    elif typing.get_origin(annotation) is list and typing.get_args(annotation) == (str,):
        options["type"] = comma_separated
    elif annotation in (str, int, float):
        options["type"] = annotation
    else:
        raise TypeError(f"{field.annotation} has no command-line form; leave the field out (skip=)")
    return options


class ArgumentAdder(Protocol):
    """An argparse parser or an argument group of it: what takes `add_argument`."""

    def add_argument(self, *name_or_flags: str, **kwargs: Any) -> argparse.Action: ...


def add_settings_flags(
    parser: ArgumentAdder,
    model: type[BaseModel],
    renamed: Mapping[str, str] | None = None,
    skip: Iterable[str] = (),
    only: Iterable[str] | None = None,
) -> None:
    """Add one flag per field of ``model`` (the fields in ``only`` when given, but never those in ``skip``) to
    ``parser`` or an argument group of it (see the module docstring)."""
    renamed = renamed or {}
    skipped = set(skip)
    wanted = None if only is None else set(only)
    for name, field in model.model_fields.items():
        if name in skipped or (wanted is not None and name not in wanted):
            continue
        flag = renamed.get(name, "--" + name.replace("_", "-"))
        parser.add_argument(flag, dest=name, **_flag_options(field))


def settings_from_args(args: argparse.Namespace, model: type[BaseModel], **fields: Any) -> Any:
    """``model`` built from the parsed flags of its fields (those the parser has), and ``fields`` on top."""
    values = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    return model(**{**values, **fields})
