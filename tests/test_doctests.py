"""The examples in every module's docstrings run and hold (the project's packages, walked, not listed).

Only the modules whose source holds an example (``>>>``) are collected, so the count says how many modules'
examples ran; :func:`test_every_module_with_examples_is_collected` checks that the source test misses none.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

PACKAGES = ("data_contracts", "model_clients", "readers", "training", "publishing", "assets", "pipelines")


def project_modules() -> list[str]:
    """Every module of the project's packages, packages included."""
    names = []
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        names.append(package_name)
        names.extend(info.name for info in pkgutil.walk_packages(package.__path__, f"{package_name}."))
    return sorted(names)


def modules_with_examples() -> list[str]:
    """The project's modules whose source holds a doctest prompt (read, not imported)."""
    return [
        name
        for name in project_modules()
        if ">>> " in Path(importlib.util.find_spec(name).origin).read_text(encoding="utf-8")
    ]


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples(name):
    result = doctest.testmod(
        importlib.import_module(name),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        report=False,
    )
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (run it with -v)"
    )


def test_every_module_with_examples_is_collected():
    with_examples = [
        name
        for name in project_modules()
        if any(test.examples for test in doctest.DocTestFinder().find(importlib.import_module(name)))
    ]
    assert set(with_examples) <= set(modules_with_examples())
    assert len(with_examples) >= 60
