"""Contract for ``eval_items``: one row per benchmark item (question, images, gold answer) to evaluate.

Every benchmark the papers report (OmniSpatial test, SpatiaLab, CV-Bench, 3DSRBench with its flip
and circular variants, BLINK's spatial subsets, the STVQA validation split, a held-out split of
``dge_tasks``) is read from its native format into this one table, so one scorer and one report
serve them all.

The gold answer is always stored twice, and always derived from the benchmark's own index or letter
(never read back out of option text): ``answer_index`` (0-based) with its letter in ``answer`` for
multiple choice, or ``numeric_answer`` (with ``unit``) and its text in ``answer`` for numeric items.
``options`` may be empty for a multiple-choice item whose choices are drawn in the image (OmniSpatial);
its letters are then A-D.

Variants: ``question_key`` names the underlying question; ``flipped`` marks a horizontally flipped
copy (3DSRBench FlipEval); ``circular_index`` is the rotation of the options (CircularEval, 0 for the
original order). An item without variants has ``question_key == item_id``, ``flipped`` false and
``circular_index`` 0.

``reference_boxes`` are the boxes the grounding analysis compares predicted boxes with (pseudo-GT
with validity, or ground truth with validity 1), on the 0..1000 grid; empty when the benchmark has none.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column, image_column

CONTRACT_VERSION = "1.0.0"
LETTERS = "ABCDEFGH"

BENCHMARKS = ["omnispatial", "spatialab", "cvbench", "3dsrbench", "blink", "stvqa_val", "dge_heldout"]
"""Benchmark names, in the order the reports show them."""

ANSWER_FORMATS = ["choice", "numeric"]

REFERENCE_BOX_FIELDS = {
    "bbox_2d": grid_box_column(),
    "label": dy.String(nullable=False),
    "validity": dy.Float64(nullable=False, min=0.0, max=1.0),
}


class EvalItems(dy.Schema):
    """A benchmark item with its images and its gold answer."""

    benchmark = dy.String(primary_key=True, min_length=1)
    item_id = dy.String(primary_key=True, min_length=1)
    images = dy.List(image_column(), nullable=False, min_length=1)
    image_width = dy.Int64(nullable=False, min=1)
    image_height = dy.Int64(nullable=False, min=1)
    question = dy.String(nullable=False, min_length=1)
    options = dy.List(dy.String(nullable=False), nullable=False, max_length=len(LETTERS))
    answer_format = dy.Enum(ANSWER_FORMATS, nullable=False)
    answer_index = dy.Int64(nullable=True, min=0)
    answer = dy.String(nullable=False, min_length=1)
    numeric_answer = dy.Float64(nullable=True)
    unit = dy.String(nullable=True)
    category = dy.String(nullable=False)
    task_type = dy.String(nullable=False)
    source = dy.String(nullable=False)
    question_key = dy.String(nullable=False, min_length=1)
    flipped = dy.Bool(nullable=False)
    circular_index = dy.Int64(nullable=False, min=0)
    reference_boxes = dy.List(dy.Struct(REFERENCE_BOX_FIELDS, nullable=False), nullable=False)
    split = dy.String(nullable=False)

    @dy.rule()
    def choice_or_numeric(cls) -> pl.Expr:
        """Multiple choice has a gold index and no number; a numeric item has a number and no options."""
        choice = (
            (cls.answer_format.col == "choice")
            & cls.answer_index.col.is_not_null()
            & cls.numeric_answer.col.is_null()
        )
        numeric = (
            (cls.answer_format.col == "numeric")
            & cls.answer_index.col.is_null()
            & cls.numeric_answer.col.is_not_null()
            & (cls.options.col.list.len() == 0)
        )
        return choice | numeric

    @dy.rule()
    def letter_matches_index(cls) -> pl.Expr:
        """The gold letter is the letter of ``answer_index``, which points at an option (A-D without options)."""
        letters = pl.lit(LETTERS)
        in_range = (
            pl.when(cls.options.col.list.len() == 0)
            .then(cls.answer_index.col < 4)
            .otherwise(cls.answer_index.col < cls.options.col.list.len())
        )
        return cls.answer_index.col.is_null() | (
            in_range & (cls.answer.col == letters.str.slice(cls.answer_index.col, 1))
        )

    @dy.rule()
    def reference_boxes_are_ordered(cls) -> pl.Expr:
        """Every reference box has x2 > x1 and y2 > y1."""
        return all_grid_boxes_valid(cls.reference_boxes.col, "bbox_2d")
