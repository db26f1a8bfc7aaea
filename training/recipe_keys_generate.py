"""Writes :mod:`training.recipe_keys`, the checked-in list of the keys a recipe may set.

`spatial-train --help` and the recipe checks read that list so that they import neither TRL nor transformers.
This module imports them, reads the fields of the real dataclasses (:func:`recipe_keys`) and writes the list
again; ``tests/training/test_recipe_keys.py`` fails when the checked-in list differs from the installed
classes (after an upgrade of TRL or transformers, or a change to the project's own argument classes).

Regenerate the list with::

    python -m training.recipe_keys_generate
"""

from __future__ import annotations

import dataclasses
import logging
import math
import pprint
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

OUTPUT = Path(__file__).resolve().parent / "recipe_keys.py"
HEADER = '''"""The keys a recipe may set, by recipe kind and by the dataclass that declares them (generated; do not edit).

Written by ``python -m training.recipe_keys_generate`` from the installed dataclasses (the project's argument
classes, TRL's ``GRPOConfig`` / ``SFTConfig`` / ``ModelConfig`` and transformers' ``TrainingArguments``) so that
`spatial-train` reads them without importing TRL; ``tests/training/test_recipe_keys.py`` keeps it equal to them.
Each field has its ``help`` text and, when the dataclass gives a literal one, its ``default``.
"""

from typing import Any

# fmt: off
RECIPE_KEYS: dict[str, tuple[dict[str, Any], ...]] = '''


def root_classes(kind: str) -> tuple[type, ...]:
    """The dataclasses TRL's parser fills for a `kind` recipe (``grpo`` or ``sft``); their parents come along."""
    from training.models import SpatialModelConfig

    if kind == "grpo":
        from trl import GRPOConfig

        from training.config import SpatialGRPOArguments

        return SpatialGRPOArguments, GRPOConfig, SpatialModelConfig
    from trl import SFTConfig

    from training.sft import SpatialSFTArguments

    return SpatialSFTArguments, SFTConfig, SpatialModelConfig


def _is_literal(value: Any) -> bool:
    """Whether `value` is written back exactly by its ``repr`` (plain numbers, strings, containers of them)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return math.isfinite(value)
    if type(value) in (list, tuple):
        return all(_is_literal(item) for item in value)
    if type(value) is dict:
        return all(_is_literal(key) and _is_literal(item) for key, item in value.items())
    return False


def literal_default(item: dataclasses.Field) -> tuple[bool, Any]:
    """(True, default) when the field has a literal default (or a lambda returning one), else (False, None)."""
    if item.default is not dataclasses.MISSING:
        value = item.default
    elif (
        item.default_factory is not dataclasses.MISSING
        and getattr(item.default_factory, "__name__", None) == "<lambda>"
    ):
        value = item.default_factory()
    else:
        return False, None
    return (True, value) if _is_literal(value) else (False, None)


def declared_fields(cls: type) -> list[dataclasses.Field]:
    """The fields `cls` declares itself (a field it redeclares with another default included)."""
    own = cls.__dict__.get("__annotations__", {})
    return [item for item in dataclasses.fields(cls) if item.name in own]


def recipe_keys(kind: str) -> tuple[dict[str, Any], ...]:
    """Every dataclass of a `kind` recipe, parents included, in the order the parser reads them, with the fields
    it declares: ``{"class": ..., "module": ..., "fields": ({"key", "help"[, "default"]}, ...)}``."""
    groups: list[dict[str, Any]] = []
    seen: set[type] = set()
    for root in root_classes(kind):
        for cls in root.__mro__:
            if cls in seen or not dataclasses.is_dataclass(cls):
                continue
            seen.add(cls)
            entries = []
            for item in declared_fields(cls):
                entry: dict[str, Any] = {
                    "key": item.name,
                    "help": " ".join(str(item.metadata.get("help", "")).split()),
                }
                has_default, default = literal_default(item)
                if has_default:
                    entry["default"] = default
                entries.append(entry)
            groups.append({"class": cls.__name__, "module": cls.__module__, "fields": tuple(entries)})
    return tuple(groups)


def module_text() -> str:
    """The text of :mod:`training.recipe_keys` for the installed classes."""
    keys = {kind: recipe_keys(kind) for kind in ("grpo", "sft")}
    return HEADER + pprint.pformat(keys, width=110, sort_dicts=False) + "\n# fmt: on\n"


def main() -> None:
    """Write :mod:`training.recipe_keys` for the installed classes."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    OUTPUT.write_text(module_text(), encoding="utf-8")
    logger.info("wrote %s", OUTPUT)


if __name__ == "__main__":
    main()
