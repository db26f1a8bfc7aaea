"""The examples in the STVQA modules' docstrings run and hold."""

import doctest
import importlib

import pytest

MODULES = [
    "assets.stvqa.text",
    "assets.stvqa.vocabulary",
    "assets.stvqa.geometry",
    "assets.stvqa.scene",
    "assets.stvqa.facts",
    "assets.stvqa.templates",
    "assets.stvqa.balance",
    "assets.stvqa.validation",
    "assets.stvqa.gt_scene",
    "assets.stvqa.prompts",
    "assets.stvqa.shards",
    "assets.stvqa.generate",
    "assets.stvqa.pass_at_2",
    "assets.stvqa.dataset",
    "data_contracts.stvqa_candidates",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
