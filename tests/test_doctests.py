"""The examples in every module's docstrings run and hold (the project's packages, walked, not listed)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

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


@pytest.mark.parametrize("name", project_modules())
def test_docstring_examples(name):
    result = doctest.testmod(
        importlib.import_module(name),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        report=False,
    )
    assert result.failed == 0, (
        f"{result.failed} of {result.attempted} examples in {name} failed (run it with -v)"
    )


def test_most_modules_carry_examples():
    with_examples = [
        name for name in project_modules() if doctest.DocTestFinder().find(importlib.import_module(name))
    ]
    assert len(with_examples) >= 60
