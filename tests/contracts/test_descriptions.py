"""Every column of every contract says what it holds, and Dagster's column view shows it.

The contracts are found by walking ``data_contracts`` (not listed), so a new table or column without a
description fails here. Beyond being present, a description must be precise where a reader would
otherwise guess: a nullable column says what null means, a column named in a unit (``_m``, ``_m2``,
``_deg``, ``_px``, ``_usd``) names the unit, and a column holding canonical boxes names the 0..1000 grid.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import dataframely as dy
import pytest

import data_contracts
from assets.tables import column_schema
from data_contracts.boxes import GRID_SIZE
from data_contracts.scene_graphs import SceneGraphs
from data_contracts.stvqa import Stvqa

UNIT_WORDS = {"_m": "metre", "_m2": "square metre", "_deg": "degree", "_px": "pixel", "_usd": "dollar"}
"""Column-name suffix -> the word its description must contain."""


def project_contracts() -> list[type[dy.Schema]]:
    """Every ``dy.Schema`` defined in a module of ``data_contracts``, by class name."""
    found: dict[str, type[dy.Schema]] = {}
    for info in pkgutil.iter_modules(data_contracts.__path__):
        module = importlib.import_module(f"data_contracts.{info.name}")
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, dy.Schema)
                and value is not dy.Schema
                and value.__module__ == module.__name__
            ):
                found[value.__name__] = value
    return [found[name] for name in sorted(found)]


CONTRACTS = project_contracts()
COLUMNS = [(contract, name) for contract in CONTRACTS for name in contract.columns()]


def column_id(value: object) -> str:
    return value.__name__ if inspect.isclass(value) else str(value)


def holds_grid_box(column: dy.Column) -> bool:
    """True when ``column`` is, or contains, a canonical box: a list of exactly 4 integers capped at the grid size."""
    if isinstance(column, dy.List):
        inner = column.inner
        if (
            isinstance(inner, dy.Int64)
            and inner.max == GRID_SIZE
            and column.min_length == column.max_length == 4
        ):
            return True
        return holds_grid_box(inner)
    if isinstance(column, dy.Struct):
        return any(holds_grid_box(field) for field in column.inner.values())
    return False


def unit_word(name: str) -> str | None:
    """The unit word a column's name calls for (``floor_rmse_m`` -> ``"metre"``), or ``None``."""
    return next((word for suffix, word in UNIT_WORDS.items() if name.endswith(suffix)), None)


NULLABLE_COLUMNS = [(contract, name) for contract, name in COLUMNS if contract.columns()[name].nullable]
UNIT_COLUMNS = [(contract, name) for contract, name in COLUMNS if unit_word(name)]
BOX_COLUMNS = [(contract, name) for contract, name in COLUMNS if holds_grid_box(contract.columns()[name])]


def test_every_contract_is_found():
    names = {contract.__name__ for contract in CONTRACTS}
    assert {"McqQuestions", "SceneGeometry", "EvalReport", "StvqaPassAtTwoAttempts", "Quarantine"} <= names
    assert len(COLUMNS) >= 290


def test_precision_checks_have_columns_to_check():
    counts = {"nullable": len(NULLABLE_COLUMNS), "unit": len(UNIT_COLUMNS), "box": len(BOX_COLUMNS)}
    assert min(counts.values()) >= 10, counts


def description_problems(contract: type[dy.Schema]) -> list[str]:
    """What is missing from the descriptions of ``contract``'s columns: each column's description (at least
    15 characters, a full stop), what null means for a nullable one, the unit for a unit-named one, the
    0..1000 grid for one holding canonical boxes."""
    problems = []
    for name, column in contract.columns().items():
        description = column.description
        if not isinstance(description, str) or len(description.strip()) < 15:
            problems.append(f"{name} has no description")
            continue
        if not description.endswith("."):
            problems.append(f"{name}: end the description with a full stop")
        if column.nullable and "null" not in description.lower():
            problems.append(f"{name}: say when it is null")
        if unit_word(name) and unit_word(name) not in description.lower():
            problems.append(f"{name}: name the unit ({unit_word(name)})")
        if holds_grid_box(column) and "0..1000" not in description:
            problems.append(f"{name}: name the 0..1000 grid")
    return problems


@pytest.mark.parametrize("contract", CONTRACTS, ids=column_id)
def test_every_column_is_described_precisely(contract):
    assert description_problems(contract) == [], contract.__name__


def test_a_vague_description_is_caught():
    class Vague(dy.Schema):
        height_px = dy.Int64(nullable=True, description="How tall the image is.")
        box = dy.List(
            dy.Int64(max=GRID_SIZE), min_length=4, max_length=4, description="Where the object lies"
        )
        label = dy.String()

    assert description_problems(Vague) == [
        "height_px: say when it is null",
        "height_px: name the unit (pixel)",
        "box: end the description with a full stop",
        "box: name the 0..1000 grid",
        "label has no description",
    ]


def test_holds_grid_box_sees_nested_boxes():
    assert holds_grid_box(SceneGraphs.columns()["objects"]) and holds_grid_box(Stvqa.columns()["gt_scene"])
    assert not holds_grid_box(SceneGraphs.columns()["image"])


@pytest.mark.parametrize("contract", CONTRACTS, ids=column_id)
def test_dagster_column_view_carries_the_descriptions(contract):
    columns = contract.columns()
    shown = column_schema(contract).columns
    assert [column.name for column in shown] == list(columns)
    for table_column in shown:
        column = columns[table_column.name]
        expected = column.description + (" (primary key)" if column.primary_key else "")
        assert table_column.description == expected
