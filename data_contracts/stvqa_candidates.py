"""Contract for ``stvqa_candidates``: one row per generated STVQA question that passed the checks.

Rows come from the template generator or an LLM (``generator`` says which, ``prompt_version`` which
prompt or template set). ``options`` are in generation order and ``answer`` is the gold letter of
``answer_index``. ``gt_scene`` is the question's ground-truth subgraph: the objects the question and
options name, as ``name.N`` ids with canonical (0..1000) boxes, and the relations among them.
``gt_note`` records a corrected count answer. ``facts`` is JSON with the values that justify a
template answer (null for LLM items). The table is partitioned by ``shard`` (see
``assets/stvqa/shards.py``).
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column

CONTRACT_VERSION = "1.0.0"

CATEGORIES = [
    "relation",
    "reach",
    "size",
    "orientation",
    "instance_location",
    "depth",
    "distance",
    "count",
    "existence",
]
LEVELS = ["easy", "medium", "hard"]
LETTERS = "ABCD"


def one_of(values: list[str]) -> str:
    """A regex accepting exactly these words (plain strings survive Parquet round trips, unlike enums).

    >>> one_of(["easy", "hard"])
    '^(?:easy|hard)$'
    """
    return "^(?:" + "|".join(values) + ")$"


def gt_scene_column(*, nullable: bool = False) -> dy.Struct:
    """``{objects: [{id "name.N", bbox_2d (0..1000)}], relationships: [{subject, predicate, object}]}``."""
    return dy.Struct(
        {
            "objects": dy.List(
                dy.Struct(
                    {"id": dy.String(nullable=False, min_length=1), "bbox_2d": grid_box_column()},
                    nullable=False,
                ),
                nullable=False,
            ),
            "relationships": dy.List(
                dy.Struct(
                    {
                        "subject": dy.String(nullable=False),
                        "predicate": dy.String(nullable=False),
                        "object": dy.String(nullable=False),
                    },
                    nullable=False,
                ),
                nullable=False,
            ),
        },
        nullable=nullable,
    )


def gt_boxes_are_ordered(column: pl.Expr) -> pl.Expr:
    """Every ground-truth box of a ``gt_scene`` struct has ``x2 > x1`` and ``y2 > y1``."""
    return all_grid_boxes_valid(column.struct.field("objects"), "bbox_2d")


class StvqaCandidates(dy.Schema):
    """A generated multiple-choice spatial question about one scene-graph image."""

    question_id = dy.String(primary_key=True, min_length=1)
    image_id = dy.String(nullable=False, min_length=1)
    shard = dy.String(nullable=False, regex=r"^\d{2}$")
    question = dy.String(nullable=False, min_length=1)
    options = dy.List(dy.String(nullable=False, min_length=1), nullable=False, min_length=2, max_length=4)
    answer = dy.String(nullable=False, regex=r"^[A-D]$")
    answer_index = dy.Int64(nullable=False, min=0, max=3)
    category = dy.String(nullable=False, regex=one_of(CATEGORIES))
    level = dy.String(nullable=False, regex=one_of(LEVELS))
    rating = dy.Int64(nullable=False, min=1, max=10)
    generator = dy.String(nullable=False, min_length=1)
    prompt_version = dy.String(nullable=False, min_length=1)
    template = dy.String(nullable=True)
    facts = dy.String(nullable=True)
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    gt_scene = gt_scene_column()
    gt_note = dy.String(nullable=True)
    source = dy.String(nullable=False)

    @dy.rule()
    def gold_inside_options(cls) -> pl.Expr:
        """The gold index points at an option and the gold letter is its letter."""
        return (cls.answer_index.col < cls.options.col.list.len()) & (
            cls.answer.col == pl.lit(LETTERS).str.slice(cls.answer_index.col, 1)
        )

    @dy.rule()
    def options_are_distinct(cls) -> pl.Expr:
        """No two options are the same text (ignoring case and surrounding spaces)."""
        normalised = cls.options.col.list.eval(pl.element().str.strip_chars().str.to_lowercase())
        return normalised.list.n_unique() == cls.options.col.list.len()

    @dy.rule()
    def gt_boxes_valid(cls) -> pl.Expr:
        """Every ground-truth box is a canonical box with area."""
        return gt_boxes_are_ordered(cls.gt_scene.col)
