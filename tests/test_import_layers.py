"""The top-level packages import each other in one direction only.

From the bottom up: ``data_contracts`` (tables, boxes, storage layout) -> ``llm`` (the client layer)
and ``readers`` (raw formats) -> ``training`` (rewards, trainer, evaluation) -> ``assets`` (the asset
graph and the resources it declares) -> ``pipelines`` (Definitions, jobs, automation, CLI). Library
code never imports ``tests`` or ``benchmarks``. Every import counts, including those inside functions.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = (
    "data_contracts",
    "model_clients",
    "readers",
    "training",
    "publishing",
    "assets",
    "pipelines",
    "tests",
    "benchmarks",
)
ALLOWED = {
    "data_contracts": set(),
    "model_clients": {"data_contracts"},
    "readers": {"data_contracts"},
    "training": {"data_contracts", "model_clients", "readers"},
    "publishing": {"data_contracts", "model_clients", "readers"},
    "assets": {"data_contracts", "model_clients", "readers", "training", "publishing"},
    "pipelines": {"data_contracts", "model_clients", "readers", "training", "publishing", "assets"},
    "benchmarks": {
        "data_contracts",
        "model_clients",
        "readers",
        "training",
        "publishing",
        "assets",
        "pipelines",
    },
}


def imported_project_packages(path: Path) -> set[str]:
    """The project's top-level packages that ``path`` imports anywhere in its body."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found.update(name.split(".")[0] for name in names if name.split(".")[0] in PROJECT_PACKAGES)
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_what_lies_below_it(package):
    violations = []
    for path in sorted((REPOSITORY_ROOT / package).rglob("*.py")):
        for imported in imported_project_packages(path) - ALLOWED[package] - {package}:
            violations.append(f"{path.relative_to(REPOSITORY_ROOT)} imports {imported}")
    assert not violations, "\n".join(violations)


def test_the_allowed_directions_have_no_cycle():
    visiting, done = set(), set()

    def visit(package: str) -> None:
        assert package not in visiting, f"cycle through {package}"
        if package in done:
            return
        visiting.add(package)
        for below in ALLOWED.get(package, ()):
            visit(below)
        visiting.discard(package)
        done.add(package)

    for package in ALLOWED:
        visit(package)


def test_the_checker_sees_imports_inside_functions(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "import os\n\ndef late():\n    from assets.sources import assets\n    import training.cli\n"
    )
    assert imported_project_packages(module) == {"assets", "training"}
