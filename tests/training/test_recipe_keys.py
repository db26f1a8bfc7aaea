"""The checked-in list of recipe keys (``training/recipe_keys.py``) is the installed dataclasses' fields.

`spatial-train` reads that list instead of importing TRL and transformers. After an upgrade of either, or a
change to the project's argument classes, this test fails until the list is written again with
``python -m training.recipe_keys_generate``.
"""

from __future__ import annotations

import dataclasses

import pytest

from training.recipe_file import recipe_fields, recipe_help
from training.recipe_keys import RECIPE_KEYS
from training.recipe_keys_generate import literal_default, recipe_keys, root_classes

REGENERATE = "python -m training.recipe_keys_generate"


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_the_checked_in_list_is_the_installed_dataclasses(kind):
    installed = recipe_keys(kind)
    checked_in = RECIPE_KEYS[kind]
    assert [(group["module"], group["class"]) for group in checked_in] == [
        (group["module"], group["class"]) for group in installed
    ], f"the dataclasses of a {kind} recipe changed: run {REGENERATE}"
    for written, real in zip(checked_in, installed, strict=True):
        assert written == real, f"the fields of {real['class']} changed: run {REGENERATE}"


@pytest.mark.parametrize("kind", ["grpo", "sft"])
def test_every_field_of_the_parsed_dataclasses_is_a_key_with_its_default(kind):
    """What the recipe checks see is what TRL's parser fills: every field, the first class's default winning."""
    expected: dict[str, object] = {}
    without_default: set[str] = set()
    for cls in root_classes(kind):
        for item in dataclasses.fields(cls):  # a subclass's redeclared field replaces its parent's
            if item.name in expected or item.name in without_default:
                continue
            has_default, default = literal_default(item)
            if has_default:
                expected[item.name] = default
            else:
                without_default.add(item.name)
    keys = recipe_fields(kind)
    assert set(keys) == set(expected) | without_default
    assert {name: keys[name] for name in expected} == expected


def test_help_names_each_key_under_the_class_that_declares_it():
    text = recipe_help("grpo")
    assert "GRPOConfig (trl.trainer.grpo_config):" in text
    assert "TrainingArguments (transformers.training_args):" in text
    assert text.index("  --num_generations (default 8)") > text.index("GRPOConfig (trl.trainer.grpo_config):")
