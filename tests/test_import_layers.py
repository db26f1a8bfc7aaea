"""The top-level packages import each other in one direction only.

From the bottom up: ``data_contracts`` (tables, boxes, storage layout) -> ``llm`` (the client layer)
and ``readers`` (raw formats) -> ``training`` (rewards, trainer, evaluation) -> ``assets`` (the asset
graph and the resources it declares) -> ``pipelines`` (Definitions, jobs, automation, CLI). Library
code never imports ``tests`` or ``benchmarks``. Every import counts, including those inside functions.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Mapping
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


def module_name(path: Path) -> str:
    """The dotted name of a project file (a package's ``__init__.py`` names the package)."""
    parts = list(path.relative_to(REPOSITORY_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    """Every module of the project's top-level packages, by dotted name."""
    return {
        module_name(path): path
        for package in PROJECT_PACKAGES
        for path in sorted((REPOSITORY_ROOT / package).rglob("*.py"))
    }


def is_type_checking_block(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``): imports for annotations only, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_modules(name: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The project modules that module `name` (at `path`) imports, inside functions too, but not under
    ``if TYPE_CHECKING:``. ``from package import name`` is an edge to the submodule ``package.name`` when there is
    one, else to the package; ``import a.b.c`` is an edge to ``a.b.c`` only (not to its parent packages, which
    Python imports first but which a module of theirs may import back without a cycle of definitions)."""

    def existing(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if is_type_checking_block(child):
                for branch in child.orelse:
                    visit_one(branch)
                continue
            visit_one(child)

    def visit_one(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            targets = [f"{source}.{alias.name}" for alias in node.names]
        else:
            visit(node)
            return
        for target in targets:  # only modules of `modules` (the project's) resolve
            resolved = existing(target)
            if resolved is not None and resolved != name:
                found.add(resolved)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules that import each other (Tarjan), each as the path
    ``a -> b -> ... -> a``; empty when the graph has none."""
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(module: str) -> None:  # recursion depth is bounded by the longest import chain
        order[module] = lowest[module] = len(order)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in order:
                connect(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in on_stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(group)

    for module in sorted(graph):
        if module not in order:
            connect(module)
    return [cycle_through(group, graph) for group in groups]


def cycle_through(group: set[str], graph: Mapping[str, set[str]]) -> list[str]:
    """A shortest cycle from the group's first module back to it, inside the group (breadth first)."""
    start = min(group)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module] & group):
                if imported == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if imported not in came_from:
                    came_from[imported] = module
                    following.append(imported)
        frontier = following
    raise AssertionError(f"{sorted(group)} is not a cycle")


def test_no_module_imports_itself_through_others():
    """No project module imports itself through others: the import graph of every module of the project's
    top-level packages (tests and benchmarks included) is acyclic.

    The graph is read statically with ``ast``. Imports inside ``if TYPE_CHECKING:`` do not count (they never
    run). Imports inside functions do count: a lazy import placed to dodge a cycle at import time still ties
    the two modules together, and the cure is to move what both need to a module below them.
    """
    modules = project_modules()
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in cycles)


def test_the_cycle_finder_names_the_cycle_and_skips_type_checking_imports(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import helper\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.a import thing\n\n"
        "def helper():\n    from pkg import c\n"
    )
    (package / "c.py").write_text("from . import a\n")
    modules = {"pkg": package / "__init__.py", **{f"pkg.{n}": package / f"{n}.py" for n in "abc"}}
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert import_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]
    graph["pkg.c"] = set()
    assert import_cycles(graph) == []


HEAVY_LIBRARIES = ("matplotlib", "open3d", "torch", "transformers", "trl", "vllm")
"""Libraries that only some steps use: loading the Dagster definitions (every `dagster dev` code server,
`spatial-build` and run worker does) imports none of them."""


def test_loading_the_definitions_imports_no_library_that_only_some_steps_use():
    probe = (
        "import sys, pipelines.definitions; "
        f"print(' '.join(name for name in {HEAVY_LIBRARIES!r} if name in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPOSITORY_ROOT
    )
    assert result.stdout.split() == [], f"loading the definitions imported {result.stdout.strip()}"
