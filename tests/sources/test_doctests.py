"""The examples in the readers' docstrings run and hold."""

import doctest
import importlib

import pytest

MODULES = ["readers.common", "readers.mcq", "readers.scene_graphs"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0
