"""A recipe read without importing the trainer: YAML plus command-line overrides, keys checked, defaults known.

`spatial-train` answers `--help`, a mistyped key and a missing model folder in a second, before torch,
transformers, TRL or peft are imported (importing TRL's `GRPOConfig` alone takes several seconds).
The keys a recipe may set are the fields of its dataclasses (`SpatialGRPOArguments`, TRL's
`GRPOConfig` and transformers' `TrainingArguments`, `SpatialModelConfig` and TRL's `ModelConfig`; the
SFT recipe's counterparts), with each field's literal default and help text, read from the checked-in list
:mod:`training.recipe_keys` (nothing is imported); ``tests/training/test_recipe_keys.py`` keeps that list equal
to the installed dataclasses, and ``python -m training.recipe_keys_generate`` writes it again.

>>> recipe = read_recipe(RECIPES_DIR / "smoke.yaml", ["--max_steps", "3", "--use_vllm=false"])
>>> recipe.kind, recipe["max_steps"], recipe["use_vllm"], recipe["vllm_gpu_memory_utilization"]
('grpo', 3, False, 0.3)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from training.recipe_keys import RECIPE_KEYS

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
# Keys TRL's parser reads itself (not dataclass fields).
PARSER_KEYS = frozenset({"config", "env"})
# Flags of `spatial-train` itself, taken out before TRL's parser sees the arguments.
PROJECT_FLAGS = frozenset({"skip_preflight"})
_MISSING = object()


class RecipeFileError(ValueError):
    """A recipe file that cannot be read, or a key no dataclass of the recipe has."""


def recipe_help(kind: str) -> str:
    """`spatial-train grpo|sft --help`: every recipe key with its default and help text, by dataclass, from the
    checked-in list (nothing is imported).

    >>> text = recipe_help("grpo")
    >>> text.startswith("usage: spatial-train grpo --config RECIPE.yaml"), "--num_generations" in text
    (True, True)
    """
    fields = recipe_fields(kind)
    out = [
        f"usage: spatial-train {kind} --config RECIPE.yaml [--key value ...]",
        "",
        f"Every key of a {kind} recipe, given as --key value, overrides the file's value (lists: --key v1 v2;",
        "booleans: --key true|false). Keys by the dataclass that holds them, with their defaults:",
    ]
    shown: set[str] = set()
    for group in RECIPE_KEYS[kind]:
        entries = [(entry["key"], entry["help"]) for entry in group["fields"] if entry["key"] not in shown]
        if not entries:
            continue
        out += ["", f"{group['class']} ({group['module']}):"]
        for key, text in entries:
            shown.add(key)
            default = fields.get(key, _MISSING)
            out.append(f"  --{key}" if default is _MISSING else f"  --{key} (default {default!r})")
            if text:
                out.append(f"      {text}")
    return "\n".join(out) + "\n"


@cache
def recipe_fields(kind: str) -> dict[str, object]:
    """Every key a `kind` recipe (`grpo` or `sft`) may set, with its literal default (`_MISSING` if none).

    A subclass's default wins over its parent's (`SpatialModelConfig` over `ModelConfig`, `GRPOConfig`
    over `TrainingArguments`), as in the dataclasses.
    """
    fields: dict[str, object] = {}
    for group in RECIPE_KEYS[kind]:
        for entry in group["fields"]:
            fields.setdefault(entry["key"], entry.get("default", _MISSING))
    return fields


def _convert(text: str):
    """A command-line value as the recipe's YAML would hold it.

    >>> [_convert(v) for v in ("3", "1e-5", "true", "None", "auto", "[1, 2]")]
    [3, 1e-05, True, None, 'auto', [1, 2]]
    """
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            pass
    if text.strip().startswith(("[", "{")):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError:
            return text
    return text


def parse_overrides(arguments: Sequence[str]) -> dict[str, object]:
    """`--key value`, `--key=value`, `--key v1 v2` (a list) and a bare `--flag` (true) as a dictionary.

    >>> parse_overrides(["--max_steps", "2", "--reward_funcs", "a", "b", "--use_peft", "--lr=0.1"])
    {'max_steps': 2, 'reward_funcs': ['a', 'b'], 'use_peft': True, 'lr': 0.1}
    """
    overrides: dict[str, object] = {}
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if not argument.startswith("--"):
            raise RecipeFileError(f"unexpected argument {argument!r}: recipe keys are given as --key value")
        key = argument[2:]
        if "=" in key:
            key, value = key.split("=", 1)
            overrides[key] = _convert(value)
            index += 1
            continue
        values = []
        index += 1
        while index < len(arguments) and not arguments[index].startswith("--"):
            values.append(arguments[index])
            index += 1
        if not values:
            overrides[key] = True
        else:
            overrides[key] = _convert(values[0]) if len(values) == 1 else [_convert(v) for v in values]
    return overrides


def recipe_kind(keys: set[str] | frozenset[str]) -> str:
    """`sft` when a key belongs only to the SFT dataclasses, else `grpo`.

    >>> recipe_kind({"max_length_policy", "learning_rate"}), recipe_kind({"num_generations"})
    ('sft', 'grpo')
    """
    only_sft = set(recipe_fields("sft")) - set(recipe_fields("grpo"))
    return "sft" if keys & only_sft else "grpo"


def unknown_keys(keys, kind: str) -> list[str]:
    """Keys no dataclass of a `kind` recipe has (accepting HfArgumentParser's `no_<bool>` form)."""
    fields = recipe_fields(kind)
    return [
        key
        for key in keys
        if key not in fields
        and key not in PARSER_KEYS
        and key not in PROJECT_FLAGS
        and not (key.startswith("no_") and key[3:] in fields)
    ]


def close_keys(key: str, kind: str) -> list[str]:
    """Up to three known keys spelled like `key` (for the error message)."""
    import difflib

    return difflib.get_close_matches(key, list(recipe_fields(kind)), n=3, cutoff=0.75)


@dataclass
class Recipe:
    """A recipe's values: the file's keys with the overrides on top, and the dataclasses' defaults below.

    Attributes:
        kind: `grpo` or `sft`.
        path: the YAML file (`None` when only flags were given).
        values: the file's keys with the overrides applied.
        overrides: the keys given on the command line.
    """

    kind: str
    path: Path | None
    values: dict[str, object]
    overrides: dict[str, object] = field(default_factory=dict)

    def __getitem__(self, key: str):
        if key in self.values:
            return self.values[key]
        default = recipe_fields(self.kind).get(key, _MISSING)
        if default is _MISSING:
            return None
        return default

    def get(self, key: str, default=None):
        """The recipe's value of `key`, the dataclass default, or `default` when neither exists."""
        value = self[key]
        return default if value is None else value

    def __contains__(self, key: str) -> bool:
        return key in self.values


def split_config_argument(arguments: Sequence[str]) -> tuple[str | None, list[str]]:
    """`--config PATH` (or `--config=PATH`) taken out of `arguments`: (path, the other arguments)."""
    path, rest, index = None, [], 0
    arguments = list(arguments)
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--config" and index + 1 < len(arguments):
            path = arguments[index + 1]
            index += 2
            continue
        if argument.startswith("--config="):
            path = argument.split("=", 1)[1]
        else:
            rest.append(argument)
        index += 1
    return path, rest


def read_recipe(config: str | Path | None, arguments: Sequence[str] = (), kind: str | None = None) -> Recipe:
    """Read a recipe file and apply `--key value` overrides; check every key.

    Args:
        config: the YAML recipe (`None`: the overrides alone).
        arguments: the command-line overrides (without `--config`).
        kind: `grpo` or `sft`; guessed from the keys when omitted (`recipe_kind`).

    Raises:
        `RecipeFileError`: the file is missing or not a mapping, or a key is unknown (one sentence).
    """
    values: dict[str, object] = {}
    path = None
    if config is not None:
        path = Path(config)
        if not path.is_file():
            raise RecipeFileError(f"recipe {path} does not exist")
        try:
            loaded = yaml.safe_load(path.read_text())
        except yaml.YAMLError as error:
            raise RecipeFileError(f"recipe {path} is not valid YAML: {error}") from error
        if not isinstance(loaded, Mapping):
            raise RecipeFileError(f"recipe {path} must be a YAML mapping of keys to values")
        values.update(loaded)
    overrides = parse_overrides(arguments)
    values.update(overrides)
    kind = kind or recipe_kind(set(values))
    unknown = unknown_keys(values, kind)
    if unknown:
        key = unknown[0]
        where = "on the command line" if key in overrides else f"in {path}"
        suggestions = close_keys(key, kind)
        hint = f"; did you mean {' or '.join('--' + s for s in suggestions)}?" if suggestions else ""
        raise RecipeFileError(f"unknown recipe key {key!r} {where}{hint}")
    for name in PROJECT_FLAGS:
        values.pop(name, None)
    return Recipe(kind=kind, path=path, values=values, overrides=overrides)


def recipe_from_arguments(kind: str, config: str | Path | None, *parsed) -> Recipe:
    """A `Recipe` holding every field of the dataclasses TRL's parser returned (the values a run uses)."""
    import dataclasses

    values: dict[str, object] = {}
    for arguments in parsed:
        for item in dataclasses.fields(arguments):
            values.setdefault(item.name, getattr(arguments, item.name))
    return Recipe(kind=kind, path=Path(config) if config else None, values=values)
