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

``origin`` says whether an item comes from the built-in sample world (the default OmniSpatial and
SpatiaLab locations, and the graph's own tables built from sample-world sources) or from a real data
set, so a report never mixes the two silently.

``reference_boxes`` are the boxes the grounding analysis compares predicted boxes with (pseudo-GT
with validity, or ground truth with validity 1), on the 0..1000 grid; empty when the benchmark has none.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.columns import all_grid_boxes_valid, grid_box_column, image_column
from data_contracts.origin import origin_column

CONTRACT_VERSION = "1.1.0"
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

    benchmark = dy.String(
        primary_key=True,
        min_length=1,
        description="Benchmark name: 'omnispatial', 'spatialab', 'cvbench', '3dsrbench', 'blink', 'stvqa_val' "
        "or 'dge_heldout'.",
    )
    item_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Item id within the benchmark: mcq_questions.question_id for OmniSpatial and SpatiaLab, "
        "'cvbench/<2d|3d>/<idx>', '3dsrbench/<qid>' (variant suffixes included), 'blink/<idx>', "
        "'stvqa/<image_id>/<8 hex digits of the question>', 'dge/<task_id>'; CircularEval copies add "
        "'#circular<r>'.",
    )
    images = dy.List(
        image_column(),
        nullable=False,
        min_length=1,
        description="The item's images as Hugging Face image cells {bytes, path}, in the benchmark's order (BLINK "
        "has up to four); the bytes as the benchmark ships them (format sniffed, not taken from the name).",
    )
    image_width = dy.Int64(nullable=False, min=1, description="Width of the first image in pixels.")
    image_height = dy.Int64(nullable=False, min=1, description="Height of the first image in pixels.")
    question = dy.String(nullable=False, min_length=1, description="The question text, without the options.")
    options = dy.List(
        dy.String(nullable=False),
        nullable=False,
        max_length=len(LETTERS),
        description="Option texts without letters, in the order shown (option i has letter 'ABCDEFGH'[i]); "
        "empty for numeric items and for OmniSpatial items whose choices are drawn in the image (letters A-D).",
    )
    answer_format = dy.Enum(
        ANSWER_FORMATS,
        nullable=False,
        description="'choice' (answer_index and its letter) or 'numeric' (numeric_answer with unit).",
    )
    answer_index = dy.Int64(
        nullable=True,
        min=0,
        description="0-based index of the gold option, converted from the benchmark's own index or letter "
        "(OmniSpatial 0-based, SpatiaLab 1-based, CV-Bench and BLINK '(A)', 3DSRBench a bare letter); null for "
        "numeric items.",
    )
    answer = dy.String(
        nullable=False,
        min_length=1,
        description="The gold answer as text: the letter of answer_index, or the number of a numeric item "
        "without its unit (dge_tasks' answer text).",
    )
    numeric_answer = dy.Float64(
        nullable=True, description="Gold value of a numeric item, in unit; null for multiple choice."
    )
    unit = dy.String(
        nullable=True,
        description="Unit of numeric_answer ('m', 'cm' or 'm^2'); null for multiple choice and for counts.",
    )
    category = dy.String(
        nullable=False,
        description="Finest group reported per benchmark: OmniSpatial's sub_task_type, SpatiaLab's Category, "
        "CV-Bench's task, 3DSRBench's category, BLINK's subset, STVQA's category, DGE's task_type.",
    )
    task_type = dy.String(
        nullable=False,
        description="Coarser group: OmniSpatial's task_type, SpatiaLab's Category (same as category), "
        "CV-Bench's '2D' / '3D', 3DSRBench's main category, BLINK's subset, the STVQA level (easy / medium / "
        "hard), DGE's task_type.",
    )
    source = dy.String(
        nullable=False,
        description="Where the item comes from: the mcq source ('omnispatial', 'spatialab'), CV-Bench's image "
        "source (ADE20K, COCO, Omni3D), '3dsrbench', 'blink', 'stvqa', or the DGE row's geometry_source "
        "('scanned' / 'estimated').",
    )
    question_key = dy.String(
        nullable=False,
        min_length=1,
        description="The underlying question shared by its variants (3DSRBench flip and rotations, CircularEval "
        "copies); equal to item_id for an item without variants.",
    )
    flipped = dy.Bool(
        nullable=False, description="True for a horizontally flipped copy (3DSRBench FlipEval '-flip' qids)."
    )
    circular_index = dy.Int64(
        nullable=False,
        min=0,
        description="Rotation of the options (CircularEval): options rotated left by this many places, 0 for "
        "the original order.",
    )
    reference_boxes = dy.List(
        dy.Struct(REFERENCE_BOX_FIELDS, nullable=False),
        nullable=False,
        description="Boxes the grounding analysis compares predicted boxes with: {bbox_2d canonical [x1, y1, "
        "x2, y2] on the 0..1000 grid of the first image (x right, y down), label, validity in [0, 1]}; STVQA's "
        "gt_scene objects (validity 1) or a pseudo-GT table's boxes; empty when the benchmark has none.",
    )
    split = dy.String(
        nullable=False,
        description="Split the item was taken from: 'test' for OmniSpatial (the hash split of mcq_questions, or "
        "every question of a given folder), SpatiaLab, CV-Bench and 3DSRBench; 'val' for BLINK; the configured "
        "split of the stvqa table (default 'val') and of dge_tasks (default 'test').",
    )
    origin = origin_column("items")

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
