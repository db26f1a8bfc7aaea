"""Column builders shared by the contracts: image cells and canonical boxes.

>>> import dataframely as dy
>>> isinstance(grid_box_column(), dy.List)
True
>>> grid_box_column(description="Where the cup is.").description
'Where the cup is.'

Every builder takes the column's ``description``, the text Dagster shows in the table's column view.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.boxes import GRID_SIZE


def image_column(*, nullable: bool = False, description: str | None = None) -> dy.Struct:
    """An image cell stored as Hugging Face ``datasets`` does: ``{bytes, path}``."""
    return dy.Struct(
        {"bytes": dy.Binary(nullable=False), "path": dy.String(nullable=True)},
        nullable=nullable,
        description=description,
    )


def grid_box_column(*, nullable: bool = False, description: str | None = None) -> dy.List:
    """A canonical box: 4 integers on the 0..1000 grid (ordering is a rule, see :func:`grid_box_is_valid`)."""
    return dy.List(
        dy.Int64(nullable=False, min=0, max=GRID_SIZE),
        nullable=nullable,
        min_length=4,
        max_length=4,
        description=description,
    )


def pixel_box_column(*, nullable: bool = False, description: str | None = None) -> dy.List:
    """A pixel box ``[x1, y1, x2, y2]`` in floats."""
    return dy.List(
        dy.Float64(nullable=False), nullable=nullable, min_length=4, max_length=4, description=description
    )


def grid_box_is_valid(box: pl.Expr) -> pl.Expr:
    """Expression: ``x2 > x1`` and ``y2 > y1`` for a list column of 4 grid coordinates."""
    return (box.list.get(2, null_on_oob=True) > box.list.get(0, null_on_oob=True)) & (
        box.list.get(3, null_on_oob=True) > box.list.get(1, null_on_oob=True)
    )


def all_grid_boxes_valid(items: pl.Expr, field: str) -> pl.Expr:
    """Expression: every struct in the list column ``items`` has a valid canonical box in ``field``."""
    return items.list.eval(grid_box_is_valid(pl.element().struct.field(field))).list.all()
